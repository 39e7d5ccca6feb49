"""labkit.report: comparing checkpoint records across runs and machines (chapter 00)."""

from __future__ import annotations

import json
import socket

import pytest

from labkit import report
from labkit.checkpoint import Checkpoint
from labkit.errors import RecordError


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    here, there = tmp_path / "laptop", tmp_path / "workstation"
    a = Checkpoint("01_measuring", scale="ci", records_dir=here)
    a.observe("samples_per_s", 5400.0, "samples/s", {"num_workers": 2})
    a.observe("samples_per_s", 9100.0, "samples/s", {"num_workers": 4})
    a.observe("backend", "gloo", "").write(False)
    monkeypatch.setattr(socket, "gethostname", lambda: "bigbox")
    b = Checkpoint("01_measuring", scale="ci", records_dir=there / "nested")
    b.observe("samples_per_s", 21000.0, "samples/s", {"num_workers": 2})
    b.observe("first_batch_s", 0.25, "s").write(False)
    monkeypatch.undo()
    return here, there


def test_load_records_reads_both_folders(two_runs):
    records = report.load_records(two_runs)
    assert [r["environment"]["hostname"] == "bigbox" for r in records].count(True) == 1
    assert len(records) == 2


def test_rows_align_observations_across_runs(two_runs):
    records = report.load_records(two_runs)
    labels = report.run_labels(records)
    assert len(set(labels)) == 2 and any(lb.startswith("bigbox @ ") for lb in labels)
    rows = {(r["name"], r["config"]): r for r in report.comparison_rows(records)}
    mine, big = (lb for lb in sorted(labels, key=lambda lb: lb.startswith("bigbox")))
    both = rows[("samples_per_s", "num_workers=2")]
    assert (both["unit"], both[mine], both[big]) == ("samples/s", 5400.0, 21000.0)
    assert rows[("samples_per_s", "num_workers=4")][big] is None
    assert rows[("first_batch_s", "")][mine] is None
    assert rows[("backend", "")][mine] == "gloo"
    table = report.format_table(report.comparison_rows(records))
    assert "21,000" in table and "== 01_measuring ==" in table


def test_run_labels_unique():
    rec = {"created": "2026-05-09T07:35:25+00:00", "environment": {"hostname": "h"}}
    assert report.run_labels([rec, rec]) == ["h @ 2026-05-09 07:35:25",
                                                  "h @ 2026-05-09 07:35:25 #2"]


def test_repeated_observation_kept_as_second_row():
    rec = {"chapter": "c", "created": "2026-05-09T07:35:25+00:00",
           "environment": {"hostname": "h"},
           "observations": [{"name": "x", "value": 1, "unit": "s", "config": {}},
                            {"name": "x", "value": 2, "unit": "s", "config": {}}]}
    rows = report.comparison_rows([rec])
    assert [r["name"] for r in rows] == ["x", "x (2)"]


def test_plot_is_a_png(two_runs, tmp_path):
    path = report.plot_comparison(report.load_records(two_runs), tmp_path / "cmp.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_numbers_still_writes(tmp_path):
    rec = {"chapter": "c", "created": "2026-05-09T07:35:25+00:00",
           "environment": {"hostname": "h"},
           "observations": [{"name": "backend", "value": "gloo", "unit": "", "config": {}}]}
    path = report.plot_comparison([rec], tmp_path / "empty.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_write_report(two_runs, tmp_path):
    out = report.write_report(two_runs, tmp_path / "out" / "cmp.md")
    text = out.read_text()
    for label in report.run_labels(report.load_records(two_runs)):
        assert label in text
    assert "## Environments" in text and "| CPU |" in text and "| data filesystem |" in text
    assert "![observations per run](cmp.png)" in text
    assert (tmp_path / "out" / "cmp.png").read_bytes()[:4] == b"\x89PNG"


def test_write_report_defaults_to_cwd(two_runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report.write_report(two_runs) == tmp_path / "report.md"
    assert (tmp_path / "report.png").exists()


def test_missing_and_empty_folders(tmp_path):
    with pytest.raises(RecordError, match="does not exist") as info:
        report.load_records([tmp_path / "nowhere"])
    assert "nowhere" in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="holds no checkpoint records"):
        report.load_records(tmp_path / "empty")


def test_bad_record_in_folder_is_named(two_runs):
    here, _ = two_runs
    bad = here / "bad.json"
    bad.write_text(json.dumps({"schema": "labkit.checkpoint/2"}))
    with pytest.raises(RecordError, match="newer labkit") as info:
        report.load_records(two_runs)
    assert str(bad) in str(info.value)
