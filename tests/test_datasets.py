"""labkit.data.datasets: the teaching datasets, contract-tested on the ci fixtures (chapters 01-02).

Contracts reused for every dataset: lazy output equals an eager reference, every id exactly
once through a DataLoader with and without workers; bad files fail naming the file.
"""

from __future__ import annotations

import gc
import pickle
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Subset

from labkit.data import writers as _writers
from labkit.data.datasets import MemmapBatches, MemmapRows, NpyFilesDataset, open_array
from labkit.data.fixtures import fixture
from labkit.errors import DataFormatError


@pytest.fixture(scope="module")
def array_fx(ci_fixture):
    return ci_fixture("array")


@pytest.fixture(scope="module")
def reference(array_fx):
    """The eager reference: the whole array read into memory."""
    return np.load(array_fx.file("array.npy"))


@pytest.fixture(scope="module")
def samples_fx(ci_fixture):
    return ci_fixture("sample_files")


@pytest.fixture(scope="module")
def samples_reference(samples_fx, tmp_path_factory):
    """Eager reference for sample_files: the same seeded row stream written as one array."""
    dest = tmp_path_factory.mktemp("samples-ref")
    spec = dict(samples_fx.spec)
    _writers.WRITERS["array"].write(spec, dest, lambda n: None)
    return np.load(dest / "array.npy")


def _drain(loader) -> tuple[list[int], dict[int, np.ndarray]]:
    """Every id a loader delivers (in order) and the first column of its row."""
    ids, first_col = [], {}
    it = iter(loader)
    try:
        for rows, idx in it:
            for r, i in zip(rows.numpy(), idx.tolist(), strict=True):
                ids.append(i)
                first_col[i] = r[0]
    finally:
        del it
    return ids, first_col


def _assert_exactly_once(ids: list[int], expected) -> None:
    counts = Counter(ids)
    dupes = {i: c for i, c in counts.items() if c > 1}
    assert not dupes, f"delivered more than once: {dict(list(dupes.items())[:5])}"
    assert sorted(counts) == sorted(expected)


# -- lazy equals eager ----------------------------------------------------------------------


def test_memmap_rows_equals_eager(array_fx, reference):
    ds = MemmapRows(array_fx)
    assert len(ds) == len(reference) == array_fx.samples
    for i in (0, 1, 4095, len(ds) - 1):
        row, idx = ds[i]
        assert idx == i and row.dtype == torch.float32
        np.testing.assert_array_equal(row.numpy(), reference[i])
        assert row.numpy().flags.writeable  # copied out of the read-only map
    every = torch.stack([ds[i][0] for i in range(len(ds))]).numpy()
    np.testing.assert_array_equal(every, reference)


def test_memmap_rows_on_the_raw_file(array_fx, reference):
    ds = MemmapRows(array_fx.file("array.raw"), dtype="float32", shape=reference.shape)
    assert len(ds) == len(reference)
    np.testing.assert_array_equal(ds[123][0].numpy(), reference[123])
    np.testing.assert_array_equal(np.asarray(ds.array), reference)


@pytest.mark.parametrize("batch_size, drop_last, expected_len", [
    (1000, False, 9), (1000, True, 8), (1024, False, 8), (8192, False, 1), (10000, True, 0),
])
def test_memmap_batches_equals_eager(array_fx, reference, batch_size, drop_last, expected_len):
    ds = MemmapBatches(array_fx, batch_size=batch_size, drop_last=drop_last)
    assert len(ds) == expected_len
    if not expected_len:
        return
    blocks, ids = zip(*(ds[b] for b in range(len(ds))), strict=True)
    assert all(len(b) == batch_size for b in blocks[:-1]) and len(blocks[-1]) <= batch_size
    rows, ids = torch.cat(blocks).numpy(), torch.cat(ids).numpy()
    np.testing.assert_array_equal(rows, reference[: len(rows)])
    np.testing.assert_array_equal(ids, np.arange(len(rows)))
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-1]


