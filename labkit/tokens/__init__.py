"""The token corpus of chapter 11 (and 11b-11d): its fixture writer, and ``open_tokens``, which
maps the flat token file and checks it against its document index (the rest is typed)."""

from __future__ import annotations

from .corpus import open_tokens

__all__ = ["open_tokens"]
