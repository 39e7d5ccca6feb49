"""Named benchmarks that print their figures: ratios against a baseline measured in the same run.

Performance is checked here, not in timed test assertions that flake: a benchmark reports
what it measured and whether the goal was met, and the numbers go into the closing notes.
Run one with ``labkit bench NAME [--json]``.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

BENCHMARKS: dict[str, Callable[..., dict]] = {}


def benchmark(name: str, goal: str):
    """Register a benchmark function under ``name``; ``goal`` says what passing means."""

    def wrap(fn):
        fn.goal = goal
        BENCHMARKS[name] = fn
        return fn

    return wrap


def run_benchmark(name: str, **kwargs) -> dict:
    """Run the named benchmark and return its figures (a JSON-ready dict)."""
    if name not in BENCHMARKS:
        raise KeyError(f"no benchmark named {name!r}; available: {', '.join(sorted(BENCHMARKS))}")
    fn = BENCHMARKS[name]
    result = {"benchmark": name, "goal": fn.goal, **fn(**kwargs)}
    return result


def format_result(result: dict) -> str:
    lines = [f"benchmark {result['benchmark']}  (goal: {result['goal']})"]
    for k, v in result.items():
        if k in ("benchmark", "goal"):
            continue
        lines.append(f"  {k:<24} {v:,.4g}" if isinstance(v, float) else f"  {k:<24} {v}")
    return "\n".join(lines)


class _TinyDataset:
    """A map-style dataset of one precomputed 4-element tensor: the loader costs ~nothing."""

    def __init__(self, n: int):
        import torch

        self.n, self.item = n, torch.arange(4)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.item


@benchmark("meter-overhead", goal="meter adds < 2% to a bare loop at 100k+ batches/s")
def meter_overhead(batches: int = 50_000, trials: int = 41) -> dict:
    """Time a bare ``for batch in loader`` against ``lk.measure`` on the same DataLoader.

    The loader is a real ``torch.utils.data.DataLoader`` (``batch_size=None``, no workers)
    over a dataset whose item costs nothing, so it yields 100k+ tiny batches per second and
    every nanosecond the meter spends per batch shows. Trials alternate bare and metered
    passes; each side's cost is its fastest trial (noise only adds time), and
    ``trial_spread_pct`` shows how noisy the machine was. ``overhead_pct``
    is the meter with uniform batches declared (one clock read per batch, what a stock
    DataLoader gets automatically); ``exact_sizing_overhead_pct`` also sizes every batch.
    """
    from torch.utils.data import DataLoader

    from .meter import measure

    loader = DataLoader(_TinyDataset(batches), batch_size=None, num_workers=0)

    def bare() -> float:
        t0 = time.perf_counter()
        for _ in loader:
            pass
        return time.perf_counter() - t0

    def metered(batch_size) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            m = measure(loader, repeats=1, warmup=0, batch_size=batch_size)
            elapsed = time.perf_counter() - t0
            assert m.samples == 4 * batches, m.samples  # the meter counted every sample
            return elapsed
        return run

    uniform, exact = metered(4), metered(None)  # each tiny batch is a tensor of 4 samples
    bare(), uniform(), exact()  # warm-up: imports, allocator, caches

    def alternate(other, n) -> list[tuple[float, float]]:
        """``n`` (bare, other) pairs, alternating which goes first."""
        pairs = []
        for i in range(n):
            if i % 2 == 0:
                a, b = bare(), other()
            else:
                b, a = other(), bare()
            pairs.append((a, b))
        return pairs

    gc_was = gc.isenabled()
    gc.disable()  # a collection landing in one side of a pair is noise, not overhead
    try:
        # Separate phases: the exact mode's per-batch allocations would otherwise disturb
        # the trials that follow them.
        main = alternate(uniform, trials)
        side = alternate(exact, max(3, trials // 4))
    finally:
        if gc_was:
            gc.enable()
    # Noise on a shared machine only ever adds time, so the fastest of several trials is the
    # best estimate of each side's own cost (the reasoning behind timeit's "use the min").
    bare_s = min(a for a, _ in main)
    over_uniform = min(b for _, b in main) / bare_s - 1
    over_exact = min(b for _, b in side) / min(a for a, _ in side) - 1
    return {
        "batches": batches,
        "trials": trials,
        "bare_batches_per_s": batches / bare_s,
        "overhead_pct": 100 * over_uniform,
        "overhead_ns_per_batch": 1e9 * over_uniform * bare_s / batches,
        "overhead_pct_median_of_pairs": 100 * (statistics.median(b / a for a, b in main) - 1),
        "trial_spread_pct": 100 * (max(a for a, _ in main) / bare_s - 1),
        "exact_sizing_overhead_pct": 100 * over_exact,
        "exact_sizing_ns_per_batch": 1e9 * over_exact * bare_s / batches,
        "goal_met": bool(over_uniform < 0.02 and batches / bare_s >= 100_000),
    }


# -- mmap (chapter 02) -----------------------------------------------------------------------

@benchmark("mmap", goal="batched sequential memmap read >= 0.7x plain page-cache file read")
def mmap_read(mib: int = 256, batch_kib: int = 256, trials: int = 7) -> dict:
    """Warm page cache: copy a file out batch by batch via ``np.memmap`` vs ``readinto``.

    Both sides read the same file, from the page cache (a warm-up pass loads it), in
    ``batch_kib`` chunks into a buffer that is reused, as a loader's batch would be. The
    memmap side maps the file afresh each pass, so its page faults are counted; the
    baseline is ``f.readinto``, the cheapest way Python reads a cached file. Trials
    alternate; each side's figure is its fastest trial (noise only adds time).
    """
    import os
    import tempfile

    import numpy as np

    nbytes, chunk = mib << 20, batch_kib << 10
    with tempfile.TemporaryDirectory(prefix="labkit-bench-mmap-") as tmp:
        path = os.path.join(tmp, "data.raw")
        block = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8)
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(block.tobytes())
        buf = np.empty(chunk, np.uint8)
        view = memoryview(buf)

        def plain() -> float:
            t0 = time.perf_counter()
            with open(path, "rb", buffering=0) as f:
                while f.readinto(view):
                    pass
            return time.perf_counter() - t0

        def mapped() -> float:
            t0 = time.perf_counter()
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for lo in range(0, nbytes, chunk):
                part = mm[lo:lo + chunk]
                buf[:len(part)] = part  # the batch copy a loader makes
            del mm
            return time.perf_counter() - t0

        plain(), mapped()  # warm-up: the file into the page cache
        p, m = [], []
        for i in range(trials):
            if i % 2:
                m.append(mapped())
                p.append(plain())
            else:
                p.append(plain())
                m.append(mapped())
    plain_bw, mmap_bw = nbytes / min(p), nbytes / min(m)
    ratio = mmap_bw / plain_bw
    return {
        "file_mib": mib,
        "batch_kib": batch_kib,
        "trials": trials,
        "plain_read_gb_per_s": plain_bw / 1e9,
        "mmap_read_gb_per_s": mmap_bw / 1e9,
        "ratio": ratio,
        "trial_spread_pct": 100 * (max(m) / min(m) - 1),
        "goal_met": bool(ratio >= 0.7),
    }