def test_npy_files_equals_eager(samples_fx, samples_reference):
    ds = NpyFilesDataset(samples_fx)
    assert len(ds) == len(samples_reference) == samples_fx.samples
    rows = torch.stack([ds[i][0] for i in range(len(ds))]).numpy()
    np.testing.assert_array_equal(rows, samples_reference)
    assert [ds[i][1] for i in (0, 7)] == [0, 7]
    folder = NpyFilesDataset(samples_fx.path / "samples")  # a plain folder works too
    assert len(folder) == len(ds) and folder.files == ds.files


# -- exactly once through a DataLoader ------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_memmap_rows_exactly_once(array_fx, reference, num_workers, shuffle):
    loader = DataLoader(MemmapRows(array_fx), batch_size=256, num_workers=num_workers,
                         shuffle=shuffle, timeout=30 if num_workers else 0)
    ids, first = _drain(loader)
    _assert_exactly_once(ids, range(len(reference)))
    assert all(first[i] == i for i in (0, 5, 8191))
    assert (ids == sorted(ids)) == (not shuffle)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_memmap_batches_exactly_once(array_fx, reference, num_workers):
    loader = DataLoader(MemmapBatches(array_fx, batch_size=500), batch_size=None,
                         num_workers=num_workers, timeout=30 if num_workers else 0)
    ids, first = _drain(loader)
    _assert_exactly_once(ids, range(len(reference)))
    assert ids == list(range(len(reference)))
    assert all(first[i] == i for i in ids[::97])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_npy_files_exactly_once(samples_fx, num_workers):
    loader = DataLoader(NpyFilesDataset(samples_fx), batch_size=128, num_workers=num_workers,
                         shuffle=True, timeout=30 if num_workers else 0)
    ids, first = _drain(loader)
    _assert_exactly_once(ids, range(samples_fx.samples))
    assert all(first[i] == i for i in ids)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_memmap_rows_in_spawned_workers(array_fx, reference, context):
    # Only the path travels to the workers; each maps the file itself.
    picked = list(range(3, len(reference), 61))
    loader = DataLoader(Subset(MemmapRows(array_fx), picked), batch_size=32, num_workers=2,
                        multiprocessing_context=context, timeout=60)
    ids, first = _drain(loader)
    _assert_exactly_once(ids, picked)
    assert all(first[i] == i for i in ids)


def test_pickle_carries_the_path_not_the_array(array_fx, reference):
    ds = MemmapRows(array_fx)
    ds[0]  # opens the map in this process
    assert ds._arr is not None
    blob = pickle.dumps(ds)
    assert len(blob) < 10_000 < reference.nbytes
    clone = pickle.loads(blob)
    assert clone._arr is None and clone.path == ds.path
    np.testing.assert_array_equal(clone[42][0].numpy(), reference[42])
    batches = MemmapBatches(array_fx, batch_size=64)
    batches[0]
    assert len(pickle.dumps(batches)) < 10_000


# -- bad input ------------------------------------------------------------------------------


@pytest.fixture
def array_copy(array_fx, tmp_path) -> tuple[Path, Path]:
    """Writable copies of array.npy and array.raw."""
    npy, raw = tmp_path / "array.npy", tmp_path / "array.raw"
    shutil.copyfile(array_fx.file("array.npy"), npy)
    shutil.copyfile(array_fx.file("array.raw"), raw)
    return npy, raw


