"""labkit.data.fixtures and its writers: deterministic, verified, idempotent fixtures (chapter
00)."""

from __future__ import annotations

import csv
import glob
import hashlib
import io
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import numpy as np
import pytest

from labkit import paths
from labkit.data import fixtures as fxmod
from labkit.data import writers as _writers
from labkit.data.fixtures import (
    ensure_fixtures,
    fixture,
    load_specs,
    resolve_spec,
    verify,
)
from labkit.errors import FixtureError, ScaleError

PORTABLE = ["array", "sample_files", "array_shards", "jsonl"]
# JPEG / Parquet / BPE / H.264 and FLAC (chapter 15): the bytes depend on the encoder version
ENCODED = ["images", "wds", "parquet", "corpus", "videos", "audio"]
ALL = PORTABLE + ENCODED


def _spec(name: str, scale: str = "ci") -> dict:
    return resolve_spec(load_specs()[name], scale)


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
            for p in folder.rglob("*") if p.is_file()}


def _leftovers(root: Path) -> list[str]:
    pats = [".*.tmp-*", ".*.old-*"]
    return sorted(g for pat in pats for g in glob.glob(str(root / "**" / pat), recursive=True))


def _dump_toml(specs: dict) -> str:
    """A TOML writer for the spec file's shape: tables of scalars and inline tables."""

    def val(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
        if isinstance(v, bool):
            return "true" if v else "false"
        return json.dumps(v)

    out = []
    for name, spec in specs.items():
        out.append(f"[{name}]")
        out.extend(f"{k} = {val(v)}" for k, v in spec.items())
        out.append("")
    return "\n".join(out)


@pytest.fixture
def spec_copy(tmp_path, monkeypatch):
    """A writable copy of the repo's spec file that LABKIT_SPECS points at."""
    original = paths.REPO_ROOT / "data_fixtures" / "fixtures.toml"
    path = tmp_path / "fixtures.toml"
    specs = tomllib.loads(original.read_text())
    path.write_text(_dump_toml(specs))
    monkeypatch.setenv("LABKIT_SPECS", str(path))

    def rewrite(edit):
        edit(specs)
        path.write_text(_dump_toml(specs))
        return path

    return rewrite


# -- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", PORTABLE)
def test_same_seed_same_files_in_two_caches(name, ci_fixture, own_data):
    shared = ci_fixture(name)
    fresh = fixture(name, "ci", progress=False)
    assert fresh.path != shared.path and fresh.status == "generated"
    assert fresh.digest == shared.digest
    assert {r: e["sha256"] for r, e in fresh.manifest["files"].items()} == {
        r: e["sha256"] for r, e in shared.manifest["files"].items()}


@pytest.mark.parametrize("name", ENCODED)
def test_encoded_kinds_are_identical_with_the_same_encoder(name, ci_fixture, own_data):
    # Same library versions: even the encoder-dependent bytes must match (no timestamps, no
    # randomness outside the seed), also when generated in another process. A fresh process
    # is the case that caught x264's mbtree (issue 22): the bytes moved with the process's
    # memory layout, which one process regenerating its own fixture rarely shows.
    code = ("import sys; from labkit.data.fixtures import fixture; "
            "sys.stdout.write(fixture(sys.argv[1], 'ci', progress=False).digest)")
    env = {**os.environ, "LABKIT_DATA": str(own_data)}
    digest = subprocess.run([sys.executable, "-c", code, name], env=env, capture_output=True,
                            text=True, timeout=240, check=True).stdout
    assert digest == ci_fixture(name).digest, f"{name}: another process wrote other bytes"


#: sha256 (first 32 hex) over sorted (path, bytes) of each portable writer's output for a
#: small pinned spec. These hold on every machine and numpy version; if a writer change
#: moves one, that change must bump GENERATOR_VERSION, and these values are updated with it.
GOLDEN = {
    "array": ({"seed": 11, "dtype": "float32", "features": 8, "samples": 100},
              "9fa99d8f692c5630f52b0bf68a9aac8a"),
    "npy_files": ({"seed": 12, "dtype": "float32", "features": 8, "samples": 5},
                  "30be07d90057c53422cbf50a0a835d08"),
    "npy_shards": ({"seed": 13, "dtype": "float32", "features": 8, "samples": 100,
                    "shards": 3}, "36721616b7be5371231748252ce801de"),
    "jsonl": ({"seed": 15, "classes": 10, "samples": 50, "shards": 2},
              "5bafee17ee25588ad4fbeb774a71e824"),
}


def _write(kind: str, spec: dict, dest: Path) -> tuple[dict, int]:
    dest.mkdir(parents=True)
    return _writers.WRITERS[kind].write({"kind": kind, **spec}, dest, lambda n: None)


def _tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        h.update(p.relative_to(folder).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:32]


@pytest.mark.parametrize("kind", sorted(GOLDEN))
def test_portable_writers_match_pinned_digests(kind, tmp_path):
    spec, golden = GOLDEN[kind]
    _write(kind, spec, tmp_path / kind)
    assert fxmod.GENERATOR_VERSION == 1, "generator bumped: re-pin GOLDEN for the new output"
    assert _tree_hash(tmp_path / kind) == golden, (
        f"{kind} writer output changed for the same seed: bump GENERATOR_VERSION")


# -- content --------------------------------------------------------------------------------


def test_array_content(ci_fixture):
    fx = ci_fixture("array")
    spec = _spec("array")
    a = np.load(fx.file("array.npy"))
    assert a.shape == (spec["samples"], spec["features"]) and a.dtype == np.float32
    assert fx.meta["shape"] == list(a.shape) and fx.meta["dtype"] == "float32"
    assert fx.samples == spec["samples"]
    np.testing.assert_array_equal(a[:, 0], np.arange(spec["samples"], dtype=np.float32))
    assert a[:, 1:].std() > 0.5  # the features are noise, not zeros
    raw = np.fromfile(fx.file("array.raw"), dtype=np.float32).reshape(a.shape)
    np.testing.assert_array_equal(raw, a)
    assert verify(fx, full=True) == []


def test_array_shards_are_contiguous_ids(ci_fixture):
    fx = ci_fixture("array_shards")
    spec = _spec("array_shards")
    # array (seed 0) and array_shards (seed 2) do not share a seed: compare ids, not rows
    assert _spec("array")["seed"] != spec["seed"]
    shards = fx.meta["shards"]
    assert len(shards) == spec["shards"] == len(fx.file_list(".npy"))
    parts, first = [], 0
    for s in shards:
        rows = np.load(fx.file(s["file"]))
        assert s["first_id"] == first and len(rows) == s["samples"] > 0
        parts.append(rows)
        first += len(rows)
    ids = np.concatenate(parts)[:, 0]
    np.testing.assert_array_equal(ids, np.arange(spec["samples"], dtype=np.float32))


def test_shards_are_the_array_stream_cut_across_chunk_boundaries(tmp_path):
    # 70000 rows span two of the writers' 65536-row generation chunks; 3 shards cut them
    spec = {"seed": 9, "dtype": "float32", "features": 4, "samples": 70000}
    _write("array", spec, tmp_path / "a")
    meta, n = _write("npy_shards", {**spec, "shards": 3}, tmp_path / "s")
    whole = np.load(tmp_path / "a" / "array.npy")
    cut = np.concatenate([np.load(tmp_path / "s" / s["file"]) for s in meta["shards"]])
    assert n == 70000 and [s["samples"] for s in meta["shards"]] == [23333, 23333, 23334]
    np.testing.assert_array_equal(cut, whole)
    meta, n = _write("npy_files", {**spec, "samples": 3}, tmp_path / "f")
    rows = [np.load(tmp_path / "f" / "samples" / f"{i:07d}.npy") for i in range(3)]
    np.testing.assert_array_equal(np.stack(rows), whole[:3])


def test_sample_files_content(ci_fixture):
    fx = ci_fixture("sample_files")
    spec = _spec("sample_files")
    files = fx.file_list(".npy")
    assert len(files) == fx.files == fx.samples == spec["samples"]
    assert [f.name for f in files[:2]] == ["0000000.npy", "0000001.npy"]
    for i in (0, 1, spec["samples"] // 2, spec["samples"] - 1):
        row = np.load(fx.path / fx.meta["pattern"].format(id=i))
        assert row.shape == (spec["features"],) and row.dtype == np.float32 and row[0] == i


def test_images_content(ci_fixture):
    from PIL import Image

    fx = ci_fixture("images")
    spec = _spec("images")
    n = spec["samples"]
    assert len(fx.file_list(".jpg")) == n and fx.files == n + 1
    with open(fx.file("labels.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == n
    assert [int(r["id"]) for r in rows] == list(range(n))
    labels = [int(r["label"]) for r in rows]
    assert min(labels) >= 0 and max(labels) < spec["classes"]
    assert len(set(labels)) == spec["classes"]  # 512 draws cover all 10 classes
    for r in rows[:3] + rows[-2:]:
        i = int(r["id"])
        assert int(r["label"]) == _writers.synth_image(spec["seed"], i, spec["size"],
                                                       spec["classes"])[1]
        with Image.open(fx.path / r["file"]) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            assert im.size == (spec["size"], spec["size"])


def test_webdataset_shards_content(ci_fixture):
    fx = ci_fixture("wds")
    spec = _spec("wds")
    assert len(fx.meta["shards"]) == spec["shards"] == len(fx.file_list(".tar"))
    ids = []
    for shard in fx.meta["shards"]:
        with tarfile.open(fx.file(shard["file"])) as tar:
            members = tar.getmembers()
            assert all(m.mtime == 0 for m in members)  # byte-identical tars
            by_key: dict[str, dict] = {}
            for m in members:
                key, ext = m.name.split(".", 1)
                by_key.setdefault(key, {})[ext] = tar.extractfile(m).read()
        assert len(by_key) == shard["samples"]
        for key, parts in sorted(by_key.items()):
            assert set(parts) == {"jpg", "cls", "npy"}, key
            assert parts["jpg"][:2] == b"\xff\xd8"  # JPEG magic
            assert 0 <= int(parts["cls"]) < spec["classes"]
            vec = np.load(io.BytesIO(parts["npy"]))
            assert vec.shape == (spec["features"],) and vec[0] == int(key)
            ids.append(int(key))
    assert ids == list(range(spec["samples"]))


def test_webdataset_library_reads_the_shards(ci_fixture):
    wds = pytest.importorskip("webdataset")
    fx = ci_fixture("wds")
    first = fx.meta["shards"][0]
    samples = list(wds.WebDataset(str(fx.file(first["file"])), shardshuffle=False))
    assert len(samples) == first["samples"]
    assert {"jpg", "cls", "npy"} <= set(samples[0]) and samples[0]["__key__"] == "0000000"


def test_parquet_row_groups_and_columns(ci_fixture):
    import pyarrow.parquet as pq

    fx = ci_fixture("parquet")
    spec = _spec("parquet")
    assert len(fx.meta["shards"]) == spec["shards"] == len(fx.file_list(".parquet"))
    ids = []
    for shard in fx.meta["shards"]:
        pf = pq.ParquetFile(fx.file(shard["file"]))
        assert pf.schema_arrow.names == ["id", "label", "features", "text"]
        rg = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
        full, rest = divmod(shard["samples"], spec["row_group"])
        assert rg == [spec["row_group"]] * full + ([rest] if rest else [])
        t = pf.read()
        feats = np.asarray(t.column("features").combine_chunks().flatten()).reshape(
            -1, spec["features"])
        np.testing.assert_array_equal(feats[:, 0], t.column("id").to_numpy())
        labels = t.column("label").to_numpy()
        assert labels.min() >= 0 and labels.max() < spec["classes"]
        assert all(t.column("text").to_pylist())
        ids.extend(t.column("id").to_pylist())
    assert ids == list(range(spec["samples"]))


def test_jsonl_content(ci_fixture):
    fx = ci_fixture("jsonl")
    spec = _spec("jsonl")
    ids = []
    for shard in fx.meta["shards"]:
        lines = fx.file(shard["file"]).read_text().splitlines()
        assert len(lines) == shard["samples"]
        for line in lines:
            rec = json.loads(line)
            assert set(rec) == {"id", "label", "text"} and 0 <= rec["label"] < spec["classes"]
            assert 8 <= len(rec["text"].split()) <= 32
            ids.append(rec["id"])
    assert ids == list(range(spec["samples"]))


# -- idempotence and regeneration -----------------------------------------------------------


def test_second_call_is_cached_and_rewrites_nothing(own_data):
    first = fixture("array", "ci", progress=False)
    assert first.status == "generated"
    before = _mtimes(first.path)
    assert "manifest.json" in before and len(before) == 3
    again = fixture("array", "ci", progress=False)
    assert again.status == "cached" and again.digest == first.digest
    assert _mtimes(first.path) == before
    assert fixture("array", "ci", progress=False, verify_all=True).status == "cached"
    assert _mtimes(first.path) == before


def test_spec_change_regenerates_only_that_fixture_and_scale(own_data, spec_copy):
    array = fixture("array", "ci", progress=False)
    fixture("jsonl", "ci", progress=False)
    # another scale's size is not part of the ci spec: nothing to do
    spec_copy(lambda s: s["array"]["workshop"].update(samples=123))
    assert fixture("array", "ci", progress=False).status == "cached"
    spec_copy(lambda s: s["array"]["ci"].update(samples=4096))
    small = fixture("array", "ci", progress=False)
    assert small.status == "generated" and small.samples == 4096
    assert small.file("array.raw").stat().st_size == 4096 * _spec("array")["features"] * 4
    assert fixture("jsonl", "ci", progress=False).status == "cached"
    spec_copy(lambda s: s["array"].update(seed=99))  # a shared field counts too
    reseeded = fixture("array", "ci", progress=False)
    assert reseeded.status == "generated" and reseeded.digest != small.digest
    assert reseeded.digest != array.digest
    assert _leftovers(own_data) == []


def test_generator_version_bump_regenerates(own_data, monkeypatch):
    assert fixture("jsonl", "ci", progress=False).status == "generated"
    monkeypatch.setattr(fxmod, "GENERATOR_VERSION", fxmod.GENERATOR_VERSION + 1)
    fx = fixture("jsonl", "ci", progress=False)
    assert fx.status == "generated" and fx.manifest["generator"] == fxmod.GENERATOR_VERSION


def test_unreadable_manifest_regenerates(own_data):
    fx = fixture("jsonl", "ci", progress=False)
    (fx.path / "manifest.json").write_text('{"half": ')
    again = fixture("jsonl", "ci", progress=False)
    assert again.status == "generated" and again.digest == fx.digest


def test_concurrent_callers_generate_once(own_data):
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    statuses = sorted(results.get(timeout=5) for _ in procs)
    assert [p.exitcode for p in procs] == [0, 0]
    assert statuses == ["cached", "generated"]
    assert _leftovers(own_data) == []


def _race(barrier, results):
    barrier.wait(10)
    results.put(fixture("sample_files", "ci", progress=False).status)


# -- corruption and repair ------------------------------------------------------------------


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _expect_verification_error(name: str, bad: Path, what: str) -> str:
    with pytest.raises(FixtureError) as info:
        fixture(name, "ci", progress=False)
    msg = str(info.value)
    assert str(bad) in msg and what in msg
    assert f"labkit fixtures {name} --scale ci --repair" in msg
    return msg


def _repair_restores(name: str, digest: str) -> None:
    fx = fixture(name, "ci", progress=False, repair=True)
    assert fx.status == "repaired" and fx.digest == digest
    assert verify(fx, full=True) == []
    assert fixture(name, "ci", progress=False).status == "cached"
    assert _leftovers(fx.path.parent) == []


def test_flipped_byte_in_array_is_caught_and_repaired(own_data):
    fx = fixture("array", "ci", progress=False)
    bad = fx.file("array.npy")
    _flip_byte(bad, 4096)
    _expect_verification_error("array", bad, "sha256")
    _repair_restores("array", fx.digest)


def test_flipped_byte_with_mtime_restored_needs_verify_all(own_data):
    fx = fixture("array", "ci", progress=False)
    bad = fx.file("array.raw")
    st = bad.stat()
    _flip_byte(bad, 100)
    os.utime(bad, ns=(st.st_atime_ns, st.st_mtime_ns))
    # the fast path trusts size + mtime (documented); a full check hashes every byte
    assert fixture("array", "ci", progress=False).status == "cached"
    with pytest.raises(FixtureError, match="array.raw"):
        fixture("array", "ci", progress=False, verify_all=True)
    assert verify(fx) == [] and len(verify(fx, full=True)) == 1


def _fewer_sample_files(spec_copy, n=256):
    spec_copy(lambda s: s["sample_files"]["ci"].update(samples=n))  # keeps the test quick


def test_truncated_sample_file_is_caught_and_repaired(own_data, spec_copy):
    _fewer_sample_files(spec_copy)
    fx = fixture("sample_files", "ci", progress=False)
    bad = fx.file("samples/0000123.npy")
    size = bad.stat().st_size
    bad.write_bytes(bad.read_bytes()[:100])
    _expect_verification_error("sample_files", bad, f"100 bytes, manifest says {size}")
    _repair_restores("sample_files", fx.digest)


def test_deleted_file_is_caught_and_repaired(own_data):
    fx = fixture("jsonl", "ci", progress=False)
    bad = fx.file("shard-00001.jsonl")
    bad.unlink()
    _expect_verification_error("jsonl", bad, "missing")
    _repair_restores("jsonl", fx.digest)


def test_many_problems_are_summarised(own_data, spec_copy):
    _fewer_sample_files(spec_copy)
    fx = fixture("sample_files", "ci", progress=False)
    for p in fx.file_list(".npy")[:7]:
        p.unlink()
    with pytest.raises(FixtureError, match=r"\.\.\. and 2 more") as info:
        fixture("sample_files", "ci", progress=False)
    assert str(info.value).count("missing") == 5


# -- bad names and specs --------------------------------------------------------------------


def test_unknown_fixture_name():
    with pytest.raises(FixtureError) as info:
        fixture("no_such_fixture", "ci")
    msg = str(info.value)
    assert "no_such_fixture" in msg and "array" in msg and "fixtures.toml" in msg


def test_unknown_scale(monkeypatch):
    with pytest.raises(ScaleError, match=r"'huge'.*ci, workshop, full"):
        fixture("array", "huge")
    monkeypatch.setenv("LABKIT_SCALE", "tiny")
    with pytest.raises(ScaleError, match="LABKIT_SCALE='tiny'"):
        fixture("array")
    with pytest.raises(ValueError):  # ScaleError is a ValueError too
        fixture("array", "")


def test_invalid_toml_names_the_spec_file(tmp_path, monkeypatch):
    bad = tmp_path / "broken.toml"
    bad.write_text("[array]\nkind = 'array'\nci = { samples = \n")
    monkeypatch.setenv("LABKIT_SPECS", str(bad))
    with pytest.raises(FixtureError, match="not valid TOML") as info:
        fixture("array", "ci")
    assert str(bad) in str(info.value)


def test_missing_spec_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_SPECS", str(tmp_path / "nowhere.toml"))
    with pytest.raises(FixtureError, match="LABKIT_SPECS") as info:
        fixture("array", "ci")
    assert "nowhere.toml" in str(info.value)


def test_unknown_kind_names_the_spec_file(spec_copy):
    path = spec_copy(lambda s: s["jsonl"].update(kind="hdf5"))
    with pytest.raises(FixtureError) as info:
        fixture("array", "ci")  # any use of the file validates all of it
    msg = str(info.value)
    assert str(path) in msg and "'hdf5'" in msg and "'jsonl'" in msg and "npy_files" in msg


def test_missing_scale_table_names_the_spec_file(spec_copy):
    path = spec_copy(lambda s: s["jsonl"].pop("full"))
    with pytest.raises(FixtureError, match=r"'jsonl' has no sizes for \['full'\]") as info:
        fixture("jsonl", "ci")
    assert str(path) in str(info.value)


def test_spec_missing_a_field_names_the_spec_file(spec_copy, own_data):
    path = spec_copy(lambda s: s["array"].pop("features"))
    with pytest.raises(FixtureError) as info:
        fixture("array", "ci", progress=False)
    assert str(path) in str(info.value) and "features" in str(info.value)


# -- tables, progress, Fixture --------------------------------------------------------------


def test_status_table_and_ensure_fixtures(own_data, capsys):
    out = ensure_fixtures(["array", "jsonl"], "ci", progress=False)
    assert list(out) == ["array", "jsonl"]
    text = capsys.readouterr().out
    assert text.count("generated") == 2 and "total" in text and str(own_data) in text
    ensure_fixtures(["array", "jsonl"], "ci", progress=False)
    assert capsys.readouterr().out.count("cached") == 2
    ensure_fixtures(["jsonl"], "ci", progress=False, report=False)
    assert capsys.readouterr().out == ""


def test_progress_bar_goes_to_stderr(own_data, capsys):
    fixture("jsonl", "ci", progress=True)
    captured = capsys.readouterr()
    assert "jsonl (ci)" in captured.err and captured.out == ""


def test_fixture_file_lookup(ci_fixture):
    fx = ci_fixture("array")
    assert fx.file("array.raw") == fx.path / "array.raw"
    assert fx.nbytes == sum(p.stat().st_size for p in fx.file_list())
    with pytest.raises(FixtureError, match="no file 'nope.bin'"):
        fx.file("nope.bin")
    assert [p.name for p in fx.file_list(".npy")] == ["array.npy"]


# -- atomic generation ----------------------------------------------------------------------


def test_generation_leaves_no_temp_folders(ci_fixture, labkit_env):
    for n in ALL:
        ci_fixture(n)
    assert _leftovers(labkit_env["data"]) == []
    assert sorted(p.name for p in (labkit_env["data"] / "ci").iterdir()
                  if not p.name.startswith(".")) == sorted(ALL)


class _FailingWriter(_writers.Writer):
    """Writes part of a file, then fails, like a full disk or a Ctrl-C mid-way."""

    def __init__(self, exc):
        self.exc = exc

    def estimate_bytes(self, spec):
        return 1

    def write(self, spec, dest, update):
        (dest / "part.bin").write_bytes(b"\0" * 1000)
        (dest / "sub").mkdir()
        raise self.exc


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_writer_leaves_nothing_and_keeps_the_old_version(exc, own_data, monkeypatch):
    good = fixture("jsonl", "ci", progress=False)
    with monkeypatch.context() as m:
        m.setitem(_writers.WRITERS, "jsonl", _FailingWriter(exc))
        m.setattr(fxmod, "GENERATOR_VERSION", fxmod.GENERATOR_VERSION + 1)  # force a rebuild
        with pytest.raises(type(exc)):
            fixture("jsonl", "ci", progress=False)
    assert _leftovers(own_data) == []
    again = fixture("jsonl", "ci", progress=False)
    assert again.status == "cached" and again.digest == good.digest
    assert verify(again, full=True) == []


def test_failed_first_generation_leaves_no_folder(own_data, monkeypatch):
    monkeypatch.setitem(_writers.WRITERS, "jsonl", _FailingWriter(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        fixture("jsonl", "ci", progress=False)
    assert _leftovers(own_data) == [] and not (own_data / "ci" / "jsonl").exists()
