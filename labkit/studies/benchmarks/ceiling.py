"""What parallelism this machine gives right now (chapters 06, 10: the workers' ceiling).

On a machine other programs share, N workers on N cores cannot reach N x one worker: the
cores are not all free. Before judging a workers' speed-up, the benchmarks measure the
ceiling: N processes each burning the same fixed CPU work against one process doing it
alone, interleaved, so a speed-up goal above what the machine gives now is reported as
``inconclusive`` (machine busy), not as the loader's failure.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time


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
    """How many times one process's rate ``n`` processes get now: median and range of pairs.

    ``n x t(1) / t(n)`` for ``pairs`` interleaved (1, n) runs of about ``work_s`` each.
    """
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
    """``NAME_ceiling`` (measured parallelism / ``per``) with its range; ``NAME_verdict``
    becomes ``inconclusive`` when it was not a pass and even the ceiling's top is below
    ``goal`` (the machine, not the loader, kept the figure down)."""
    lo = min(before["parallelism_range"][0], after["parallelism_range"][0]) / per
    hi = max(before["parallelism_range"][1], after["parallelism_range"][1]) / per
    mid = statistics.median([before["parallelism"], after["parallelism"]]) / per
    out = {f"{name}_ceiling": mid, f"{name}_ceiling_range": [lo, hi],
           f"{name}_of_ceiling": result[name] / mid}
    if result[f"{name}_verdict"] != "pass" and hi < goal:
        out[f"{name}_verdict"] = "inconclusive"
        out[f"{name}_why"] = (f"machine busy: {per * hi:.2f}x parallelism at most for "
                              f"{before['processes']} processes, the goal needs {goal:g}"
                              + (f" x {per:g}" if per != 1 else ""))
    return out
