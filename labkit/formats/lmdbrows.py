"""Rows in an LMDB key-value store: one key per sample, read through a memory map (chapter 12).

LMDB is one B+tree in one memory-mapped file (``data.mdb``) plus a lock file. A read is a
lookup in the map: no system call per sample once the pages are cached. The environment
must be opened in the process that reads (see :mod:`labkit.formats.lazy`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from ..errors import DataFormatError
from .lazy import RowFile

_META = b"__meta__"


def sample_key(i: int) -> bytes:
    """The key of sample ``i``: zero-padded, so key order is sample order."""
    return f"{i:08d}".encode()


def write_lmdb(dest, rows) -> float:
    """Write ``rows[i]`` under :func:`sample_key` ``(i)`` into a new LMDB folder ``dest``.

    ``rows``: an array, or a list of ``bytes`` of any lengths (chapter 16's encoded images),
    read back as uint8 rows. The dtype and row shape go under a ``__meta__`` key. Returns the
    seconds it took.
    """
    import lmdb

    dest = Path(dest)
    if isinstance(rows, list):  # variable-length values: uint8 rows of any length
        meta, values, nbytes = {"dtype": "|u1", "shape": [-1]}, rows, sum(map(len, rows))
    else:
        rows = np.asarray(rows)
        meta, nbytes = {"dtype": rows.dtype.str, "shape": list(rows.shape[1:])}, rows.nbytes
        values = (np.ascontiguousarray(r).tobytes() for r in rows)
    t0 = time.perf_counter()
    # map_size is the most the file may grow to (address space, not disk): 2x + 64 MiB slack
    env = lmdb.open(str(dest), map_size=2 * nbytes + (64 << 20), subdir=True,
                    meminit=False, map_async=True)
    try:
        with env.begin(write=True) as txn:
            for i, value in enumerate(values):  # append: keys come in order, pages fill up
                txn.put(sample_key(i), value, append=True)
            meta["samples"] = len(rows)
            txn.put(_META, json.dumps(meta).encode())  # "_" sorts after the digits
        env.sync()
    finally:
        env.close()
    return time.perf_counter() - t0


#: One environment per file per process: py-lmdb refuses a second open of the same files in
#: one process ("already open in this process"), and LMDB forbids it (its fcntl locks belong
#: to the process). pid -> path -> environment.
_ENVS: dict[tuple[int, str], object] = {}


def open_env(path: Path, *, lock: bool = False):
    """This process's read-only environment for ``path`` (opened once, then reused).

    One inherited through ``fork()`` is closed first, in the child: py-lmdb refuses to open
    the files again in this process until it is. With ``lock=True`` that close is safe only
    because the parent holds no read transaction at the fork: closing aborts the
    environment's transactions, and aborting one frees its reader slot in ``lock.mdb``,
    which the parent shares. A transaction py-lmdb cached (``max_spare_txns=1``) then fails
    the parent's next read with ``MDB_BAD_RSLOT``; one held open keeps reading with no slot.
    So no transaction is cached here (``max_spare_txns=0``, explicit: py-lmdb's defaults
    have differed between releases), and :class:`LmdbRows` ends each read's transaction
    before it returns. ``tests/test_formats.py`` checks both.

    ``lock=False`` (the default here): no reader table in ``lock.mdb``, the usual choice for
    read-only data no process writes while it is read. ``lock=True`` is LMDB's default;
    chapter 12 measures the two apart. The first open of a file in a process fixes it.
    """
    import lmdb

    key, pid = str(Path(path).resolve()), os.getpid()
    env = _ENVS.get((pid, key))
    if env is not None:
        if env.flags()["lock"] != lock:
            raise ValueError(f"{path}: already open in this process with lock="
                             f"{not lock}; one environment per file per process")
        return env
    for (other, k) in [k for k in _ENVS if k[1] == key]:  # the parent's copy, inherited
        _ENVS.pop((other, k)).close()
    try:
        # readahead=False: random reads should not pull in neighbouring pages;
        # max_spare_txns=0: a cached transaction would hold a reader slot across a fork
        env = lmdb.open(key, readonly=True, lock=lock, readahead=False, max_spare_txns=0,
                        subdir=Path(path).is_dir())
    except lmdb.Error as e:
        raise DataFormatError(f"{path}: not a readable LMDB environment "
                              f"({type(e).__name__}: {e})") from None
    _ENVS[(pid, key)] = env
    return env


def check_lmdb(path, *, lock: bool = False) -> dict:
    """Check an LMDB environment; returns its ``__meta__``.

    A ``data.mdb`` shorter than the pages its meta page says are in use is truncated: reading
    a page past the end of a memory-mapped file kills the process with SIGBUS, so it is
    refused here, naming the file.
    """
    path = Path(path)
    env = open_env(path, lock=lock)
    info, stat = env.info(), env.stat()
    data = path / "data.mdb" if path.is_dir() else path
    need = (info["last_pgno"] + 1) * stat["psize"]
    have = data.stat().st_size
    if have < need:
        raise DataFormatError(f"{data}: {have} bytes, but its meta page uses {need} "
                              "(pages up to last_pgno); the file is truncated")
    with env.begin() as txn:
        raw = txn.get(_META)
    if raw is None:
        raise DataFormatError(f"{path}: no {_META.decode()} key; not written by "
                              "lk.formats.write_lmdb")
    return json.loads(raw)


class LmdbRows(RowFile):
    """Map-style rows from :func:`write_lmdb`: ``dataset[i]`` is ``(row tensor, i)``.

    The environment is opened lazily in each process (first ``__getitem__``), once per file
    per process; one inherited through ``fork()`` is closed and reopened in the worker.
    ``lock``: LMDB's reader table (see :func:`open_env`); off by default.
    """

    def __init__(self, path, *, lock: bool = False):
        super().__init__(path)
        self.lock = lock
        meta = check_lmdb(self.path, lock=lock)
        self.dtype, self.shape = np.dtype(meta["dtype"]), tuple(meta["shape"])
        self.samples = int(meta["samples"])

    def open(self):
        return open_env(self.path, lock=self.lock)

    def row(self, i: int):
        with self.handle.begin(buffers=True) as txn:
            raw = txn.get(sample_key(i))
            if raw is None:
                raise DataFormatError(f"{self.path}: sample {i} is missing: no key "
                                      f"{sample_key(i).decode()}")
            row = np.frombuffer(raw, dtype=self.dtype).reshape(self.shape).copy()
        return torch.from_numpy(row)
