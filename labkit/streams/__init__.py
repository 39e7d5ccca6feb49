"""Streams split across ranks x workers: one split base, array shards, tar shards (ch. 03-05)."""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "ShardStream": "arrays",
})
