"""``labkit bench meter-overhead``: what ``lk.measure`` costs per batch (chapter 01, measuring).

Best-of-each-side said -0.3 % and 2.7 % in two runs on a shared 2-core machine, so each
trial is one of an interleaved pair on the CPU clock, the figure the median paired ratio.
"""

from __future__ import annotations

import gc
import time

import torch
from torch.utils.data import DataLoader

from labkit.instruments.meter import measure
from labkit.instruments.stats import INCONCLUSIVE, judge, median_interval, paired_trials
from labkit.instruments.timer import best_of

from .registry import benchmark

GOAL_PCT = 2.0
MIN_BATCHES_PER_S = 100_000


def clock_read_ns(reads: int = 100_000) -> float:
    """Nanoseconds one ``time.perf_counter()`` costs (the meter's per-batch floor), CPU clock."""
    pc = time.perf_counter

    def reading():
        for _ in range(reads):
            pc()

    def empty():
        for _ in range(reads):
            pass

    cost = best_of(reading, repeats=5, clock="cpu").best_s
    loop = best_of(empty, repeats=5, clock="cpu").best_s
    return max(0.0, 1e9 * (cost - loop) / reads)


@benchmark("meter-overhead", goal=f"meter adds < {GOAL_PCT:g}% to a bare DataLoader loop at "
                                  "100k+ batches/s (median of paired CPU-time ratios, 95% "
                                  "interval); its floor is one clock read per batch "
                                  "(clock_floor_pct)")
def meter_overhead(batches: int = 10_000, pairs: int = 41) -> dict:
    """A bare loop against ``lk.measure``, the garbage collector off. ``overhead_pct``: uniform
    batches declared; ``exact_sizing_overhead_pct`` sizes every batch (no goal)."""
    loader = DataLoader([torch.arange(4)] * batches, batch_size=None, num_workers=0)

    def bare():
        for _ in loader:
            pass

    def metered(batch_size):
        def run():
            m = measure(loader, repeats=1, warmup=0, batch_size=batch_size)
            assert m.samples == 4 * batches, m.samples  # the meter counted every sample
        return run

    uniform, exact = metered(4), metered(None)  # each tiny batch is a tensor of 4 samples
    bare(), uniform(), exact()  # warm-up: imports, allocator, caches
    gc_was = gc.isenabled()
    gc.disable()
    try:
        # Separate phases: the exact mode's per-batch allocations would otherwise disturb
        # the trials that follow them.
        main = paired_trials(bare, uniform, pairs, clock="cpu")
        side = paired_trials(bare, exact, max(3, pairs // 4), clock="cpu")
    finally:
        if gc_was:
            gc.enable()
    bare_s, _, _, _ = median_interval([a for a, _ in main])
    bare_rate = batches / bare_s
    floor_ns = clock_read_ns()
    spread = max(a for a, _ in main) / min(a for a, _ in main) - 1
    result = {"batches": batches, "pairs": pairs, "bare_batches_per_s": bare_rate,
              "bare_trial_spread_pct": 100 * spread}
    result |= judge("overhead_pct", [100 * (b / a - 1) for a, b in main], GOAL_PCT,
                    higher_is_better=False)
    result["overhead_ns_per_batch"] = 1e9 * result["overhead_pct"] / 100 * bare_s / batches
    result["clock_read_ns"] = floor_ns
    result["clock_floor_pct"] = 100 * floor_ns * bare_rate / 1e9
    side_pct = [100 * (b / a - 1) for a, b in side]
    med, lo, hi, _ = median_interval(side_pct)
    result |= {"exact_sizing_overhead_pct": med, "exact_sizing_overhead_pct_range": [lo, hi],
               "exact_sizing_ns_per_batch": 1e9 * med / 100 * bare_s / batches}
    if bare_rate < MIN_BATCHES_PER_S:
        result["verdict"] = INCONCLUSIVE  # the goal is stated at 100k+ batches/s: slower here
    return result
