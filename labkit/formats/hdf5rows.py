"""HDF5 rows for ``labkit bench formats`` and the bake-off (chapters 12, 16): a writer, a reader.

Rows of any length (a list of ``bytes``) are variable-length uint8; each reading process
opens the dataset once and holds it (its chunk cache with it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataFormatError


def write_hdf5(dest, rows, *, chunk_rows: int | None = None,
               compression: str | None = None) -> float:
    """Write ``rows`` as the dataset ``rows`` (contiguous unless ``chunk_rows`` or
    ``compression``, 64 rows a chunk by default then); returns the seconds taken."""
    import h5py

    if isinstance(rows, list):  # one by one: equal lengths must not make a 2-D array
        data, dtype = np.empty(len(rows), dtype=object), h5py.vlen_dtype(np.uint8)
        for i, value in enumerate(rows):
            data[i] = np.frombuffer(value, dtype=np.uint8)
    else:
        data, dtype = np.asarray(rows), None
    chunk_rows = chunk_rows or (64 if compression else None)
    chunks = (min(chunk_rows, len(data)), *data.shape[1:]) if chunk_rows else None
    t0 = time.perf_counter()
    with h5py.File(dest, "w") as f:
        f.create_dataset("rows", data=data, dtype=dtype, chunks=chunks, compression=compression)
    return time.perf_counter() - t0


def _open(path: Path, key: str):
    import h5py

    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise DataFormatError(f"{path}: not found") from None
    except OSError as e:
        what = "is truncated" if "truncated" in str(e) else "is not a readable HDF5 file"
        raise DataFormatError(f"{path}: {what} ({e})") from None
    if key not in f:
        names = sorted(f)
        f.close()
        raise DataFormatError(f"{path}: no dataset {key!r} (datasets: {names})")
    return f


class Hdf5Rows(Dataset):
    """Map-style rows of one HDF5 dataset: ``ds[i]`` is ``(row tensor, i)``, opened lazily."""

    def __init__(self, path, key: str = "rows"):
        self.path, self.key, self._handle, self._pid = Path(path), key, None, None
        with _open(self.path, key) as f:
            self.samples = len(f[key])

    def __getstate__(self):  # spawn / forkserver workers get the path, not the handle
        return {**self.__dict__, "_handle": None, "_pid": None}

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int):
        if self._pid != os.getpid():  # first read here, or a handle inherited through fork()
            self._handle, self._pid = _open(self.path, self.key)[self.key], os.getpid()
        try:
            row = self._handle[i]
        except (OSError, RuntimeError) as e:  # a chunk past the end, a bad filter stream
            raise DataFormatError(f"{self.path}: cannot read sample {i} ({e})") from None
        return torch.from_numpy(row), i
