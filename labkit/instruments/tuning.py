"""Cores, thread pools, a workload of known cost, a num_workers hint (ch. 00, 09-11, 13, 15, 16).

:class:`WorkDataset` costs exactly ``ms`` milliseconds per sample (CPU-busy, like decode and
augmentation, or sleeping, like waiting on storage), so worker scaling can be measured
against a known answer. :func:`suggest_loader` turns two measured rates, what one worker
delivers and what the train step consumes, into ``num_workers`` and ``prefetch_factor``.
:func:`usable_cores` and :func:`thread_pools` (chapter 00) say what a worker can run on.
Introduced in chapter 09.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from ..facilities import usable_cores
from ..records.machine import threadpools
from .audits import worker_tag


def thread_pools(batch=None) -> dict:
    """The calling process's thread pools: ``{"source", "torch", "pools"}`` (chapter 00).

    ``source`` is ``main`` or the worker (``worker0``, ...), ``torch`` its intra-op threads,
    ``pools`` the native pools threadpoolctl finds loaded (torch's OpenMP, numpy's BLAS),
    each with ``internal_api`` and ``num_threads``. ``batch`` is ignored, so a DataLoader
    can call this as its ``collate_fn`` and each batch reports the worker that made it (a
    module-level function: spawn and forkserver workers can unpickle it).
    """
    return {"source": worker_tag(), "torch": torch.get_num_threads(), "pools": threadpools()}


class WorkDataset(Dataset):
    """``n`` samples that each cost ``ms`` milliseconds to produce (chapter 09).

    ``kind="busy"`` spins for ``ms`` of CPU time (holds the GIL: decode, augmentation,
    parsing; on a contended core it takes longer in wall time, like real work);
    ``kind="sleep"`` waits without using a core (network, a slow disk). Sample ``i`` is
    ``(features, i)`` with ``features`` a float32 tensor of ``features`` values.
    """

    def __init__(self, n: int, ms: float = 5.0, kind: str = "busy", features: int = 64):
        if kind not in ("busy", "sleep"):
            raise ValueError(f"kind must be 'busy' or 'sleep', not {kind!r}")
        self.n, self.seconds, self.kind = int(n), ms / 1e3, kind
        self.row = torch.zeros(features)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self.kind == "sleep":
            time.sleep(self.seconds)
        else:
            # CPU time, not wall time: a worker the scheduler takes off its core must not
            # get its sample for free (with more workers than cores it would, on a wall clock)
            deadline = time.thread_time() + self.seconds
            while time.thread_time() < deadline:
                pass
        return self.row + i, i


@dataclass(frozen=True)
class Suggestion:
    """What :func:`suggest_loader` recommends, and the arithmetic behind it."""

    num_workers: int
    prefetch_factor: int
    needed_workers: float       # step rate x headroom / one worker's rate (unrounded)
    expected_capacity: float    # batches/s the suggested workers should deliver
    step_batches_per_s: float
    limited_by: str             # "step" (the loader keeps up) or "cores" (it cannot)
    reason: str

    @property
    def capacity_ratio(self) -> float:
        """Expected loader capacity over the step's consumption (>= headroom when met)."""
        return self.expected_capacity / self.step_batches_per_s

    def loader_kwargs(self) -> dict:
        """The tuning knobs, for ``DataLoader(ds, batch_size=..., timeout=...,
        **suggestion.loader_kwargs())``, within torch's rules (no ``prefetch_factor`` or
        persistent workers without workers; the caller's ``timeout=`` only with workers)."""
        workers = self.num_workers > 0
        return {"num_workers": self.num_workers,
                "prefetch_factor": self.prefetch_factor if workers else None,
                "persistent_workers": workers}


def suggest_loader(worker_batches_per_s: float, step_batches_per_s: float, *,
                   cores: int | None = None, headroom: float = 1.2,
                   batch_time_p99_s: float | None = None) -> Suggestion:
    """Recommend ``num_workers`` and ``prefetch_factor`` from two measured rates.

    Args:
        worker_batches_per_s: batches/s one worker (or the main process, num_workers=0)
            produces: measure the dataset with ``num_workers=0`` and no step.
        step_batches_per_s: batches/s the train step consumes (the step alone).
        cores: CPU cores the workers can use (default :func:`usable_cores`); one process
            per core is the ceiling for CPU-bound samples.
        headroom: loader capacity to aim for, as a multiple of the step rate (1.2: 20 %
            spare, so jitter does not show up as data-wait).
        batch_time_p99_s: a slow batch (p99 of one worker's batch time); when it is longer
            than the buffer in front of the step covers, prefetch_factor grows to cover it.

    Workers: ``ceil(headroom x step rate / worker rate)``, at most ``cores``. Each worker
    then has ``num_workers`` step times to make its next batch; ``prefetch_factor`` batches
    queued per worker (default 2, torch's) absorb a slow batch if
    ``prefetch_factor x num_workers x step time >= p99 batch time``.
    """
    if worker_batches_per_s <= 0 or step_batches_per_s <= 0:
        raise ValueError("both rates must be positive (batches/s)")
    cores = cores or usable_cores()
    needed = headroom * step_batches_per_s / worker_batches_per_s
    workers = max(1, math.ceil(needed - 1e-9))
    limited = "step"
    if workers > cores:
        workers, limited = cores, "cores"
    capacity = workers * worker_batches_per_s
    step_s = 1 / step_batches_per_s
    prefetch = 2
    if batch_time_p99_s is not None:
        prefetch = max(2, math.ceil(batch_time_p99_s / (workers * step_s)))
    if limited == "cores":
        reason = (f"the step wants {step_batches_per_s:,.1f} batches/s x {headroom:g} headroom "
                  f"= {needed:.2f} workers' worth, but only {cores} cores: {workers} workers "
                  f"deliver ~{capacity:,.1f} batches/s, so the loop stays loader-bound; make "
                  "samples cheaper (chapter 10) or move work to the GPU")
    else:
        reason = (f"{step_batches_per_s:,.1f} batches/s x {headroom:g} headroom / "
                  f"{worker_batches_per_s:,.1f} per worker = {needed:.2f} -> {workers} "
                  f"worker{'s' if workers != 1 else ''} (~{capacity:,.1f} batches/s); "
                  f"prefetch_factor {prefetch} queues {prefetch * workers} batches")
    return Suggestion(num_workers=workers, prefetch_factor=prefetch, needed_workers=needed,
                      expected_capacity=capacity, step_batches_per_s=step_batches_per_s,
                      limited_by=limited, reason=reason)
