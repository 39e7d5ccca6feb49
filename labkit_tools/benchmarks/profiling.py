"""``labkit bench profiling``: what the timeline's stamps and torch.profiler cost (chapter 13)."""

from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import nullcontext

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.data import DataLoader

from labkit.instruments.meter import measure, simulated_step
from labkit.instruments.tuning import WorkDataset
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit_tools.timeline import close_log, timed_loader

from .registry import benchmark


def _profiler_overhead(loader, step, batches: int, repeats: int) -> float:
    """torch.profiler (always active) over the plain loop, best of ``repeats`` each."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])

    def loop(profiled: bool) -> float:
        it = iter(loader)
        next(it)  # start-up is not the profiler's cost
        t = time.perf_counter()
        with profile(activities=acts) if profiled else nullcontext():
            for _ in range(batches):
                with record_function("step") if profiled else nullcontext():
                    step(next(it))
        return time.perf_counter() - t

    runs = [(loop(False), loop(True)) for _ in range(repeats)]
    return min(r[1] for r in runs) / min(r[0] for r in runs) - 1


@benchmark("profiling", goal="timeline stamps cost < 3% of samples/s on a fast loader")
def profiling_overhead(batches: int = 400, batch_size: int = 32, num_workers: int = 2,
                       trials: int = 5) -> dict:
    """Best-of-``trials`` samples/s with and without the timeline's stamps (three clock reads
    and a small write per batch), alternated, on a loader fast enough for them to matter."""
    ds = WorkDataset(batches * batch_size, ms=0.0)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=num_workers,
                        timeout=WORKER_TIMEOUT_S, persistent_workers=num_workers > 0)
    log_dir = tempfile.mkdtemp(prefix="labkit-bench-timeline-")
    stamped = timed_loader(loader, log_dir, persistent_workers=True)
    plain, timed = [], []
    try:
        for _ in range(trials):  # alternated: a busy moment on the machine hits both
            plain.append(measure(loader, repeats=1, warmup=1).best_samples_per_s)
            timed.append(measure(stamped, repeats=1, warmup=1).best_samples_per_s)
    finally:
        del loader, stamped  # the last references: torch stops their persistent workers
        close_log()
        shutil.rmtree(log_dir, ignore_errors=True)
    over = 1 - max(timed) / max(plain)
    small = DataLoader(WorkDataset(64 * 8, ms=0.0), batch_size=8)
    prof = _profiler_overhead(small, simulated_step(0.2, "busy"), batches=60, repeats=3)
    return {"plain_samples_per_s": round(max(plain)), "timeline_samples_per_s": round(max(timed)),
            "timeline_overhead": round(over, 4), "torch_profiler_overhead": round(prof, 4),
            "note": "torch.profiler on a loop of 60 small batches and a 0.2 ms step, always "
                    "active (no schedule): every op is recorded", "goal_met": bool(over < 0.03)}
