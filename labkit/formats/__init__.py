"""What stays of storage formats once the readers are typed in the chapter (chapter 12): the
LMDB/HDF5 writers and readers that ``labkit bench formats`` and the capstone's bake-off use
(not public)."""

from __future__ import annotations

from .hdf5rows import Hdf5Rows  # noqa: F401 - the bake-off's (tests/test_bakeoff.py)
from .lmdbrows import LmdbRows  # noqa: F401 - the bake-off's

__all__: list[str] = []
