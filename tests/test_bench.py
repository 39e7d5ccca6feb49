"""Benchmarks run at a tiny size and report their keys (timings are never asserted); the
statistics behind their verdicts are checked on synthetic inputs."""

from __future__ import annotations

import json

import pytest

from labkit.instruments import stats
from labkit_tools import bench


def _judged(result: dict, name: str) -> None:
    """A judged figure comes with its interval, level and one of three verdicts."""
    lo, hi = result[f"{name}_ci"]
    assert lo <= result[name] <= hi
    assert 0 <= result[f"{name}_ci_level"] <= 1  # one trial: a 0 % interval
    assert result[f"{name}_verdict"] in ("pass", "fail", "inconclusive")


def test_webdataset_benchmark_reports_both_ratios_with_intervals(ci_fixture):
    ci_fixture("wds")
    result = bench.run_benchmark("webdataset", scale="ci", pairs=2, worker_pairs=1, epochs=1)
    for key in ("tarfile_samples_per_s", "wds_samples_per_s", "decode_1_worker_samples_per_s",
                "decode_2_workers_samples_per_s", "verdict", "goal_met"):
        assert key in result, key
    _judged(result, "read_ratio_vs_tarfile")
    _judged(result, "workers_2_vs_1")
    lo, hi = result["workers_2_vs_1_ceiling_range"]  # what the machine gave 2 processes
    assert 0 < lo <= result["workers_2_vs_1_ceiling"] <= hi
    assert result["samples"] == 512 and result["read_ratio_vs_tarfile"] > 0
    assert result["goal_met"] == (result["verdict"] == "pass")
    json.dumps(result)  # JSON-ready
    text = bench.format_result(result)
    assert "read_ratio_vs_tarfile" in text and "interval" in text


def test_mmap_benchmark_reports_its_ratio(tmp_path):
    result = bench.run_benchmark("mmap", mib=4, batch_kib=64, pairs=2)
    _judged(result, "ratio")
    assert result["verdict"] in ("pass", "fail", "inconclusive")


def test_every_benchmark_is_registered_with_a_goal():
    """Importing labkit_tools.bench registers every one: the chapters' own ones too."""
    assert set(bench.BENCHMARKS) == {"decode", "formats", "media", "meter-overhead",
                                     "gpu", "mmap", "objectstore", "prefetch", "profiling",
                                     "tokens", "webdataset"}
    assert all(fn.goal for fn in bench.BENCHMARKS.values())


def test_median_interval_is_the_sign_test_interval():
    # 10 values: k = 2 is the largest with coverage >= 95 % (1 - 2 * 11/1024 = 97.9 %)
    med, lo, hi, level = stats.median_interval(range(1, 11))
    assert (med, lo, hi) == (5.5, 2, 9) and level == pytest.approx(1 - 22 / 1024)
    # too few values for 95 %: the full range, at the level it does reach
    assert stats.median_interval([3, 1, 2]) == (2, 1, 3, 0.75)
    with pytest.raises(ValueError):
        stats.median_interval([])


def test_verdict_is_inconclusive_when_the_interval_straddles_the_goal():
    assert stats.verdict(0.82, 0.90, 0.8) == "pass"
    assert stats.verdict(0.70, 0.79, 0.8) == "fail"
    assert stats.verdict(0.76, 0.83, 0.8) == "inconclusive"  # the runs that said 0.76-0.83
    # lower is better (overhead < 2 %)
    assert stats.verdict(0.5, 1.9, 2.0, higher_is_better=False) == "pass"
    assert stats.verdict(2.0, 3.0, 2.0, higher_is_better=False) == "fail"
    assert stats.verdict(-0.3, 2.7, 2.0, higher_is_better=False) == "inconclusive"
    assert stats.overall("pass", "inconclusive") == "inconclusive"
    assert stats.overall("inconclusive", "fail", "pass") == "fail"
    assert stats.overall("pass", "pass") == "pass"


