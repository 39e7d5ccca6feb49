"""Data the kit makes, and the teaching datasets over it (chapters 00-05): ``lk.data.NAME``."""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "MemmapBatches": "datasets",
    "NpyFilesDataset": "datasets",
})
