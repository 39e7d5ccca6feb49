"""JPEG images: decoders, datasets, augmentation, GPU paths (chapters 10, 14).

Its public names are reached as ``lk.images.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .augment import make_augment
from .decode import available_decoders, decode_jpeg, fastest_decoder, file_bytes
from .gpu import (
    dali_decode_rate,
    gpu_decode_rate,
    nvjpeg_decode,
    steady_rate,
)

__all__ = [
    "available_decoders",
    "dali_decode_rate",
    "decode_jpeg",
    "fastest_decoder",
    "file_bytes",
    "gpu_decode_rate",
    "make_augment",
    "nvjpeg_decode",
    "steady_rate",
]
