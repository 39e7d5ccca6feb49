"""Instruments: meter, measurement, audits, memory, page cache, shuffle quality (ch. 01-08).

Its public names are reached as ``lk.instruments.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .audits import worker_tag
from .memcap import run_capped
from .memory import worker_memory
from .pagecache import page_cache_residency
from .resume import ResumeTrial, format_resume_table
from .shuffling import shard_of_bounds, shuffle_quality
from .tuning import WorkDataset, suggest_loader

__all__ = [
    "ResumeTrial",
    "WorkDataset",
    "format_resume_table",
    "page_cache_residency",
    "run_capped",
    "shard_of_bounds",
    "shuffle_quality",
    "suggest_loader",
    "worker_memory",
    "worker_tag",
]
