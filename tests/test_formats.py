"""Chapter 12's instruments: the LMDB/HDF5 writers and readers that stay in labkit (the bench,
the bake-off), their bad input, and the optional-library checks. The chapter's own readers are
pinned by its checked cells (notebooks/12_storage_formats.ipynb, exercise 4: damaged TFRecord,
LMDB and tensor-file copies)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.formats.hdf5rows import Hdf5Rows, write_hdf5
from labkit.formats.lmdbrows import LmdbRows, write_lmdb
from labkit_tools.bench import run_benchmark

lmdb = pytest.importorskip("lmdb", reason="lmdb is a dependency of chapter 12")
h5py = pytest.importorskip("h5py", reason="h5py is a dependency of chapter 12")

N, F = 200, 16


@pytest.fixture(scope="module")
def rows():
    return np.random.default_rng(0).standard_normal((N, F), dtype=np.float32)


@pytest.fixture(scope="module")
def stored(rows, tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    write_lmdb(d / "rows.lmdb", rows)
    write_hdf5(d / "contiguous.h5", rows)
    write_hdf5(d / "gzip.h5", rows, chunk_rows=16, compression="gzip")
    return d


@pytest.mark.parametrize("make", [lambda d: LmdbRows(d / "rows.lmdb"),
                                  lambda d: Hdf5Rows(d / "contiguous.h5"),
                                  lambda d: Hdf5Rows(d / "gzip.h5")])
def test_rows_round_trip_and_survive_forked_workers_after_a_parent_read(rows, stored, make):
    ds = make(stored)
    assert len(ds) == N and torch.equal(ds[N - 1][0], torch.from_numpy(rows[N - 1]))
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, timeout=30,
                        multiprocessing_context="fork")
    got = {int(i): x for xs, ids in loader for x, i in zip(xs, ids, strict=True)}
    assert sorted(got) == list(range(N))
    assert all(torch.equal(x, torch.from_numpy(rows[i])) for i, x in got.items())


def _error(fn) -> str:
    with pytest.raises(lk.DataFormatError) as e:
        fn()
    return str(e.value)


def test_truncated_lmdb_is_refused_before_any_read(stored, tmp_path):
    bad = lk.damaged_copy(stored / "rows.lmdb", tmp_path / "short.lmdb", "truncate",
                          file="data.mdb")
    msg = _error(lambda: LmdbRows(bad.parent))
    assert str(bad) in msg and "truncated" in msg


def test_missing_lmdb_key_names_the_sample(stored, tmp_path):
    path = shutil.copytree(stored / "rows.lmdb", tmp_path / "missing.lmdb")
    size = 2 * (path / "data.mdb").stat().st_size  # the default 10 MiB map may be too small
    with lmdb.open(str(path), map_size=size, lock=False) as env, env.begin(write=True) as txn:
        txn.delete(b"00000007")
    ds = LmdbRows(path)
    msg = _error(lambda: ds[7])
    assert str(path) in msg and "sample 7" in msg and "00000007" in msg


def test_not_an_lmdb(tmp_path):
    (tmp_path / "x").write_bytes(b"nothing here")
    assert "x" in _error(lambda: LmdbRows(tmp_path / "x"))


def test_truncated_hdf5(stored, tmp_path):
    bad = lk.damaged_copy(stored / "contiguous.h5", tmp_path / "short.h5", "truncate")
    msg = _error(lambda: Hdf5Rows(bad))
    assert str(bad) in msg and "truncated" in msg


def test_missing_hdf5_dataset(stored):
    msg = _error(lambda: Hdf5Rows(stored / "contiguous.h5", key="images"))
    assert "'images'" in msg and "rows" in msg


def test_bench_formats_is_registered_and_reports_its_ratio(ci_fixture):
    from labkit_tools.bench import BENCHMARKS

    ci_fixture("array")
    assert "formats" in BENCHMARKS
    out = run_benchmark("formats", scale="ci", rows=256, trials=1, num_workers=1)
    assert out["rows"] == 256 and out["lmdb_vs_memmap"] > 0
    assert isinstance(out["goal_met"], bool) and out["hdf5_chunked_vs_contiguous"] > 0


@pytest.mark.parametrize("name", ["lance", "array_record", "safetensors", "tfdata"])
def test_optional_format_checks_say_why_or_what(name):
    ok, why = lk.status(name)
    assert why and ("not installed" in why or "does not load" in why) != ok, why
    if name == "tfdata":
        assert (why.startswith("tensorflow ") and "unknown" not in why) if ok else \
            "labkit[tfdata]" in why
