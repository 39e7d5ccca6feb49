"""Benchmarks run at a tiny size and report their keys (timings are never asserted)."""

from __future__ import annotations

import json

from labkit.studies import bench


def test_webdataset_benchmark_reports_both_ratios(ci_fixture):
    ci_fixture("wds")
    result = bench.run_benchmark("webdataset", scale="ci", trials=1)
    for key in ("read_ratio_vs_tarfile", "workers_2_vs_1", "tarfile_samples_per_s",
                "wds_samples_per_s", "goal_met"):
        assert key in result, key
    assert result["samples"] == 512 and result["read_ratio_vs_tarfile"] > 0
    json.dumps(result)  # JSON-ready
    assert "webdataset" in bench.BENCHMARKS
