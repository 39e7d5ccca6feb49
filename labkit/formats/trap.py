"""The handle-opened-before-fork trap: datasets that open in ``__init__``, and a trial (chapter 12).

:class:`EagerLmdbRows` and :class:`EagerHdf5Rows` do what many tutorials do: open the
environment or file in ``__init__`` and read through that handle in ``__getitem__``
(chapter 12 types the same two in a cell; these are the tests' copies). Forked workers
inherit the handle; spawned workers need it pickled. :func:`trap_trial` reads every
sample through the chapter's own DataLoader (its workers, its start method) and reports what
actually happened: an error (its first line), wrong data (rows that differ from the
source), or every row right.
"""

from __future__ import annotations

import gc
import multiprocessing
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from .lmdbrows import sample_key


class EagerLmdbRows(Dataset):
    """The trap: ``lmdb.open`` in ``__init__``, used by every worker.

    ``lock=True`` is LMDB's default (the tutorials' code); ``lock=False`` changes only the
    reader table, so chapter 12 can measure the open-before-fork and the lock apart.
    """

    def __init__(self, path, *, lock: bool = True):
        import lmdb

        self.env = lmdb.open(str(path), readonly=True, lock=lock)
        with self.env.begin() as txn:
            self.samples = txn.stat()["entries"] - 1  # minus the __meta__ key

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int):
        with self.env.begin() as txn:
            row = np.frombuffer(txn.get(sample_key(i)), dtype=np.float32).copy()
        return torch.from_numpy(row), i


class EagerHdf5Rows(Dataset):
    """The trap: ``h5py.File`` in ``__init__``, one row read there, used by every worker."""

    def __init__(self, path, key: str = "rows"):
        import h5py

        self.file = h5py.File(path, "r")
        self.rows = self.file[key]
        self.samples = len(self.rows)
        self.rows[0]  # a first read in the parent: HDF5's caches now hold state

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int):
        return torch.from_numpy(self.rows[i]), i


@dataclass(frozen=True)
class TrapOutcome:
    """What one trial observed. ``outcome``: ``"ok"``, ``"wrong data"`` or ``"error"``."""

    dataset: str
    start_method: str
    num_workers: int
    outcome: str
    delivered: int
    wrong: int
    error: str = ""

    def line(self) -> str:
        what = {"ok": f"all {self.delivered} rows right",
                "wrong data": f"{self.wrong} of {self.delivered} rows wrong",
                "error": self.error}[self.outcome]
        return (f"{self.dataset:<16} {self.start_method:<6} {self.num_workers} workers: "
                f"{self.outcome:<10} {what}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    last = [ln for ln in text if ln.strip()]
    # torch wraps a worker's exception; its own last line names the real error
    return f"{type(e).__name__}: {last[-1].strip() if last else ''}"[:200]


def _start_method(loader) -> str:
    """The start method ``loader``'s workers get: its ``multiprocessing_context``, else the
    process's default; ``"main"`` without workers (everything runs in this process)."""
    if loader.num_workers == 0:
        return "main"
    ctx = loader.multiprocessing_context
    return ctx.get_start_method() if ctx is not None else multiprocessing.get_start_method()


def trap_trial(loader, reference: np.ndarray, *, name: str | None = None) -> TrapOutcome:
    """Read every sample through ``loader`` and compare each row with ``reference[id]``.

    ``loader`` is a DataLoader over a dataset of ``(row, id)`` samples, built by the caller
    with the workers and start method on trial (e.g. ``num_workers=2,
    multiprocessing_context="fork"``) and a ``timeout=``, so a worker stuck on an inherited
    lock fails the trial instead of hanging it. An error is the outcome, not raised.
    """
    name = name or type(loader.dataset).__name__
    method, workers = _start_method(loader), loader.num_workers
    delivered = wrong = 0
    it = None
    try:
        it = iter(loader)
        for x, ids in it:
            want = torch.from_numpy(np.asarray(reference[ids.numpy()]))
            wrong += int((x != want).any(dim=1).sum())
            delivered += len(ids)
    except Exception as e:  # the trap's outcome is the lesson: report it, do not raise
        outcome = TrapOutcome(name, method, workers, "error", delivered, wrong, _first_line(e))
    else:
        outcome = TrapOutcome(name, method, workers, "wrong data" if wrong else "ok",
                              delivered, wrong)
    finally:
        del it  # the iterator's last reference: torch stops its workers (after an error too)
        gc.collect()  # no half-dead iterator left (in a traceback) for a later fork to inherit
    return outcome
