"""``labkit diagnose`` (chapter 13), on loaders with planted faults and bad factories."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import time
from pathlib import Path

import pytest

import labkit as lk
from labkit_tools.diagnose import IN_PROCESS_RATIO

PLANTED = Path(__file__).resolve().parent / "planted_loaders.py"


def labkit(*args):
    """``labkit ARGS`` in this process (as tests/test_cli.py runs it)."""
    from labkit_tools import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(["labkit", *args], code, out.getvalue(), err.getvalue())


def diagnose_json(factory, *args):
    r = labkit("diagnose", f"{PLANTED}:{factory}", "--json", "--batches", 16, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("factory, step_ms, hotspot", [
    ("slow_read", 4, "read_record"),
    ("heavy_decode", 2, "decode_sample"),
    ("heavy_collate", 1.5, "pad_and_stack"),
])
def test_planted_loader_bottleneck_is_named(factory, step_ms, hotspot):
    d = diagnose_json(factory, "--step-ms", step_ms)
    assert d["bound"] == "loader"
    assert d["wait_fraction"] > 0.25
    assert d["hotspots"][0]["name"].rsplit(".", 1)[-1] == hotspot
    assert "planted_loaders.py:" in d["hotspots"][0]["where"]
    assert d["hotspots"][0]["share"] > 0.5
    assert d["step_batches_per_s"] == pytest.approx(1e3 / step_ms)
    assert d["suggestion"]["why"]


def test_slow_read_gets_more_workers_than_cores():
    d = diagnose_json("slow_read", "--step-ms", 4)
    assert d["cpu_share"] < 0.5  # sleeping, not computing
    assert d["suggestion"]["knobs"]["num_workers"] >= 3  # 16 ms batches for a 4 ms step
    assert "ceil(1.2 x" in d["suggestion"]["why"]
    assert d["tensors_per_batch"] == 1 and d["samples_per_batch"] == 8


def test_cpu_bound_decode_says_what_no_knob_fixes():
    d = diagnose_json("heavy_decode", "--step-ms", 2, "--batches", 12)
    assert "No knob fixes this" in d["suggestion"]["why"] or lk.usable_cores() >= 10
    assert "decode_sample" in d["suggestion"]["why"]
    # the roofline: a loader in the loop's process runs under its own work per sample, and
    # that is what it measured (the same loader, timed twice: the noise is the gap)
    c = d["ceiling"]
    assert c["bound"] == "own_work" and 0.5 < c["fraction"] < 2
    assert c["limits"] == {"own_work": pytest.approx(c["limit"])}


def test_step_slower_than_loader_is_step_bound():
    d = diagnose_json("fast", "--step-ms", 30)
    assert d["bound"] == "step"
    assert d["suggestion"]["knobs"] == {}
    assert "the step is the bound" in d["suggestion"]["why"]
    assert d["loader_batches_per_s"] > 3 * d["step_batches_per_s"]


def test_not_a_dataloader_is_diagnosed_too(tmp_path):
    d = diagnose_json("plain_batches", "--step-ms", 1)
    assert d["num_workers"] is None and d["bound"] == "loader"
    assert d["hotspots"] and d["loader_batches_per_s"] > 0


def test_text_report_and_timeline(tmp_path):
    png = tmp_path / "tl.png"
    r = labkit("diagnose", f"{PLANTED}:heavy_collate", "--step-ms", 2, "--batches", 10,
               "--timeline", png)
    assert r.returncode == 0, r.stderr
    for field in ("bound:", "loader_batches_per_s:", "step_batches_per_s:", "wait_fraction:",
                  "hotspots", "suggestion:", "ceiling:", "timeline:"):
        assert field in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("spec, words", [
    ("no_such_module_xyz:make", ["no_such_module_xyz", "ModuleNotFoundError"]),
    (f"{PLANTED}:nope", ["has no 'nope'"]),
    ("justamodule", ["expected MODULE:FACTORY"]),
    (f"{PLANTED}:raises", ["raises() raised FileNotFoundError", "/data/train.bin"]),
    (f"{PLANTED}:empty", ["yielded no batches"]),
])
def test_bad_factories_fail_with_one_clear_line(spec, words):
    r = labkit("diagnose", spec)
    assert r.returncode == 2
    assert r.stderr.startswith("labkit diagnose: error:")
    for w in words:
        assert w in r.stderr


@pytest.mark.parametrize("factory, phase", [
    ("hangs_in_worker", "measuring the loader alone"),
    ("hangs_on_call", "calling"),
])
def test_hanging_factory_is_stopped_within_the_limit(factory, phase):
    t = time.monotonic()
    r = labkit("diagnose", f"{PLANTED}:{factory}", "--time-limit", 6)
    assert time.monotonic() - t < 30
    assert r.returncode == 2
    assert phase in r.stderr and "6 s limit" in r.stderr
    assert lk.worker_processes() == []


def test_diagnose_has_help_and_checks_its_numbers():
    r = labkit("diagnose", "--help")
    assert r.returncode == 0 and "MODULE:FACTORY" in r.stdout
    r = labkit("diagnose", f"{PLANTED}:fast", "--batches", 1)
    assert r.returncode == 2 and "at least 2" in r.stderr
    r = labkit("diagnose", f"{PLANTED}:fast", "--step-ms", -3)
    assert r.returncode == 2 and "positive" in r.stderr


def test_without_a_step_the_loader_alone_is_measured():
    d = diagnose_json("fast")
    assert d["step_batches_per_s"] is None and d["wait_fraction"] is None
    assert d["bound"] == "loader" and "no step given" in d["suggestion"]["why"]
    assert d["suggestion"]["knobs"] == {}


def test_loading_in_process_is_suggested_when_workers_cost_more_than_they_give():
    d = diagnose_json("fast_with_workers", "--step-ms", 2)  # one process: ~30k batches/s
    if d["bound"] == "step":  # the hand-over can keep up on a quiet machine
        return
    one, step = d["one_process_batches_per_s"], d["step_batches_per_s"]
    if one < IN_PROCESS_RATIO * step:  # seen at load 8 on 2 cores: the rule's premise is gone
        pytest.skip(f"one process made only {one:,.0f} batches/s here, under {IN_PROCESS_RATIO}x "
                    f"the step's {step:,.0f} (a loaded machine): the rule does not apply")
    assert d["suggestion"]["knobs"] == {"num_workers": 0}, d["suggestion"]
