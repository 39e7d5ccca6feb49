"""labkit.tools.roofline and ceilings: the arithmetic of a placement, the CLI, the record."""

from __future__ import annotations

import json
import math

import pytest
import torch

import labkit as lk
from labkit.tools import roofline as rl
from labkit.tools import roofline_report as rr
from labkit.tools.ceilings import CEILINGS
from labkit.tools.cli import main


def _ceiling(name, work, where, rate, cores=1):
    return rl.Ceiling(name, name.replace("_", " "), work, where, rate, rate * 0.9, rate * 1.1,
                      5, "test", cores)


@pytest.fixture
def roof():
    return rl.Roofline({
        "jpeg_decode": _ceiling("jpeg_decode", "px", "core", 200e6, cores=2),  # 100 M/core
        "handover_batch": _ceiling("handover_batch", "batch", "main", 5000),
        "handover_bytes": _ceiling("handover_bytes", "B", "main", 1e9),
        "cold_read": _ceiling("cold_read", "B", "device", 1e8),
    }, {"gpu_decode": "no GPU here"}, cores=2, scale="ci")


def test_a_core_stage_in_workers_scales_with_them_and_binds(roof):
    p = roof.place("decode", {"jpeg_decode": 1e4, "handover_batch": 1 / 100}, workers=2,
                   in_workers=["jpeg_decode"], measured=15_000)
    assert p.limits["jpeg_decode"] == pytest.approx(2 * 100e6 / 1e4)   # 20,000 samples/s
    assert p.limits["handover_batch"] == pytest.approx(5000 * 100)
    assert p.bound == "jpeg_decode" and p.fraction == pytest.approx(0.75)
    # all CPU work shares 2 cores: 2 / (1e4/1e8 + 1/100/5000) = 2 / 1.02e-4
    assert p.predicted == pytest.approx(2 / (1e-4 + 2e-6))
    assert "all CPU work" in p.predicted_by
    assert p.error == pytest.approx(15_000 / p.predicted - 1)


def test_stages_in_one_process_add_up_and_devices_bind_alone(roof):
    p = roof.place("one process", {"jpeg_decode": 1e4, "cold_read": 1e4}, measured=5000)
    assert p.limits["jpeg_decode"] == pytest.approx(100e6 / 1e4)     # one core
    assert p.limits["cold_read"] == pytest.approx(1e8 / 1e4)
    assert p.predicted == pytest.approx(1e4)                          # the loop's process
    p = roof.place("disk", {"jpeg_decode": 1e3, "cold_read": 1e5}, measured=900)
    assert p.bound == "cold_read" and p.predicted == pytest.approx(1000)
    assert p.predicted_by.endswith("alone")


def test_a_stage_timed_alone_covers_the_ceilings_inside_it(roof):
    """A dataset's items timed alone include their decode: the decode is drawn (how far
    the dataset runs below the machine's ceiling) but its time is not added again."""
    roof.add("items", "the dataset alone", [4000, 5000, 6000], where="core",
             covers=["jpeg_decode"])
    assert roof["items"].rate == pytest.approx(2 * 5000) and roof["items"].covers == (
        "jpeg_decode",)
    p = roof.place("covered", {"items": 1, "jpeg_decode": 1e4, "handover_batch": 1 / 100},
                   workers=2, in_workers=["items", "jpeg_decode"], measured=8000)
    assert p.covered == ("jpeg_decode",) and p.bound == "items"
    assert p.limits["jpeg_decode"] == pytest.approx(2 * 100e6 / 1e4)    # still drawn
    # only the items' time and the hand-over share the 2 cores: 2 / (1/5000 + 1/500000)
    assert p.predicted == pytest.approx(2 / (2e-4 + 2e-6))
    alone = roof.place("not covered", {"jpeg_decode": 1e4, "handover_batch": 1 / 100},
                       workers=2, in_workers=["jpeg_decode"], measured=8000)
    assert alone.covered == () and alone.predicted > p.predicted
    [back] = rr.placements_from_record(
        {"chapter": "10_x", "observations": p.as_observations()})
    assert back.covered == ("jpeg_decode",)
    with pytest.raises(ValueError, match="cover itself"):
        roof.add("loop", "a loop", [1.0], covers=["loop"])


