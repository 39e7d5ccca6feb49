"""What parallelism this machine gives right now (chapters 06, 10, 15: the workers' ceiling).

On a shared machine N workers cannot reach N x one worker: a miss the machine caused (N
processes burning fixed CPU work get less) is ``inconclusive``, not the loader's failure.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time

import torch
from torch.utils.data import DataLoader

from labkit.instruments.meter import measure
from labkit.instruments.stats import judge
from labkit.instruments.tuning import usable_cores
from labkit.loading.loaders import WORKER_TIMEOUT_S


def _burn(iterations: int) -> None:
    x = 0
    for i in range(iterations):
        x ^= i


def _worker(iterations: int, go, done) -> None:
    go.wait()
    _burn(iterations)
    done.put(time.perf_counter())  # CLOCK_MONOTONIC: comparable across processes


def _run(n: int, iterations: int) -> float:
    """Seconds for ``n`` processes, started together, each to burn ``iterations``."""
    ctx = mp.get_context("fork")
    go, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(iterations, go, done), daemon=True)
             for _ in range(n)]
    for p in procs:
        p.start()
    time.sleep(0.02)  # let them reach the start line
    t0 = time.perf_counter()
    go.set()
    end = max(done.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    return end - t0


def available_parallelism(n: int, pairs: int = 3, work_s: float = 0.1) -> dict:
    """How many times one process's rate ``n`` processes get now: ``n x t(1) / t(n)``, median
    and range over ``pairs`` interleaved (1, n) runs of about ``work_s`` each."""
    t = time.perf_counter()
    _burn(100_000)
    iterations = max(10_000, int(100_000 * work_s / max(1e-6, time.perf_counter() - t)))
    ratios = []
    for i in range(pairs):
        if i % 2 == 0:
            one, many = _run(1, iterations), _run(n, iterations)
        else:
            many, one = _run(n, iterations), _run(1, iterations)
        ratios.append(n * one / many)
    return {"processes": n, "parallelism": statistics.median(ratios),
            "parallelism_range": [min(ratios), max(ratios)]}


def busy_verdict(name: str, result: dict, before: dict, after: dict, goal: float,
                 per: float = 1.0) -> dict:
    """``NAME_ceiling`` (measured parallelism / ``per``) with its range; a miss is
    ``inconclusive`` when even the ceiling's top is below ``goal``."""
    lo = min(before["parallelism_range"][0], after["parallelism_range"][0]) / per
    hi = max(before["parallelism_range"][1], after["parallelism_range"][1]) / per
    mid = statistics.median([before["parallelism"], after["parallelism"]]) / per
    out = {f"{name}_ceiling": mid, f"{name}_ceiling_range": [lo, hi],
           f"{name}_of_ceiling": result[name] / mid}
    return out | capped_verdict(
        name, result, hi, goal, f"machine busy: {per * hi:.2f}x parallelism at most for "
        f"{before['processes']} processes, the goal needs {goal:g}"
        + (f" x {per:g}" if per != 1 else ""))


def capped_verdict(name: str, result: dict, cap: float, goal: float, why: str) -> dict:
    """``NAME_verdict: inconclusive`` and ``NAME_why: why`` when NAME was not a pass and
    ``cap``, the best figure the machine or the setup allows, is below ``goal``; else ``{}``."""
    if result[f"{name}_verdict"] != "pass" and cap < goal:
        return {f"{name}_verdict": "inconclusive", f"{name}_why": why}
    return {}


def worker_scaling(dataset, goal: float, num_workers: int | None = None,
                   batch_size: int = 256, rounds: int = 7, unit: str = "samples") -> dict:
    """``dataset`` in the main process against ``num_workers`` warm workers (default: the
    cores), ``ratio`` over the ideal min(num_workers, cores), judged by :func:`busy_verdict`."""
    cores = usable_cores()
    n = num_workers or cores
    ideal = min(n, cores)
    single_loader = DataLoader(dataset, batch_size=batch_size)
    multi_loader = DataLoader(dataset, batch_size=batch_size, num_workers=n, prefetch_factor=4,
                              persistent_workers=True, timeout=WORKER_TIMEOUT_S)

    def rate(loader) -> float:
        # the whole pass: the steady rate skips the first batch's wait, during which warm
        # workers fill num_workers x prefetch_factor batches, so a short pass read 100x
        return measure(loader, repeats=1, warmup=0).epoch_samples_per_s

    single, multi = [], []
    threads = torch.get_num_threads()
    # One core means one core: workers run torch single-threaded, but the main process's
    # collate would use the intra-op pool, which on a busy machine waits for its threads.
    torch.set_num_threads(1)
    try:
        rate(multi_loader), rate(single_loader)  # start the workers, import, warm caches
        before = available_parallelism(ideal)
        for i in range(rounds):
            order = ((single_loader, single), (multi_loader, multi))
            for loader, out in (order if i % 2 == 0 else order[::-1]):
                out.append(rate(loader))
        after = available_parallelism(ideal)
    finally:
        # the last references to the loader: its persistent workers stop with it
        multi_loader = order = loader = None
        torch.set_num_threads(threads)
    result = {"cores": cores, "num_workers": n, "batch_size": batch_size, "rounds": rounds,
              f"single_core_{unit}_per_s": max(single), f"workers_{unit}_per_s": max(multi),
              f"ideal_{unit}_per_s": max(single) * ideal}
    result |= judge("ratio", [m / (s * ideal) for s, m in zip(single, multi, strict=True)], goal)
    return result | busy_verdict("ratio", result, before, after, goal, per=ideal)
