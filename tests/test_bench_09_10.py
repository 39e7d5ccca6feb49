"""The chapter 09 and 10 benchmarks run at a tiny size and return their figures (no timing
is asserted: performance is reported, not tested)."""

from __future__ import annotations

import labkit as lk


def test_prefetch_benchmark_keys():
    r = lk.run_benchmark("prefetch", ms_per_sample=0.2, batch_size=4, batches=8, repeats=1)
    for k in ("suggested_num_workers", "capacity_over_step", "naive_wait_over_step",
              "tuned_wait_over_step", "goal_met", "suggestion_verified"):
        assert k in r
    assert isinstance(r["goal_met"], bool)


def test_decode_benchmark_keys(ci_fixture):
    ci_fixture("images")
    r = lk.run_benchmark("decode", scale="ci", samples=128, batch_size=16, rounds=1)
    for k in ("single_core_samples_per_s", "workers_samples_per_s", "ideal_samples_per_s",
              "ratio", "goal_met"):
        assert k in r
    assert r["num_workers"] == r["cores"]  # the default: one worker per usable core
