"""labkit.records.checkpoint: the local verification checkpoint record (chapter 00)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from labkit.errors import RecordError
from labkit.records import checkpoint as ck


@pytest.fixture
def records(tmp_path, monkeypatch):
    folder = tmp_path / "records"
    monkeypatch.setenv("LABKIT_RECORDS", str(folder))
    return folder


def _checkpoint(**kw) -> ck.Checkpoint:
    c = ck.Checkpoint("01_measuring", scale="ci", **kw)
    c.observe("samples_per_s", 5400.5, "samples/s", {"num_workers": 2, "batch_size": 64})
    c.observe("duplicates", np.int64(0), "samples", note="exactly once")
    return c.observe("backend", "gloo", "").constraint("warm page cache")


def test_round_trip(records, capsys):
    path = _checkpoint().write()
    assert path.parent == records and path.name.startswith("01_measuring--")
    record = ck.Checkpoint.read(path)
    assert record == json.loads(path.read_text())
    assert record["schema"] == ck.SCHEMA and record["scale"] == "ci"
    assert set(ck.REQUIRED_KEYS) <= set(record)
    assert record["observations"][0] == {
        "name": "samples_per_s", "value": 5400.5, "unit": "samples/s",
        "config": {"num_workers": 2, "batch_size": 64}, "note": None}
    assert record["observations"][1]["value"] == 0
    assert record["constraints"] == ["warm page cache"]
    assert record["created"].endswith("+00:00")
    out = capsys.readouterr().out
    assert "samples_per_s = 5,400 samples/s [num_workers=2 batch_size=64]" in out
    assert f"compare with: labkit report {records}" in out and str(path) in out


def test_atomic_write_leaves_no_tmp_files_and_never_overwrites(records):
    first, second = _checkpoint().write(False), _checkpoint().write(False)
    assert first != second
    assert sorted(p.name for p in records.iterdir()) == sorted([first.name, second.name])


def test_records_dir_argument_and_scale_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_SCALE", "full")
    c = ck.Checkpoint("00_start", records_dir=tmp_path / "here")
    path = c.observe("x", 1, "").write(print_summary=False)
    assert path.parent == tmp_path / "here" and ck.Checkpoint.read(path)["scale"] == "full"


def test_fixture_recorded(records, tmp_path):
    fx = SimpleNamespace(name="tokens", path=tmp_path, digest="ab" * 32, nbytes=10, files=1,
                         scale="ci")
    record = ck.Checkpoint.read(_checkpoint().use_fixture(fx).write(False))
    assert record["data"] == [{"name": "tokens", "path": str(tmp_path), "digest": "ab" * 32,
                               "nbytes": 10, "files": 1, "scale": "ci"}]
    assert record["environment"]["data"]["path"] == str(tmp_path.resolve())


class _Result:
    """Anything with as_observations(name=, config=) is a result add() records."""

    def as_observations(self, name=None, config=None):
        return [{"name": f"{name or 'fake'}.samples_per_s", "value": 12.5,
                 "unit": "samples/s", "config": config or {}}]


def test_add_records_a_result_with_its_name_and_config():
    c = ck.Checkpoint("01", scale="ci").add(_Result(), "mmap", {"k": 1})
    assert c.observations == [{"name": "mmap.samples_per_s", "value": 12.5,
                               "unit": "samples/s", "config": {"k": 1}, "note": None}]
    assert ck.Checkpoint("01", scale="ci").add(_Result()).observations[0]["name"] == \
        "fake.samples_per_s"


def test_add_takes_lists_and_dicts_of_results():
    c = ck.Checkpoint("01", scale="ci").add([_Result(), _Result()])
    assert [o["name"] for o in c.observations] == ["fake.samples_per_s"] * 2
    c = ck.Checkpoint("01", scale="ci").add({"a": _Result(), "b": [_Result()]})
    assert [o["name"] for o in c.observations] == ["a.samples_per_s", "b.samples_per_s"]
    c = ck.Checkpoint("01", scale="ci").add({"a": _Result()}, name="run")
    assert c.observations[0]["name"] == "run.a.samples_per_s"


def test_add_an_audit_and_a_resume_trial():
    import labkit as lk
    from labkit.instruments.resume import ResumeRun, ResumeTrial

    c = ck.Checkpoint("03", scale="ci")
    c.add(lk.audit({"w0": [0, 1], "w1": [1]}, 3), "shards per worker", {"num_workers": 2})
    assert {o["name"]: o["value"] for o in c.observations} == {
        "shards_per_worker.expected": 3, "shards_per_worker.delivered": 3,
        "shards_per_worker.duplicates": 1, "shards_per_worker.missing": 1}
    assert c.observations[0]["config"] == {"num_workers": 2}
    trial = ResumeTrial("SDL", (3, 2), (ResumeRun("uninterrupted", (0, 1), 0, 0, True),
                                        ResumeRun("resumed once", (0,), 1, 0, False, "boom")))
    c = ck.Checkpoint("08", scale="ci").add([trial])
    assert [(o["name"], o["value"], o["config"]["run"]) for o in c.observations] == [
        ("resume.lost", 0, "uninterrupted"), ("resume.duplicated", 0, "uninterrupted"),
        ("resume.lost", 1, "resumed once"), ("resume.duplicated", 0, "resumed once")]
    assert c.observations[2]["config"]["loader"] == "SDL" and c.observations[2]["note"] == "boom"


@pytest.mark.parametrize("thing", [3.5, "samples_per_s", None, {"a": 1}, [_Result(), 2]])
def test_add_rejects_what_has_no_observations(thing):
    with pytest.raises(TypeError, match=r"as_observations\(\).*not (float|str|NoneType|int)"):
        ck.Checkpoint("01", scale="ci").add(thing)


def test_add_validates_values_like_observe():
    class Bad:
        def as_observations(self, name=None, config=None):
            return [{"name": "x", "value": float("nan"), "unit": "s"}]

    with pytest.raises(ValueError, match="not finite"):
        ck.Checkpoint("01", scale="ci").add(Bad())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -np.inf, [1, 2], None, "x" * 500])
def test_bad_values_rejected(value):
    with pytest.raises(ValueError, match="samples_per_s"):
        ck.Checkpoint("01", scale="ci").observe("samples_per_s", value, "samples/s")


def test_unwritable_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        try:
            _checkpoint(records_dir=locked / "records").write(False)
        except RecordError as exc:
            assert "LABKIT_RECORDS" in str(exc) and str(locked) in str(exc)
        else:
            if os.geteuid() != 0:
                pytest.fail("a read-only folder accepted a record")
            pytest.skip("running as root: permissions do not stop the write")
    finally:
        locked.chmod(0o700)


def test_parent_is_a_file_fails_even_for_root(tmp_path):
    (tmp_path / "plain").write_text("not a folder")
    folder = tmp_path / "plain" / "records"
    with pytest.raises(RecordError, match="LABKIT_RECORDS") as info:
        _checkpoint(records_dir=folder).write(False)
    assert str(folder) in str(info.value)


def _write(path: Path, obj) -> Path:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda r: "{not json", "not valid JSON"),
    (lambda r: {**r, "schema": "something/else"}, "unknown schema"),
    (lambda r: {**r, "schema": "labkit.checkpoint/2"}, "newer labkit"),
    (lambda r: {k: v for k, v in r.items() if k != "observations"}, "observations"),
    (lambda r: {**r, "observations": [{"name": "x"}]}, "observation 0"),
    (lambda r: [r], "not a labkit checkpoint"),
])
def test_read_errors_name_the_file(records, mutate, message):
    good = json.loads(_checkpoint().write(False).read_text())
    bad = _write(records / "bad.json", mutate(good))
    with pytest.raises(RecordError, match=message) as info:
        ck.Checkpoint.read(bad)
    assert str(bad) in str(info.value)


def test_missing_file_named(tmp_path):
    with pytest.raises(RecordError, match="nope.json"):
        ck.Checkpoint.read(tmp_path / "nope.json")


def test_summary_lists_first_observations():
    c = ck.Checkpoint("03", scale="ci")
    for i in range(12):
        c.observe(f"m{i}", i, "s")
    text = ck.summary(c.record())
    assert "12 observations" in text and "m7 = 7 s" in text and "and 4 more" in text
    assert "m8 =" not in text and "compare with" not in text
