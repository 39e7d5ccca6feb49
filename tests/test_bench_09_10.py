"""The chapter 09 and 10 benchmarks run at a tiny size and return their figures (no timing
is asserted: performance is reported, not tested)."""

from __future__ import annotations

from labkit_tools.bench import run_benchmark


def test_prefetch_benchmark_keys():
    r = run_benchmark("prefetch", ms_per_sample=0.2, batch_size=4, batches=8, repeats=2)
    for k in ("suggested_num_workers", "capacity_over_step", "capacity_over_step_ci",
              "naive_wait_over_step", "tuned_wait_over_step", "tuned_wait_over_step_verdict",
              "goal_met", "verdict", "suggestion_verified"):
        assert k in r
    assert isinstance(r["goal_met"], bool)
    assert r["verdict"] in ("pass", "fail", "inconclusive")


def test_decode_benchmark_keys(ci_fixture):
    ci_fixture("images")
    r = run_benchmark("decode", scale="ci", samples=128, batch_size=16, rounds=1)
    for k in ("single_core_samples_per_s", "workers_samples_per_s", "ideal_samples_per_s",
              "ratio", "ratio_ci", "ratio_verdict", "verdict", "goal_met"):
        assert k in r
    lo, hi = r["ratio_ci"]
    assert lo <= r["ratio"] <= hi
    assert r["num_workers"] == r["cores"]  # the default: one worker per usable core
