"""The LMDB/HDF5 writers and readers ``labkit bench formats`` uses (chapter 12; not public)."""

from __future__ import annotations

__all__: list[str] = []