def test_judge_on_noisy_synthetic_ratios():
    import random

    rng = random.Random(0)
    steady = [0.9 + rng.gauss(0, 0.01) for _ in range(15)]
    noisy = [0.8 + rng.gauss(0, 0.2) for _ in range(15)]
    assert stats.judge("r", steady, 0.8)["r_verdict"] == "pass"
    assert stats.judge("r", noisy, 0.8)["r_verdict"] == "inconclusive"
    assert stats.judge("r", [x - 0.3 for x in steady], 0.8)["r_verdict"] == "fail"


def test_paired_trials_interleave_and_alternate_the_order():
    calls = []
    pairs = stats.paired_trials(lambda: calls.append("a"), lambda: calls.append("b"), 3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert len(pairs) == 3 and all(a >= 0 and b >= 0 for a, b in pairs)


def test_format_result_prints_the_interval_beside_the_figure():
    result = {"benchmark": "x", "goal": "r >= 0.8", **stats.judge("r", [0.7, 0.8, 0.9], 0.8),
              "verdict": "inconclusive"}
    lines = bench.format_result(result).splitlines()
    assert lines[0] == "benchmark x  (goal: r >= 0.8)"
    assert any(line.split()[0] == "r" and "[0.7, 0.9]" in line and "inconclusive" in line
               for line in lines)
    assert not any(line.split()[0] in ("r_ci", "r_verdict") for line in lines[1:])


def test_a_miss_below_the_machines_ceiling_is_inconclusive():
    from labkit_tools.benchmarks.ceiling import busy_verdict

    busy = {"processes": 2, "parallelism": 1.2, "parallelism_range": [1.1, 1.3]}
    idle = {"processes": 2, "parallelism": 1.95, "parallelism_range": [1.9, 2.0]}
    failed = {"w": 1.15, "w_verdict": "fail"}
    out = busy_verdict("w", failed, busy, busy, goal=1.6)
    assert out["w_verdict"] == "inconclusive" and "machine busy" in out["w_why"]
    assert out["w_ceiling"] == 1.2 and out["w_ceiling_range"] == [1.1, 1.3]
    assert "w_verdict" not in busy_verdict("w", failed, idle, idle, goal=1.6)  # a real fail
    passed = {"w": 1.7, "w_verdict": "pass"}
    assert "w_verdict" not in busy_verdict("w", passed, busy, idle, goal=1.6)
    # decode: the ratio is over min(N, cores); the ceiling is parallelism / that
    out = busy_verdict("r", {"r": 0.5, "r_verdict": "fail"}, busy, busy, goal=0.85, per=2)
    assert out["r_ceiling"] == 0.6 and out["r_verdict"] == "inconclusive"


def test_available_parallelism_reports_a_median_and_range():
    from labkit_tools.benchmarks.ceiling import available_parallelism

    p = available_parallelism(1, pairs=1, work_s=0.01)
    lo, hi = p["parallelism_range"]
    assert p["processes"] == 1 and lo <= p["parallelism"] <= hi and p["parallelism"] > 0


def test_objectstore_benchmark_reports_hidden_latency_ratio():
    result = bench.run_benchmark("objectstore", scale="ci", pairs=2, in_flight=4,
                                 shard_kib=(256, 1024))
    _judged(result, "hidden_vs_no_latency")
    for key in ("best_shard_kib", "best_MB_per_s_at_20ms", "best_MB_per_s_no_latency",
                "smallest_one_at_a_time_MB_per_s", "local_disk_MB_per_s", "store_settings"):
        assert key in result, key
    assert result["latency_ms"] == 20 and result["goal_met"] == (result["verdict"] == "pass")
    json.dumps(result)


def test_tokens_benchmark_reports_ratio_padding_and_exact_resume(ci_fixture):
    ci_fixture("corpus")
    result = bench.run_benchmark("tokens", scale="ci", batches=4, pairs=2)
    _judged(result, "ratio")
    assert result["sampler"] in result["candidates_best_s"]
    assert 0 <= result["padding"] < 1 and result["padding_ci"] == [result["padding"]] * 2
    # exact, whatever the machine: stopped with 2 workers, resumed with 1
    assert result["resume_lost"] == 0 and result["resume_repeated"] == 0
    assert result["resume_same_order"] and result["resume_lost_plus_repeated_verdict"] == "pass"
    assert result["goal_met"] == (result["verdict"] == "pass")
