"""labkit.records.decisions: the decision table, its evidence from records, and missing records."""

from __future__ import annotations

import json

import labkit as lk
from labkit.records.decisions import SITUATIONS

SEEDS = ["data fits in RAM", "larger than RAM, one node", "TB+ on remote storage, with resume",
         "decode-bound (images)", "decode-bound (video and audio)",
         "distributed, lazy (IterableDataset)",
         "LLM pretraining (tokenized text)", "random access to many small records",
         "preprocessing-heavy, across machines", "shards in an object store (S3 API)"]


def test_every_situation_names_a_chapter_that_exists():
    assert [s.situation for s in SITUATIONS] == SEEDS
    from labkit import paths

    notebooks = {p.stem for p in paths.notebooks_dir().rglob("*.ipynb")}
    for s in SITUATIONS:
        assert s.evidence, s.situation
        for ev in s.evidence:
            assert ev.chapter in notebooks, ev.chapter


def test_no_records_says_which_chapter_to_run(tmp_path):
    rows = lk.records.decision_table(records_dir=tmp_path / "nowhere")
    assert [r["situation"] for r in rows] == SEEDS
    for r in rows:
        assert r["chapters"]
        for e in r["evidence"]:
            assert e["value"] is None
            need = f" with {e['needs']} installed" if e["needs"] else ""
            nn = e["chapter"].partition("_")[0]   # 14, or 14b (a Going-further notebook)
            assert e["text"] == f"run chapter {nn} to measure it here{need}"
    md = lk.records.format_decision_table(rows)
    assert "[02 mmap](02_mmap.ipynb)" in md and "run chapter 10 to measure it here" in md
    assert md.count("\n") == 1 + len(SEEDS)
    for line in md.splitlines()[2:]:  # one "run chapter NN" per chapter, not one per figure
        cells = line.split(" | ")[-1].rstrip(" |").split("<br>")
        assert len(cells) == len(set(cells)), line


def _record(tmp_path, chapter, observations, scale="ci", created="2026-01-01T00:00:00+00:00"):
    ck = lk.Checkpoint(chapter, scale=scale, records_dir=tmp_path)
    for name, value, unit, config in observations:
        ck.observe(name, value, unit, config)
    path = ck.write(print_summary=False)
    rec = json.loads(path.read_text())
    rec["created"] = created
    path.write_text(json.dumps(rec))
    return path


def test_evidence_comes_from_the_newest_record_of_the_scale(tmp_path):
    _record(tmp_path, "02_mmap", [("mmap_slices_sequential_warm.samples_per_s", 100.0,
                                   "samples/s", {})], created="2026-01-01T00:00:00+00:00")
    _record(tmp_path, "02_mmap", [("mmap_slices_sequential_warm.samples_per_s", 2000.0,
                                   "samples/s", {})], created="2026-01-02T00:00:00+00:00")
    _record(tmp_path, "02_mmap", [("mmap_slices_sequential_warm.samples_per_s", 7.0,
                                   "samples/s", {})], scale="workshop",
            created="2026-01-03T00:00:00+00:00")
    _record(tmp_path, "10_decode_and_augment", [
        ("decode.samples_per_s", 900.0, "images/s", {"decoder": "opencv"}),
        ("decode.samples_per_s", 500.0, "images/s", {"decoder": "pil"})])
    rows = lk.records.decision_table(records_dir=tmp_path, scale="ci")
    ram = rows[0]["evidence"]
    assert ram[0]["value"] == 2000.0 and ram[0]["scale"] == "ci"
    # the record exists but lacks this observation: say so, do not invent it
    assert ram[1]["value"] is None and "rerun chapter 02" in ram[1]["text"]
    decode = rows[3]["evidence"]
    assert decode[1]["value"] == 500.0  # matched by config, not the first of the name
    assert "run chapter 10" not in decode[1]["text"]
    md = lk.records.format_decision_table(rows)
    assert "2,000 samples/s (`mmap_slices_sequential_warm.samples_per_s`, ci)" in md
    assert "this machine" not in lk.records.format_decision_table(rows, figures=False)
    assert lk.records.decision_table(records_dir=tmp_path, scale="workshop")[0]["evidence"][0][
        "value"] == 7.0
