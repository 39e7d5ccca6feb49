"""JPEG images: decoders, the image-folder dataset, GPU decode paths (chapters 10, 16)."""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "decode_jpeg": "decode",
    "fastest_decoder": "decode",
    "file_bytes": "decode",
})
