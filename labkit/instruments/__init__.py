"""Instruments: meter, measurement, audits, page cache, shuffle quality (ch. 01-08).

Its public names are reached as ``lk.instruments.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .memcap import run_capped
from .pagecache import page_cache_residency
from .shuffling import shard_of_bounds, shuffle_quality

__all__ = [
    "page_cache_residency",
    "run_capped",
    "shard_of_bounds",
    "shuffle_quality",
]
