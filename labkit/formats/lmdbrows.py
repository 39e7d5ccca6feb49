"""LMDB rows for ``labkit bench formats`` and the bake-off (chapters 12, 16): a writer, a reader.

Rows of any length (a list of ``bytes``) too; dtype and shape under ``__meta__``; a truncated
``data.mdb`` is refused before a read (a page past the end of the map is a SIGBUS).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataFormatError

_META = b"__meta__"
# py-lmdb opens the same files once per process, and keys them by inode (data.mdb, lock.mdb)
# for as long as an environment is open: the writers make no lock.mdb (lock=False, one writer
# of a new folder), so a reader kept here pins the one inode it names and no deleted file's
# inode, reused by a new folder, is refused as "already open"
_ENVS: dict[tuple[int, str], object] = {}


def _key(i: int) -> bytes:
    return f"{i:08d}".encode()


def write_lmdb(dest, rows) -> float:
    """Write ``rows[i]`` under key ``f"{i:08d}"`` into a new LMDB folder; returns the seconds."""
    import lmdb

    if isinstance(rows, list):  # variable-length values: uint8 rows of any length
        meta, values, nbytes = {"dtype": "|u1", "shape": [-1]}, rows, sum(map(len, rows))
    else:
        rows = np.asarray(rows)
        meta, nbytes = {"dtype": rows.dtype.str, "shape": list(rows.shape[1:])}, rows.nbytes
        values = (np.ascontiguousarray(r).tobytes() for r in rows)
    t0 = time.perf_counter()
    with lmdb.open(str(dest), map_size=2 * nbytes + (64 << 20), map_async=True,
                   lock=False) as env:
        with env.begin(write=True) as txn:
            for i, value in enumerate(values):
                txn.put(_key(i), value, append=True)
            txn.put(_META, json.dumps({**meta, "samples": len(rows)}).encode())
        env.sync()
    return time.perf_counter() - t0


def _env(path: Path):  # this process's environment; one inherited through fork() is closed
    import lmdb

    key = (os.getpid(), str(path.resolve()))
    if key not in _ENVS:
        for k in [k for k in _ENVS if k[1] == key[1]]:
            _ENVS.pop(k).close()
        try:
            _ENVS[key] = lmdb.open(key[1], readonly=True, lock=False, readahead=False,
                                   max_spare_txns=0, subdir=path.is_dir())
        except lmdb.Error as e:
            raise DataFormatError(f"{path}: not a readable LMDB environment "
                                  f"({type(e).__name__}: {e})") from None
    return _ENVS[key]


class LmdbRows(Dataset):
    """Map-style rows from :func:`write_lmdb`: ``ds[i]`` is ``(row tensor, i)``, opened lazily."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            raise DataFormatError(f"{self.path}: not found")
        env = _env(self.path)
        data = self.path / "data.mdb" if self.path.is_dir() else self.path
        need = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        if data.stat().st_size < need:
            raise DataFormatError(f"{data}: {data.stat().st_size} bytes, but its meta page "
                                  f"uses {need}; the file is truncated")
        with env.begin() as txn:
            raw = txn.get(_META)
        if raw is None:
            raise DataFormatError(f"{self.path}: no __meta__ key; not written by write_lmdb")
        meta = json.loads(raw)
        self.dtype, self.shape = np.dtype(meta["dtype"]), tuple(meta["shape"])
        self.samples = int(meta["samples"])

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int):
        with _env(self.path).begin() as txn:  # ended within the read: no slot held at a fork
            raw = txn.get(_key(i))
            if raw is None:
                raise DataFormatError(f"{self.path}: sample {i} is missing: no key "
                                      f"{_key(i).decode()}")
            row = np.frombuffer(raw, dtype=self.dtype).reshape(self.shape).copy()
        return torch.from_numpy(row), i
