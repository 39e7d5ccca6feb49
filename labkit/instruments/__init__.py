"""Instruments: meter, measurement, audits, page cache, shuffle quality (ch. 01-08, 14).

Its public names are reached as ``lk.instruments.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "shard_of_bounds": "shuffling",
    "shuffle_quality": "shuffling",
})
