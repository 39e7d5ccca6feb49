"""What stays of storage formats once the readers are typed in the chapter (chapter 12): the
LMDB/HDF5 writers and readers ``labkit bench formats`` uses (not public; import them from
their modules)."""

from __future__ import annotations

__all__: list[str] = []
