"""labkit report: comparing checkpoint records across runs and machines (chapter 00)."""

from __future__ import annotations

import base64
import io
import json
import socket
from html.parser import HTMLParser

import pytest
from PIL import Image

from labkit.errors import LabkitError, RecordError
from labkit.records.checkpoint import Checkpoint, load_records
from labkit_tools import report


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
    records = load_records(two_runs)
    assert [r["environment"]["hostname"] == "bigbox" for r in records].count(True) == 1
    assert len(records) == 2


def test_rows_align_observations_across_runs(two_runs):
    records = load_records(two_runs)
    labels = report.run_labels(records)
    assert len(set(labels)) == 2 and any(lb.startswith("bigbox @ ") for lb in labels)
    rows = {(r["name"], r["config"]): r for r in report.comparison(records).to_dict("records")}
    mine, big = (lb for lb in sorted(labels, key=lambda lb: lb.startswith("bigbox")))
    both = rows[("samples_per_s", "num_workers=2")]
    assert (both["unit"], both[mine], both[big]) == ("samples/s", 5400.0, 21000.0)
    assert rows[("samples_per_s", "num_workers=4")][big] is None
    assert rows[("first_batch_s", "")][mine] is None
    assert rows[("backend", "")][mine] == "gloo"
    table = report.chapter_table(records, "01_measuring", labels[0]).to_string()
    assert "21,000" in table and "3.89x" in table


def test_run_labels_unique():
    rec = {"created": "2026-05-09T07:35:25+00:00", "environment": {"hostname": "h"}}
    assert report.run_labels([rec, rec]) == ["h @ 2026-05-09 07:35:25",
                                                  "h @ 2026-05-09 07:35:25 #2"]


def test_repeated_observation_kept_as_second_row():
    rec = {"chapter": "c", "created": "2026-05-09T07:35:25+00:00",
           "environment": {"hostname": "h"},
           "observations": [{"name": "x", "value": 1, "unit": "s", "config": {}},
                            {"name": "x", "value": 2, "unit": "s", "config": {}}]}
    assert list(report.comparison([rec])["name"]) == ["x", "x (2)"]


def test_plot_is_a_png(two_runs, tmp_path):
    report.plot(load_records(two_runs)).savefig(tmp_path / "cmp.png")
    assert (tmp_path / "cmp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_numbers_still_writes(tmp_path):
    rec = {"chapter": "c", "created": "2026-05-09T07:35:25+00:00",
           "environment": {"hostname": "h"},
           "observations": [{"name": "backend", "value": "gloo", "unit": "", "config": {}}]}
    report.plot([rec]).savefig(tmp_path / "empty.png")
    assert (tmp_path / "empty.png").read_bytes()[:4] == b"\x89PNG"
    assert report.plot([rec], "c") is None   # a chapter without numbers has no plot


def test_write_report(two_runs, tmp_path):
    out = report.write_report(two_runs, tmp_path / "out" / "cmp.md")
    text = out.read_text()
    for label in report.run_labels(load_records(two_runs)):
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
        load_records([tmp_path / "nowhere"])
    assert "nowhere" in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="holds no checkpoint records"):
        load_records(tmp_path / "empty")


def test_bad_record_in_folder_is_named(two_runs):
    here, _ = two_runs
    bad = here / "bad.json"
    bad.write_text(json.dumps({"schema": "labkit.checkpoint/2"}))
    with pytest.raises(RecordError, match="newer labkit") as info:
        load_records(two_runs)
    assert str(bad) in str(info.value)


# -- HTML ---------------------------------------------------------------------------------

class _Page(HTMLParser):
    """What a reader of the HTML report sees: text, table rows, images, links, scripts."""

    def __init__(self):
        super().__init__()
        self.text, self.rows, self.imgs, self.urls, self.tags = [], [], [], [], []
        self._row = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "tr":
            self._row = {"class": attrs.get("class") or "", "cells": []}
            self.rows.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._row["cells"].append("")
        elif tag == "img":
            self.imgs.append(attrs["src"])
        self.urls += [v for k, v in attrs.items() if k in ("src", "href") and v]

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self._row["cells"] = [c.strip() for c in self._row["cells"]]
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._row is not None and self._row["cells"]:
            self._row["cells"][-1] += data

    def row(self, first_cell):
        return next(r for r in self.rows if r["cells"] and r["cells"][0].strip() == first_cell)


