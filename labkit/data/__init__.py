"""Data the kit makes, and the teaching datasets over it (chapters 00-05).

Its public names are reached as ``lk.data.NAME`` (``import labkit as lk``); its
modules' other names are for labkit, the tools and tests (``fixtures.ensure_fixtures``
is ``labkit fixtures``; ``fixtures.verify`` what ``lk.fixture`` checks a cached fixture with).
"""

from __future__ import annotations

from .datasets import MemmapBatches, NpyFilesDataset

__all__ = [
    "MemmapBatches",
    "NpyFilesDataset",
]
