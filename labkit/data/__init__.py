"""Data the kit makes, and the teaching datasets over it (chapters 00-05).

Its public names are reached as ``lk.data.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .datasets import MemmapBatches, NpyFilesDataset
from .fixtures import ensure_fixtures, verify

__all__ = [
    "MemmapBatches",
    "NpyFilesDataset",
    "ensure_fixtures",
    "verify",
]