def test_a_missing_ceiling_is_named_not_guessed(roof):
    p = roof.place("gpu", {"jpeg_decode": 1e4, "gpu_decode": 1e4}, measured=1000)
    assert p.missing == {"gpu_decode": "no GPU here"}
    assert "gpu_decode (no GPU here)" in str(p)
    with pytest.raises(ValueError, match="none of"):
        roof.place("only gpu", {"gpu_decode": 1}, measured=1)
    with pytest.raises(KeyError, match="no GPU here"):
        roof["gpu_decode"]


@pytest.mark.parametrize("kw, match", [
    ({"per_sample": {}}, "names no ceiling"),
    ({"per_sample": {"jpeg_decode": 1}, "in_workers": ["jpeg_decode"]}, "needs workers"),
    ({"per_sample": {"jpeg_decode": 1}, "in_workers": ["cold_read"], "workers": 2},
     "per_sample does not"),
    ({"per_sample": {"handover_batch": 1}, "in_workers": ["handover_batch"], "workers": 2},
     "loop's process"),
    ({"per_sample": {"jpeg_decode": 0}}, "must be > 0"),
])
def test_bad_placements_say_what_is_wrong(roof, kw, match):
    with pytest.raises(ValueError, match=match):
        roof.place("p", measured=10, **kw)
    with pytest.raises(ValueError, match="positive rate"):
        roof.place("p", {"jpeg_decode": 1}, measured=math.nan)


def test_a_measurement_brings_its_name_rate_and_bytes(roof):
    m = lk.measure([{"x": torch.zeros(4, 256)}] * 8, repeats=1, name="m")
    p = roof.place(m, {"handover_bytes": 1024})
    assert p.name == "m" and p.measured == pytest.approx(m.samples_per_s)
    assert p.bytes_per_sample == pytest.approx(1024)


def test_placements_and_ceilings_go_through_a_record_and_back(roof, tmp_path):
    p = roof.place("decode", {"jpeg_decode": 1e4}, workers=2, in_workers=["jpeg_decode"],
                   measured=15_000)
    ck = lk.Checkpoint("16_capstone", records_dir=tmp_path).add(roof).add(p)
    record = lk.records.read_checkpoint(ck.write(print_summary=False))
    names = {o["name"]: o for o in record["observations"]}
    assert names["ceiling.jpeg_decode"]["config"]["lo"] == pytest.approx(180e6)
    assert names["ceiling.gpu_decode"]["value"] == "missing"
    assert names["roofline.decode.bound"]["value"] == "jpeg_decode"
    (back,) = rr.placements_from_record(record)
    assert back.name == "16 decode" and back.fraction == pytest.approx(p.fraction, rel=1e-3)
    assert back.predicted == pytest.approx(p.predicted)
    assert rr.prediction_errors([back])["median_abs_error"] == pytest.approx(abs(p.error))


def test_the_plot_draws_a_row_per_pipeline(roof):
    import matplotlib

    matplotlib.use("Agg")
    ps = [roof.place(n, {"jpeg_decode": 1e4}, measured=r) for n, r in (("a", 100), ("b", 9e3))]
    ax = roof.plot(ps)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]


def test_measure_says_why_a_ceiling_is_missing_and_rejects_unknown_names():
    roof = rl.measure(["memcpy", "h2d_pinned"], scale="ci")
    assert roof["memcpy"].rate > 0 and roof["memcpy"].lo <= roof["memcpy"].hi
    assert roof["memcpy"].cores == lk.usable_cores()
    if not lk.status("cuda")[0]:
        assert roof.missing["h2d_pinned"] == lk.status("cuda")[1]
    with pytest.raises(lk.LabkitError, match="no ceiling named 'tape'"):
        rl.measure(["tape"])


