"""JPEG images: decoders, datasets, augmentation, GPU paths (chapters 10, 14).

Its public names are reached as ``lk.images.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "available_decoders": "decode",
    "decode_jpeg": "decode",
    "fastest_decoder": "decode",
    "file_bytes": "decode",
    "make_augment": "augment",
    "steady_rate": "gpu",
})
