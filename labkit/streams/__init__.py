"""Streams split across ranks x workers: one split base, arrays, row groups, tars (ch. 03-08).

Its public names are reached as ``lk.streams.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .arrays import RowRange, ShardStream, range_worker_init
from .rowgroups import ParquetRowGroups
from .tarshards import TarShardStream

__all__ = [
    "ParquetRowGroups",
    "RowRange",
    "ShardStream",
    "TarShardStream",
    "range_worker_init",
]
