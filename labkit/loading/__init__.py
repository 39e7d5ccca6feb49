"""Loaders and prefetchers: DataLoaders that cannot hang, prefetch, processes (ch. 01, 09).

Its public names are reached as ``lk.loading.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .prefetchers import CudaStreamPrefetcher, ThreadPrefetcher

__all__ = [
    "CudaStreamPrefetcher",
    "ThreadPrefetcher",
]
