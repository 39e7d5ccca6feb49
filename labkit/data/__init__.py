"""Data the kit makes, and the teaching datasets over it (chapters 00-05).

Its public names are reached as ``lk.data.NAME`` (``import labkit as lk``); its
modules' other names are for labkit, the tools and tests (``fixtures.ensure_fixtures``
is ``labkit fixtures``; ``fixtures.verify`` what ``lk.fixture`` checks a cached fixture with).
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "MemmapBatches": "datasets",
    "NpyFilesDataset": "datasets",
})
