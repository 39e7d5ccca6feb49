"""Teaching datasets, importable so spawn/forkserver workers can load them (ch. 00-04, 08, 12, 14).

Every sample is ``(features, id)``: the id lets audits count which samples a loader delivered.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataFormatError
from .fixtures import source_files

_NPY_MAGIC = b"\x93NUMPY"


def open_array(path: str | os.PathLike, dtype=None, shape=None) -> np.ndarray:
    """Open a ``.npy`` (header gives dtype/shape) or a raw file (pass them) read-only, lazily;
    a file without exactly the bytes they need raises :class:`~labkit.DataFormatError`."""
    path = Path(path)
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise DataFormatError(f"{path}: file not found") from None
    offset, order, npy = 0, "C", path.suffix == ".npy"
    if npy:
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}[version]
                shape, fortran, dtype = read(f)
                offset, order = f.tell(), "F" if fortran else "C"
        except (ValueError, KeyError) as e:
            raise DataFormatError(f"{path}: not a valid .npy file ({e})") from None
    elif dtype is None or shape is None:
        raise DataFormatError(f"{path}: a raw file needs dtype= and shape=")
    dtype, shape = np.dtype(dtype), tuple(int(s) for s in shape)
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if actual != expected:
        raise DataFormatError(f"{path}: {actual} bytes, " + (
            f"but its header says {dtype} {shape} ({expected} bytes); the file is truncated "
            "or was overwritten" if npy else f"expected {expected} for {dtype} {shape}; wrong "
            "dtype/shape, or a truncated file"))
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, offset=offset, order=order)


class NpyFilesDataset(Dataset):
    """One ``.npy`` file per sample: the naive layout (one open+read+parse per sample)."""

    def __init__(self, fixture_or_folder):
        meta = getattr(fixture_or_folder, "meta", {})
        self.files = source_files(fixture_or_folder, ".npy")
        dtype, shape = meta.get("dtype"), meta.get("sample_shape")
        self.dtype = np.dtype(dtype) if dtype else None
        self.shape = tuple(shape) if shape else None

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        path = self.files[i]
        try:
            with open(path, "rb") as f:
                magic = f.read(len(_NPY_MAGIC))
                f.seek(0)
                row = np.load(f) if magic == _NPY_MAGIC else None
        except (ValueError, OSError, EOFError) as e:
            raise DataFormatError(f"{path}: cannot read sample {i} ({e})") from None
        if row is None:  # numpy would try it as a pickle and say "contains pickled data"
            raise DataFormatError(f"{path}: sample {i} is not a .npy file (starts with "
                                  f"{magic!r}, expected {_NPY_MAGIC!r})")
        if (self.dtype is not None and row.dtype != self.dtype) or (
                self.shape is not None and row.shape != self.shape):
            raise DataFormatError(
                f"{path}: sample {i} is {row.dtype} {row.shape}, expected "
                f"{self.dtype} {self.shape}")
        return torch.from_numpy(row), i


class _Lazy(Dataset):
    """Opens its array on first use in each process: a pickled memmap would copy the array."""

    def __init__(self, fixture_or_path, dtype=None, shape=None):
        self.path = source_files(fixture_or_path, ".npy")[0]
        meta = getattr(fixture_or_path, "meta", {})
        self.dtype = dtype or meta.get("dtype")
        self.shape = shape or meta.get("shape")
        self.rows = len(open_array(self.path, self.dtype, self.shape))  # checked in the parent
        self._arr = None

    @property
    def array(self) -> np.ndarray:
        if self._arr is None:
            self._arr = open_array(self.path, self.dtype, self.shape)
        return self._arr

    def __getstate__(self):
        return {**self.__dict__, "_arr": None}


class MemmapRows(_Lazy):
    """Per-sample reads from a memory-mapped array: ``dataset[i]`` is row ``i``."""

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, i: int):
        # np.array copies the row out of the read-only map (torch wants writable memory)
        return torch.from_numpy(np.array(self.array[i])), i


class MemmapBatches(_Lazy):
    """Batch slicing, one read a batch: ``dataset[b]`` is rows ``b*batch_size`` on (use
    ``DataLoader(..., batch_size=None)``)."""

    def __init__(self, fixture_or_path, batch_size: int, dtype=None, shape=None,
                 drop_last: bool = False):
        super().__init__(fixture_or_path, dtype, shape)
        self.batch_size, self.drop_last = int(batch_size), drop_last

    def __len__(self) -> int:
        return self.rows // self.batch_size if self.drop_last else -(-self.rows // self.batch_size)

    def __getitem__(self, b: int):
        if not 0 <= b < len(self):
            raise IndexError(b)
        lo = b * self.batch_size
        hi = min(lo + self.batch_size, self.rows)
        block = torch.from_numpy(np.array(self.array[lo:hi]))
        return block, torch.arange(lo, hi)
