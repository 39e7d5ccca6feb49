"""labkit.ceilings and ``labkit roofline``: each ceiling a rate or a reason, the placement a
chapter types (min of rate / work), the record, and ``labkit diagnose``'s ceiling."""

from __future__ import annotations

import json

import pytest

import labkit as lk
from labkit.ceilings import Ceiling, measure_ceilings
from labkit_tools.cli import main

NAMES = ["page_cache_read", "memcpy", "sample_fetch", "handover", "jpeg_decode", "h2d"]


@pytest.fixture(scope="module")
def ceilings():
    return measure_ceilings(scale="ci")


def test_every_ceiling_is_a_positive_rate_with_its_spread_or_says_why(ceilings):
    assert list(ceilings) == NAMES
    for name, c in ceilings.items():
        if c.rate is None:
            assert c.why and not c.trials, name
            assert c.why in str(c)
        else:
            assert 0 < c.lo <= c.rate <= c.hi and len(c.trials) == 5 and not c.why, name
            assert c.unit.endswith("/s") and c.label in str(c)
    if not lk.status("cuda")[0]:
        assert ceilings["h2d"].why == lk.status("cuda")[1]
    for name in NAMES[:5]:   # these need no GPU and no optional library
        assert ceilings[name].rate, f"{name}: {ceilings[name].why}"


def test_the_placement_is_the_lowest_rate_over_work(ceilings):
    """What chapters 00 and 16 type: each stage allows rate / work per sample (times the
    processes doing it), the lowest binds."""
    c = {"page_cache_read": Ceiling("read", "B/s", "t", (1e9, 2e9, 3e9)),
         "handover": Ceiling("hand-over", "batches/s", "t", (1000.0,))}
    work, procs = {"page_cache_read": 1e5, "handover": 1 / 64}, {"page_cache_read": 2}
    allows = {k: c[k].rate * procs.get(k, 1) / w for k, w in work.items()}
    assert allows == {"page_cache_read": pytest.approx(4e4), "handover": pytest.approx(64e3)}
    assert min(allows, key=allows.get) == "page_cache_read"


def test_unknown_names_are_refused_with_the_list():
    with pytest.raises(lk.LabkitError, match="no ceiling named 'tape'.*memcpy"):
        measure_ceilings(["tape"])


def test_a_failing_measurement_becomes_a_reason_not_an_error(monkeypatch):
    import labkit.ceilings as lc

    def broken(scale):
        raise OSError("disk on fire")

    label, unit, how, _ = lc._CEILINGS["memcpy"]
    monkeypatch.setitem(lc._CEILINGS, "memcpy", (label, unit, how, broken))
    (c,) = measure_ceilings(["memcpy"], scale="ci").values()
    assert c.rate is None and c.why == "measuring it failed: OSError: disk on fire"


def test_ceilings_go_into_a_record_measured_or_missing(tmp_path):
    c = {"memcpy": Ceiling("memcpy", "B/s", "np.copyto", (1e9, 2e9, 3e9)),
         "h2d": Ceiling("host-to-device", "B/s", "pinned", why="no GPU here")}
    ck = lk.Checkpoint("00_start_here", scale="ci", records_dir=tmp_path).add(c)
    record = lk.Checkpoint.read(ck.write(print_summary=False))
    obs = {o["name"]: o for o in record["observations"]}
    assert obs["ceiling.memcpy"]["value"] == 2e9 and obs["ceiling.memcpy"]["config"]["lo"] == 1e9
    assert obs["ceiling.h2d"]["value"] == "missing" and obs["ceiling.h2d"]["note"] == "no GPU here"


def test_cli_prints_each_ceiling_and_writes_the_record(tmp_path, capsys):
    names = ["memcpy", "sample_fetch", "h2d"]
    assert main(["roofline", *names, "--scale", "ci", "--json", "--records", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == names
    for c in out.values():
        assert c["why"] or (0 < c["lo"] <= c["rate"] <= c["hi"] and c["trials"] == 5)
    (path,) = tmp_path.glob("roofline--*.json")
    record = lk.Checkpoint.read(path)
    assert record["chapter"] == "roofline"
    assert {o["name"] for o in record["observations"]} == {f"ceiling.{n}" for n in names}
    assert main(["roofline", "memcpy", "--scale", "ci", "--records", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("memcpy          memcpy")


def test_cli_unknown_ceiling_is_one_line_and_exit_2(capsys):
    assert main(["roofline", "tape", "--scale", "ci"]) == 2
    assert "no ceiling named 'tape'" in capsys.readouterr().err


def test_diagnose_names_the_ceiling_of_a_worker_loader():
    from labkit_tools.diagnose import Diagnosis, place_loader

    d = Diagnosis(target="t", bound="loader", loader_batches_per_s=100.0,
                  step_batches_per_s=None, wait_fraction=None, num_workers=2,
                  one_process_batches_per_s=80.0, cpu_share=None, samples_per_batch=8,
                  bytes_per_sample=1024)
    c = place_loader(d)
    assert c["limits"]["own_work"] == pytest.approx(min(2, lk.usable_cores()) * 80 * 8)
    assert set(c["limits"]) == {"own_work", "handover"} and c["limits"]["handover"] > 0
    assert c["limit"] == min(c["limits"].values())
    assert c["fraction"] == pytest.approx(800 / c["limit"])
    d.ceiling = c
    assert "ceiling:" in str(d) and json.dumps(d.as_dict())
    d.num_workers = 0    # in the loop's process: its own work alone
    assert set(place_loader(d)["limits"]) == {"own_work"}