def _truncate(path: Path, nbytes: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(nbytes)


def test_truncated_npy_names_file_and_sizes(array_copy):
    npy, _ = array_copy
    full = npy.stat().st_size
    _truncate(npy, full - 1000)
    for opener in (open_array, MemmapRows, lambda p: MemmapBatches(p, batch_size=8)):
        with pytest.raises(DataFormatError) as info:
            opener(npy)
        msg = str(info.value)
        assert str(npy) in msg and str(full - 1000) in msg and str(full) in msg
        assert "truncated" in msg


@pytest.mark.parametrize("dtype, shape", [
    ("float32", (8192, 255)),  # wrong shape
    ("float64", (8192, 256)),  # wrong dtype
    ("float32", (8193, 256)),  # one row too many: a truncated file looks like this
])
def test_raw_file_with_wrong_dtype_or_shape(array_copy, dtype, shape):
    _, raw = array_copy
    actual = raw.stat().st_size
    expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
    for opener in (open_array, MemmapRows):
        with pytest.raises(DataFormatError) as info:
            opener(raw, dtype=dtype, shape=shape)
        msg = str(info.value)
        assert str(raw) in msg and f"{actual} bytes" in msg and f"expected {expected}" in msg
        assert dtype in msg


def test_raw_file_needs_dtype_and_shape(array_copy):
    _, raw = array_copy
    with pytest.raises(DataFormatError, match="needs dtype= and shape="):
        open_array(raw)
    with pytest.raises(DataFormatError, match="needs dtype= and shape="):
        open_array(raw, dtype="float32")


def test_raw_file_is_never_grown(array_copy):
    _, raw = array_copy
    _truncate(raw, 1000)
    with pytest.raises(DataFormatError):
        open_array(raw, "float32", (8192, 256))
    assert raw.stat().st_size == 1000


def test_missing_file_is_named(tmp_path):
    gone = tmp_path / "nope" / "array.npy"
    for opener in (open_array, MemmapRows):
        with pytest.raises(DataFormatError, match="file not found") as info:
            opener(gone)
        assert str(gone) in str(info.value)
    with pytest.raises(DataFormatError, match="no .npy files") as info:
        NpyFilesDataset(tmp_path)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("content", [b"", b"not an npy file at all", b"\x93NUMPY\x03\x00xx"])
def test_not_an_npy_file(tmp_path, content):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(content)
    with pytest.raises(DataFormatError, match="not a valid .npy") as info:
        open_array(bad)
    assert str(bad) in str(info.value)


@pytest.fixture
def samples_copy(samples_fx, tmp_path) -> Path:
    """Writable copies of the first 256 sample files."""
    folder = tmp_path / "samples"
    folder.mkdir()
    for src in samples_fx.file_list(".npy")[:256]:
        shutil.copyfile(src, folder / src.name)
    return folder


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_sample_file_is_named_when_indexed(samples_copy, damage):
    bad = samples_copy / "0000100.npy"
    if damage == "truncate":
        _truncate(bad, 200)
    else:
        bad.write_bytes(b"\x00" * bad.stat().st_size)
    ds = NpyFilesDataset(samples_copy)
    assert ds[99][1] == 99 and ds[101][1] == 101  # its neighbours are fine
    with pytest.raises(DataFormatError, match="sample 100") as info:
        ds[100]
    assert str(bad) in str(info.value)


def test_corrupt_sample_file_surfaces_from_a_worker(samples_copy, live_workers):
    bad = samples_copy / "0000150.npy"
    _truncate(bad, 150)
    loader = DataLoader(NpyFilesDataset(samples_copy), batch_size=64, num_workers=2,
                         timeout=30)
    it = iter(loader)
    try:
        with pytest.raises(DataFormatError) as info:
            for _ in it:
                pass
    finally:
        del it
    msg = str(info.value)
    assert "DataLoader worker" in msg and str(bad) in msg
    # the error's traceback holds torch's iterator (its frames' ``self``): the workers stop
    # once it is dropped, as in a notebook once the next error replaces it
    del info
    gc.collect()
    assert live_workers() == []


@pytest.mark.parametrize("wrong", [np.zeros(256, np.float64), np.zeros(255, np.float32)])
def test_sample_file_with_wrong_dtype_or_shape_is_named(own_data, wrong):
    fx = fixture("sample_files", "ci", progress=False)
    bad = fx.file("samples/0000010.npy")
    np.save(bad, wrong)
    with pytest.raises(DataFormatError) as info:
        NpyFilesDataset(fx)[10]
    assert str(bad) in str(info.value)
