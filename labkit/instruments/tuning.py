"""The workload of known cost and the num_workers hint ``labkit bench`` uses (ch. 09, 09c).

Chapter 09 types :class:`WorkDataset` and 09c :func:`suggest_loader`'s arithmetic; the
``prefetch`` and ``profiling`` benchmarks (and the tests) import these copies.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from ..facilities import usable_cores


class WorkDataset(Dataset):
    """``n`` samples of known cost: each takes ``ms`` milliseconds, spinning on the CPU
    ("busy", like a decode: it holds the GIL) or sleeping ("sleep", like storage). Sample
    ``i``: ``(features, i)``. Chapter 09's ``workload.py``, its inputs checked."""

    def __init__(self, n: int, ms: float = 5.0, kind: str = "busy", features: int = 64):
        if kind not in ("busy", "sleep"):
            raise ValueError(f"kind must be 'busy' or 'sleep', not {kind!r}")
        self.n, self.seconds, self.kind, self.row = int(n), ms / 1e3, kind, torch.zeros(features)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self.kind == "sleep":
            time.sleep(self.seconds)
        else:   # CPU time, not wall time: a worker taken off its core gets no sample for free
            deadline = time.thread_time() + self.seconds
            while time.thread_time() < deadline:
                pass
        return self.row + i, i


@dataclass(frozen=True)
class Suggestion:
    """What :func:`suggest_loader` recommends, and why."""

    num_workers: int
    prefetch_factor: int
    expected_capacity: float    # batches/s the suggested workers should deliver
    limited_by: str             # "step" (the loader keeps up) or "cores" (it cannot)
    reason: str

    def loader_kwargs(self) -> dict:
        """``DataLoader`` keyword arguments (it suggests one worker or more)."""
        return {"num_workers": self.num_workers, "prefetch_factor": self.prefetch_factor,
                "persistent_workers": True}


def suggest_loader(worker_batches_per_s: float, step_batches_per_s: float, *,
                   cores: int | None = None, headroom: float = 1.2) -> Suggestion:
    """``ceil(headroom x step rate / one worker's rate)`` workers, at most ``cores``, with
    torch's default ``prefetch_factor`` of 2."""
    if worker_batches_per_s <= 0 or step_batches_per_s <= 0:
        raise ValueError("both rates must be positive (batches/s)")
    cores = cores or usable_cores()
    needed = headroom * step_batches_per_s / worker_batches_per_s
    workers = max(1, math.ceil(needed - 1e-9))
    limited = "cores" if workers > cores else "step"
    workers = min(workers, cores)
    capacity = workers * worker_batches_per_s
    prefetch = 2
    reason = (f"{step_batches_per_s:,.1f} batches/s x {headroom:g} headroom / "
              f"{worker_batches_per_s:,.1f} per worker = {needed:.2f} -> {workers} "
              f"worker{'s' if workers != 1 else ''} (~{capacity:,.1f} batches/s"
              + (f", capped by {cores} cores: loader-bound" if limited == "cores" else "")
              + f"); prefetch_factor {prefetch}")
    return Suggestion(num_workers=workers, prefetch_factor=prefetch, expected_capacity=capacity,
                      limited_by=limited, reason=reason)
