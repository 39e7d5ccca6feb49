"""Chapter 12's LMDB and HDF5 rows with variable-length JPEG values, as chapter 16's bake-off
once read them: a handle opened by the parent survives the fork, and a broken file is named
(labkit.formats, chapters 12, 16). The bake-off is typed in notebooks/16_capstone.ipynb."""

from __future__ import annotations

import shutil

import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit.formats.hdf5rows import Hdf5Rows, write_hdf5
from labkit.formats.lmdbrows import LmdbRows, write_lmdb

SAMPLES = 48


@pytest.fixture(scope="module")
def jpegs(ci_fixture):
    return lk.images.file_bytes(ci_fixture("images").file_list(".jpg")[:SAMPLES])


@pytest.fixture(scope="module")
def written(jpegs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rows")
    write_lmdb(folder / "lmdb", jpegs)
    write_hdf5(folder / "images.h5", jpegs)
    return {"lmdb": folder / "lmdb", "hdf5": folder / "images.h5"}


def _value(rows, k: int) -> bytes:
    return rows[k][0].numpy().tobytes()


@pytest.mark.parametrize("fmt", ["lmdb", "hdf5"])
def test_lmdb_and_hdf5_rows_hold_the_bytes_and_survive_fork_after_a_parent_read(
        written, jpegs, fmt):
    rows = {"lmdb": LmdbRows, "hdf5": Hdf5Rows}[fmt](written[fmt])
    assert len(rows) == SAMPLES
    assert _value(rows, 0) == jpegs[0]   # the parent reads first (a notebook does)
    got = sorted(int(i) for _, i in DataLoader(rows, batch_size=None, num_workers=2,
                                               timeout=60))
    assert got == list(range(SAMPLES))
    assert lk.worker_processes() == []


def test_lmdb_and_hdf5_rows_name_the_file_when_it_is_broken(written, tmp_path):
    import lmdb

    short = lk.damaged_copy(written["hdf5"], tmp_path / "short.h5", "truncate")
    with pytest.raises(lk.DataFormatError, match="short.h5: is truncated"):
        Hdf5Rows(short)
    gone = tmp_path / "gone.lmdb"
    shutil.copytree(written["lmdb"], gone)
    with lmdb.open(str(gone), map_size=1 << 26, lock=False) as env, env.begin(write=True) as txn:
        txn.delete(b"00000003")
    with pytest.raises(lk.DataFormatError, match="gone.lmdb: sample 3 is missing"):
        LmdbRows(gone)[3]
