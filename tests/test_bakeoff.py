"""labkit.capstone.bakeoff: one fixture in every format, every core loader exactly once (chapter
11)."""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit import optional
from labkit.capstone.bakeoff import adapters as bakeoff
from labkit.capstone.bakeoff.adapters import build_loader, probe_loader
from tests.contracts import check_exactly_once

SAMPLES = 48


@pytest.fixture(scope="module")
def data(ci_fixture, tmp_path_factory):
    d = lk.capstone.prepare_bakeoff(ci_fixture("images"), tmp_path_factory.mktemp("bake"),
                           samples=SAMPLES, shards=4, row_group=8)
    yield d
    lk.capstone.cleanup_bakeoff(d)


def test_formats_written_and_timed(data):
    assert data.samples == SAMPLES
    assert set(data.formats) == {"tar", "parquet"}
    assert all(s >= 0 for s in data.conversion_s.values())
    assert len(data.formats["tar"]) == len(data.formats["parquet"]) == 4


CORE = lk.capstone.loader_names(core_only=True)


def test_core_loaders_are_the_promised_ones():
    assert CORE == ["torch map-style", "torch IterableDataset", "WebDataset",
                    "HF datasets streaming", "Arrow", "torchdata.nodes", "StatefulDataLoader",
                    "LMDB", "HDF5", "WebDataset over S3"]
    assert all(probe_loader(bakeoff.get_adapter(n))[0] for n in CORE)


@pytest.mark.parametrize("name", CORE)
def test_core_loader_delivers_every_id_once(data, name):
    def make(rank, world_size, num_workers):
        return build_loader(name, data, batch_size=8, num_workers=num_workers)

    # one rank: the adapters split over workers; ranks are chapter 04's contract
    check_exactly_once(make, SAMPLES, workers=(0, 2), world_sizes=(1,))


def test_batches_have_the_same_shape_everywhere(data, ci_fixture):
    size = ci_fixture("images").meta["size"]
    for name in CORE:
        loader = build_loader(name, data, batch_size=8, num_workers=0)
        it = iter(loader)
        batch = next(it)
        del it  # a generator's finally runs now (the S3 row's); no workers to stop here
        close = getattr(loader, "close", None)  # the S3 store
        if close is not None:
            close()
        del loader
        assert batch["image"].shape == (8, 3, size, size), name
        assert batch["image"].dtype == torch.uint8, name
        assert batch["label"].shape == batch["id"].shape == (8,), name


def test_absent_library_is_skipped_with_reason_and_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("ray") else real(name, *a))
    ok, why = probe_loader(bakeoff.get_adapter("Ray Data"))
    assert not ok
    assert "ray is not installed" in why and "pip install 'ray[data]'" in why


