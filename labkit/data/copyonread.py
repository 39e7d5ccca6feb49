"""Three in-memory datasets of the same rows, for the copy-on-read experiment (chapter 03).

The same ``array`` rows held three ways in the parent process, before the DataLoader
forks its workers: as Python objects (a list of dicts of float lists), as one numpy array,
and as one Arrow table. Reading a Python object writes its reference count, so those pages
are copied into each worker; numpy and Arrow rows are views into one big buffer.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from .datasets import _source, open_array


def _rows(fixture_or_path, rows: int | None) -> np.ndarray:
    arr = open_array(_source(fixture_or_path, ".npy")[0])
    return np.array(arr[:rows] if rows else arr)  # into memory: these are in-memory datasets


class PyObjectRows(Dataset):
    """Rows as a list of ``{"id": int, "x": [float, ...]}``: every value a Python object."""

    def __init__(self, fixture_or_path, rows: int | None = None):
        arr = _rows(fixture_or_path, rows)
        self.records = [{"id": i, "x": row} for i, row in enumerate(arr.tolist())]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int):
        rec = self.records[i]
        return torch.tensor(rec["x"], dtype=torch.float32), rec["id"]


class NumpyRows(Dataset):
    """Rows as one numpy array in memory: one object, one buffer."""

    def __init__(self, fixture_or_path, rows: int | None = None):
        self.array = _rows(fixture_or_path, rows)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: int):
        return torch.from_numpy(self.array[i].copy()), i


class ArrowRows(Dataset):
    """Rows as an Arrow table (a fixed-size-list column): a few buffers, no per-row objects."""

    def __init__(self, fixture_or_path, rows: int | None = None):
        import pyarrow as pa

        arr = _rows(fixture_or_path, rows)
        flat = pa.array(arr.reshape(-1))
        self.table = pa.table({"id": pa.array(np.arange(len(arr))),
                               "x": pa.FixedSizeListArray.from_arrays(flat, arr.shape[1])})
        self.features = arr.shape[1]

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int):
        col = self.table.column("x").chunk(0)
        # values of row i, zero-copy from the Arrow buffer, then one copy for torch
        values = col.values.slice(i * self.features, self.features).to_numpy(zero_copy_only=True)
        return torch.from_numpy(values.copy()), i
