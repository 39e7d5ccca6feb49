"""``labkit bench formats``: LMDB and HDF5 random reads against a memmap of the same rows (12)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

from labkit.data.datasets import MemmapRows, open_array
from labkit.data.fixtures import fixture
from labkit.formats.hdf5rows import Hdf5Rows, write_hdf5
from labkit.formats.lmdbrows import LmdbRows, write_lmdb
from labkit.instruments.meter import measure
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit.records.machine import versions
from labkit.scale import resolve_scale

from .registry import benchmark

#: Rows read per scale (the first rows of the ``array`` fixture).
ROWS = {"ci": 2048, "workshop": 50_000, "full": 500_000}


def _best(ds, num_workers: int, batch_size: int, trials: int) -> float:
    loader = DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                        persistent_workers=num_workers > 0,
                        timeout=WORKER_TIMEOUT_S if num_workers > 0 else 0)
    try:
        m = measure(loader, repeats=trials, warmup=1)
    finally:
        del loader  # persistent workers live as long as their DataLoader: this stops them
    return max(p.samples_per_s for p in m.passes)


@benchmark("formats", goal="LMDB random reads with N workers >= 0.5x memmap random reads "
                           "of the same rows; HDF5 chunked vs contiguous printed")
def formats_bench(scale: str | None = None, num_workers: int = 2, batch_size: int = 64,
                  trials: int = 3, rows: int | None = None) -> dict:
    """Random-order reads of the same rows: memmap and LMDB with ``num_workers`` workers, HDF5
    in the main process; each side's fastest pass (on a shared machine noise only slows one)."""
    scale = resolve_scale(scale)
    fx = fixture("array", scale)
    n = min(rows or ROWS[scale], fx.samples)
    data = np.array(open_array(fx.file("array.npy"))[:n])
    tmp = Path(tempfile.mkdtemp(prefix="labkit-bench-formats-"))
    try:
        np.save(tmp / "rows.npy", data)
        write_lmdb(tmp / "rows.lmdb", data)
        write_hdf5(tmp / "contiguous.h5", data)
        write_hdf5(tmp / "chunked.h5", data, chunk_rows=64)
        write_hdf5(tmp / "gzip.h5", data, chunk_rows=64, compression="gzip")
        memmap = _best(MemmapRows(tmp / "rows.npy"), num_workers, batch_size, trials)
        lmdb_rate = _best(LmdbRows(tmp / "rows.lmdb"), num_workers, batch_size, trials)
        h5 = {name: _best(Hdf5Rows(tmp / f"{name}.h5"), 0, batch_size, trials)
              for name in ("contiguous", "chunked", "gzip")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = lmdb_rate / memmap
    return {"scale": scale, "rows": n, "num_workers": num_workers, "batch_size": batch_size,
            "memmap_random_samples_per_s": memmap, "lmdb_random_samples_per_s": lmdb_rate,
            "lmdb_vs_memmap": ratio, "hdf5_contiguous_samples_per_s": h5["contiguous"],
            "hdf5_chunked_samples_per_s": h5["chunked"],
            "hdf5_chunked_gzip_samples_per_s": h5["gzip"],
            "hdf5_chunked_vs_contiguous": h5["chunked"] / h5["contiguous"],
            "versions": versions(["lmdb", "h5py", "numpy", "torch"]),
            "goal_met": bool(ratio >= 0.5)}
