"""Rows in an HDF5 dataset: contiguous or chunked, with or without compression (chapter 12).

A contiguous dataset is one block of bytes (a row is an offset, like a memory map); a chunked
one is stored in fixed-size blocks of rows, each compressed on its own, so reading one row
reads (and decompresses) its whole chunk. h5py's file handle must be opened in the process
that reads it (see :mod:`labkit.formats.lazy`).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import DataFormatError
from .lazy import RowFile

DATASET = "rows"


def write_hdf5(dest, rows, *, chunk_rows: int | None = None,
               compression: str | None = None) -> float:
    """Write ``rows`` as the dataset ``rows`` of a new HDF5 file; returns the seconds taken.

    ``rows``: an array, or a list of ``bytes`` of any lengths (chapter 16's encoded images),
    stored as variable-length uint8 rows. ``chunk_rows=None`` and no compression: contiguous.
    ``chunk_rows=k``: chunks of ``k`` rows. ``compression``: ``"gzip"`` or ``"lzf"``
    (chunked; 64 rows per chunk by default).
    """
    import h5py

    if isinstance(rows, list):  # variable-length values: one uint8 array per row
        data, dtype = np.empty(len(rows), dtype=object), h5py.vlen_dtype(np.uint8)
        for i, value in enumerate(rows):  # one by one: equal lengths must not make a 2-D array
            data[i] = np.frombuffer(value, dtype=np.uint8)
    else:
        data, dtype = np.asarray(rows), None
    if compression and chunk_rows is None:
        chunk_rows = 64
    chunks = (min(chunk_rows, len(data)), *data.shape[1:]) if chunk_rows else None
    t0 = time.perf_counter()
    with h5py.File(dest, "w") as f:
        f.create_dataset(DATASET, data=data, dtype=dtype, chunks=chunks, compression=compression)
    return time.perf_counter() - t0


def open_hdf5(path, key: str = DATASET, *, rdcc_nbytes: int | None = None):
    """Open ``path`` read-only and check it has dataset ``key``; errors name the file.

    ``rdcc_nbytes``: the size of HDF5's chunk cache, per open dataset (h5py's default is
    1 MiB). Chunks are cached decompressed; a chunk larger than the cache is never cached.
    """
    import h5py

    try:
        f = h5py.File(path, "r", **({"rdcc_nbytes": rdcc_nbytes} if rdcc_nbytes else {}))
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


class Hdf5Rows(RowFile):
    """Map-style rows of one HDF5 dataset: ``dataset[i]`` is ``(row tensor, i)``.

    The file is opened lazily in each process (first ``__getitem__``), and its dataset held
    open, so the chunk cache lives as long as the handle; the parent only reads the shape
    and closes it again. ``rdcc_nbytes``: the chunk cache (see
    :func:`open_hdf5`); None keeps h5py's default.
    """

    def __init__(self, path, key: str = DATASET, *, rdcc_nbytes: int | None = None):
        super().__init__(path)
        self.key, self.rdcc_nbytes = key, rdcc_nbytes
        with open_hdf5(self.path, key) as f:
            d = f[key]
            self.samples, self.layout = len(d), d.chunks and f"chunks {d.chunks}" or "contiguous"
            self.compression = d.compression

    def open(self):
        # the handle is the dataset, not the file: ``file[key][i]`` would open the dataset
        # again on every read (an H5Dopen each time) with an empty chunk cache each time
        return open_hdf5(self.path, self.key, rdcc_nbytes=self.rdcc_nbytes)[self.key]

    def row(self, i: int):
        try:
            row = self.handle[i]
        except (OSError, RuntimeError) as e:  # a chunk past the end, a bad filter stream
            raise DataFormatError(f"{self.path}: cannot read sample {i} of {self.key!r} "
                                  f"({e})") from None
        return torch.from_numpy(row)