def _parse(path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def test_html_report_from_two_record_folders(two_runs, tmp_path):
    out = report.write_report(two_runs, tmp_path / "rep" / "cmp.html")
    assert out.suffix == ".html" and not (tmp_path / "rep" / "cmp.png").exists()
    page = _parse(out)
    text = "".join(page.text)
    labels = report.run_labels(load_records(two_runs))
    for label in labels:
        assert label in text
    assert "bigbox" in text and "01_measuring" in text
    # environments side by side: the hostname differs and is marked, the CPU is the same
    assert len(page.row("hostname ≠")["cells"]) == 3  # the fact, then one column per machine
    assert page.row("CPU")   # the same on both: not marked
    # the observation both ran, with its ratio to the first run (the baseline)
    both = next(r for r in page.rows if r["cells"][:2] == ["samples_per_s", "num_workers=2"])
    assert both["cells"][3:] == ["5,400", "21,000", "3.89x"]
    # self-contained: no scripts, nothing fetched; the plot is an embedded PNG that decodes
    assert "script" not in page.tags and "link" not in page.tags
    assert all(u.startswith(("data:image/png;base64,", "#")) for u in page.urls), page.urls
    assert page.imgs
    for src in page.imgs:
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        with Image.open(io.BytesIO(png)) as im:
            im.verify()
            assert im.format == "PNG" and im.size[0] > 300


def test_html_report_escapes_record_text(tmp_path, monkeypatch):
    """Records come from other machines: their text is shown, never interpreted."""
    monkeypatch.setattr(socket, "gethostname", lambda: "<img src=x onerror=alert(1)>")
    ck = Checkpoint("<script>alert('ch')</script>", scale="ci", records_dir=tmp_path / "r")
    ck.observe("<b>name</b>", 1.0, "<i>unit</i>", {"k": "</td><script>x</script>"})
    ck.constraint("a & b").write(False)
    monkeypatch.undo()
    out = report.write_report(tmp_path / "r", tmp_path / "r.html")
    page = _parse(out)
    assert "script" not in page.tags and "i" not in page.tags
    assert page.tags.count("img") == len(page.imgs) == 1  # the plot, not the hostname
    text = "".join(page.text)
    assert "<img src=x onerror=alert(1)>" in text and "<script>alert('ch')</script>" in text
    assert "k=</td><script>x</script>" in text and "a & b" in text and "<b>name</b>" in text


def test_single_environment_says_so(tmp_path):
    ck = Checkpoint("00_start", scale="ci", records_dir=tmp_path / "r")
    ck.observe("x", 1.0, "s").write(False)
    page = _parse(report.write_report(tmp_path / "r", tmp_path / "one.html"))
    assert "report the same environment" in "".join(page.text)
    assert not any("≠" in "".join(r["cells"]) for r in page.rows)


@pytest.mark.parametrize("out, fmt, want", [
    ("r.html", None, "html"), ("r.HTM", None, "html"), ("r.md", None, "md"), (None, None, "md"),
    (None, "html", "html"), ("r.html", "html", "html"), ("report.txt", "md", "md"),
])
def test_report_format(out, fmt, want):
    assert report.report_format(out, fmt) == want


@pytest.mark.parametrize("out, fmt, says", [
    ("r.txt", None, "cannot tell the report format from r.txt"),
    ("r.md", "html", "disagree"),
    ("r.html", "pdf", "unknown report format 'pdf'"),
])
def test_report_format_errors(out, fmt, says):
    with pytest.raises(LabkitError, match=says):
        report.report_format(out, fmt)


def test_default_html_name(two_runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report.write_report(two_runs, fmt="html") == tmp_path / "report.html"


def test_baseline_by_hostname_and_folder(two_runs, tmp_path):
    records = load_records(two_runs)
    mine, big = sorted(report.run_labels(records), key=lambda lb: lb.startswith("bigbox"))
    assert report.baselines(records) == {"01_measuring": report.run_labels(records)[0]}
    assert report.baselines(records, "bigbox") == {"01_measuring": big}
    assert report.baselines(records, "laptop") == {"01_measuring": mine}  # part of the folder
    with pytest.raises(LabkitError, match="matches no run") as info:
        report.baselines(records, "nobody")
    assert big in str(info.value)
    out = report.write_report(two_runs, tmp_path / "b.md", baseline="bigbox")
    # the bigbox run is the baseline: the laptop's 5,400 is 0.26x its 21,000
    assert "0.26x" in out.read_text()


def test_markdown_report_has_ratios_and_marks_differing_facts(two_runs, tmp_path):
    text = report.write_report(two_runs, tmp_path / "m.md").read_text()
    assert "| hostname ≠ |" in text and "| CPU |" in text
    assert "3.89x" in text and "÷ run 1" in text


def test_missing_folder_named_for_html_too(tmp_path):
    with pytest.raises(RecordError, match="does not exist") as info:
        report.write_report([tmp_path / "gone"], tmp_path / "x.html")
    assert "gone" in str(info.value) and not (tmp_path / "x.html").exists()


def test_chapter_warns_when_scales_or_constraints_differ(tmp_path):
    a = Checkpoint("02_mmap", scale="ci", records_dir=tmp_path / "a")
    a.observe("x", 1.0, "s").constraint("warm page cache").write(False)
    b = Checkpoint("02_mmap", scale="workshop", records_dir=tmp_path / "b")
    b.observe("x", 2.0, "s").constraint("cold page cache").write(False)
    records = load_records([tmp_path / "a", tmp_path / "b"])
    warnings = report.chapter_warnings(records, "02_mmap")
    assert "different scales (ci: run 1; workshop: run 2)" in warnings[0]
    assert "different constraints (run 1: warm page cache; run 2: cold page cache)" in warnings[1]
    text = "".join(_parse(report.write_report([tmp_path / "a", tmp_path / "b"],
                                              tmp_path / "w.html")).text)
    assert "different scales" in text and "different constraints" in text