def test_cli_json_gives_each_ceiling_with_spread_and_writes_the_record(tmp_path, capsys):
    names = ["memcpy", "mmap_read", "handover_batch", "handover_tensor", "file_open",
             "npy_load"]
    assert main(["roofline", *names, "--scale", "ci", "--json", "--records", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    for name in names:
        c = out["ceilings"][name]
        assert 0 < c["lo"] <= c["rate"] <= c["hi"] and c["trials"] >= 3 and c["unit"]
    # np.load opens and reads a file too, and parses its header besides
    assert out["ceilings"]["npy_load"]["rate"] < out["ceilings"]["file_open"]["rate"]
    (path,) = tmp_path.glob("roofline--*.json")
    assert lk.records.read_checkpoint(path)["chapter"] == "roofline"
    assert main(["roofline", "--list"]) == 0
    assert set(CEILINGS) <= set(capsys.readouterr().out.split())


def test_cli_unknown_ceiling_is_one_line_and_exit_2(capsys):
    assert main(["roofline", "tape", "--scale", "ci"]) == 2
    assert "no ceiling named 'tape'" in capsys.readouterr().err


def test_a_chapters_own_ceiling_and_the_next_one(roof):
    roof.add("train_step", "the train step", [900, 1000, 1100])
    assert roof["train_step"].rate == 1000 and roof["train_step"].where == "main"
    p = roof.place("tuned", {"jpeg_decode": 1e4, "train_step": 1}, workers=2,
                   in_workers=["jpeg_decode"], measured=800)
    assert p.bound == "train_step" and p.next_bound == "jpeg_decode"
    with pytest.raises(ValueError, match="positive trials"):
        roof.add("bad", "bad", [])


def test_diagnose_names_the_ceiling_of_a_worker_loader():
    from labkit.profiling.diagnosis import Diagnosis
    from labkit.tools.diagnose import place_loader

    d = Diagnosis(target="t", bound="loader", loader_batches_per_s=100.0,
                  step_batches_per_s=None, wait_fraction=None, num_workers=2,
                  one_process_batches_per_s=80.0, cpu_share=None, samples_per_batch=8,
                  bytes_per_sample=1024)
    c = place_loader(d)
    assert c["limits"]["own_work"] == pytest.approx(min(2, lk.usable_cores()) * 80 * 8)
    assert set(c["limits"]) == {"own_work", "handover_batch", "handover_bytes"}
    assert c["fraction"] == pytest.approx(800 / c["limit"])
    d.ceiling = c
    assert "ceiling:" in str(d) and json.dumps(d.as_dict())
    # images and labels: the second tensor of each batch crosses on its own
    d.tensors_per_batch = 2
    c2 = place_loader(d)
    assert set(c2["limits"]) == {"own_work", "handover_batch", "handover_tensor",
                                 "handover_bytes"}
    assert c2["limits"]["handover_tensor"] > 0 and c2["limit"] <= c2["limits"]["own_work"]


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_report_tables_and_draws_each_machines_placements(roof, tmp_path, fmt):
    p = roof.place("decode", {"jpeg_decode": 1e4}, workers=2, in_workers=["jpeg_decode"],
                   measured=15_000)
    lk.Checkpoint("10_decode_and_augment", records_dir=tmp_path / "r").add(p).write(
        print_summary=False)
    out = lk.tools.write_report([tmp_path / "r"], tmp_path / f"report.{fmt}")
    text = out.read_text()
    assert "Roofline" in text and "10 decode" in text and "median |prediction error|" in text
    if fmt == "md":
        assert (tmp_path / "report-roofline.png").read_bytes()[:4] == b"\x89PNG"
    else:
        assert 'alt="roofline per machine"' in text