def test_dali_needs_cuda_says_so(monkeypatch):
    monkeypatch.setitem(optional._CHECKS, "cuda", lambda **kw: (False, "no CUDA device"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(bakeoff.importlib, "import_module", lambda name: None)
    ok, why = probe_loader(bakeoff.get_adapter("DALI"))
    assert not ok and "needs a CUDA GPU" in why and "no CUDA device" in why


def test_run_bakeoff_skips_absent_and_measures_baseline(data, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "petastorm" else real(name, *a))
    results = lk.capstone.run_bakeoff(data, lambda batch: None, names=["Arrow", "Petastorm"],
                             num_workers=0, repeats=1, warmup=0, batch_size=8)
    assert [r.name for r in results] == ["torch map-style", "Arrow", "Petastorm",
                                         "torch map-style (again)"]
    # the ratio is against the mean of the two baseline runs
    mean = (results[0].samples_per_s + results[3].samples_per_s) / 2
    assert results[0].ratio == pytest.approx(results[0].samples_per_s / mean)
    assert results[0].audit.ok and results[3].audit.ok
    assert results[1].ok and results[1].audit.ok and results[1].conversion_s is not None
    assert results[2].skipped and "pyarrow.filesystem" in results[2].skipped
    table = lk.capstone.format_bakeoff(results)
    assert "skipped: petastorm is not installed" in table
    assert lk.capstone.plot_bakeoff(results) is not None
    row = results[2].as_dict()
    assert row["samples_per_s"] is None and row["skipped"]
    names = [o["name"] for r in results for o in r.as_observations()]
    assert names == [*["bakeoff.samples_per_s", "bakeoff.ratio", "bakeoff.exactly_once"] * 2,
                     "bakeoff.skipped", "bakeoff.samples_per_s", "bakeoff.ratio",
                     "bakeoff.exactly_once"]


def test_a_loader_that_drops_samples_is_caught(data, monkeypatch):
    def dropping(d, batch_size, num_workers, decoder):
        return [b for k, b in enumerate(bakeoff._arrow(d, batch_size, 0, decoder)) if k]

    fake = bakeoff.LoaderAdapter("Arrow", "pyarrow", ("pyarrow",), "pip install pyarrow",
                                 dropping)
    monkeypatch.setattr(bakeoff, "ADAPTERS", (bakeoff.ADAPTERS[0], fake))
    results = lk.capstone.run_bakeoff(data, lambda batch: None, names=["Arrow"], num_workers=0,
                             repeats=1, warmup=0, batch_size=8, recheck_baseline=False)
    assert not results[1].audit.ok and results[1].audit.missing == 8
    assert "NO: 0 duplicates, 8 missing" in lk.capstone.format_bakeoff(results)


def test_unknown_loader_and_format():
    with pytest.raises(KeyError, match="choose one of torch map-style"):
        bakeoff.get_adapter("magic")
    with pytest.raises(ValueError, match="choose one of tar"):
        bakeoff.ensure_format(bakeoff.BakeoffData(None, None, [], 1, 1), "zip")


def test_bench_bakeoff_runs_tiny():
    out = lk.tools.run_benchmark("bakeoff", scale="ci", samples=32, num_workers=0, repeats=1,
                           names=["Arrow"])
    for key in ("baseline_samples_per_s", "baseline_drift", "ratios", "skipped", "loaders",
                "goal_met", "conversion_s", "versions"):
        assert key in out
    assert out["baseline"] == "torch map-style" and out["goal_met"] is True
    assert set(out["ratios"]) == {"torch map-style", "Arrow", "torch map-style (again)"}


@pytest.mark.parametrize("fmt", ["lmdb", "hdf5"])
def test_lmdb_and_hdf5_rows_hold_the_fixtures_bytes_and_survive_fork_after_a_parent_read(
        data, fmt):
    from labkit.capstone.bakeoff.datasets import ImageRows

    rows = {"lmdb": lk.formats.LmdbRows, "hdf5": lk.formats.Hdf5Rows}[fmt]
    ds = ImageRows(rows(bakeoff.ensure_format(data, fmt)))
    assert len(ds) == SAMPLES and data.conversion_s[fmt] >= 0
    first = ds[0]   # the parent reads first (a notebook does): its handle is open at the fork
    assert first["id"] == data.rows[0][0] and first["label"] == data.rows[0][1]
    ids = [int(i) for b in DataLoader(ds, batch_size=8, num_workers=2, timeout=60)
           for i in b["id"]]
    assert sorted(ids) == sorted(r[0] for r in data.rows)
    assert lk.worker_processes() == []


def test_lmdb_and_hdf5_rows_name_the_file_when_it_is_broken(data, tmp_path):
    import lmdb

    from labkit.capstone.bakeoff.datasets import ImageRows

    short = lk.damaged_copy(bakeoff.ensure_format(data, "hdf5"), tmp_path / "short.h5",
                            "truncate")
    with pytest.raises(lk.DataFormatError, match="short.h5: is truncated"):
        lk.formats.Hdf5Rows(short)
    gone = tmp_path / "gone.lmdb"
    shutil.copytree(bakeoff.ensure_format(data, "lmdb"), gone)
    with lmdb.open(str(gone), map_size=1 << 26) as env, env.begin(write=True) as txn:
        txn.delete(b"00000003")
    with pytest.raises(lk.DataFormatError, match="gone.lmdb: sample 3 is missing"):
        ImageRows(lk.formats.LmdbRows(gone))[3]


def test_petastorm_row_says_exactly_why_and_this_test_fails_once_petastorm_would_import():
    """Petastorm's row stays honest: it cannot run next to pyarrow >= 15. CI installs it
    (``.ci/run``, no dependencies: the import fails before they matter), so the real import
    is checked; when a release imports here, this test fails and the row can be measured."""
    ok, why = probe_loader(bakeoff.get_adapter("Petastorm"))
    assert not ok and "pyarrow.filesystem, which pyarrow 15 removed" in why
    if importlib.util.find_spec("petastorm") is not None:
        assert "does not load here (ModuleNotFoundError: No module named " \
               "'pyarrow.filesystem')" in why
        with pytest.raises(ModuleNotFoundError) as e:
            importlib.import_module("petastorm")
        assert e.value.name == "pyarrow.filesystem"
    else:  # not installed here: the condition it fails on must still hold
        assert importlib.util.find_spec("pyarrow.filesystem") is None
        assert "pip install petastorm" not in why
