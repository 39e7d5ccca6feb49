"""A dataset that opens its file in the process that reads it, never before a fork (chapter 12).

A handle opened in ``__init__`` travels into every forked worker as a copy of the parent's
memory: an LMDB environment, an HDF5 file id, an open file position. LMDB's documentation
says such a handle must not be used across ``fork()``; HDF5 keeps caches and file state per
process. :class:`LazyFile` keeps only the path in its state and opens on the first read in
each process (it remembers the pid, so a handle inherited through a fork is never used),
and it pickles without the handle, so spawn and forkserver workers work too.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch.utils.data import Dataset

from ..errors import DataFormatError

#: Handles inherited through a fork are parked here: never read through, and not closed by
#: this base class (what is safe to do with a copy is each library's business; LmdbRows
#: closes its lock-free copy so that py-lmdb lets the worker open the files again).
_INHERITED: list = []


class LazyFile(Dataset):
    """Base for the chapter's readers: ``self.handle`` is opened per process, on first use.

    Subclasses implement :meth:`open` (return the handle) and may override :meth:`close`.
    ``__init__`` of a subclass may validate the file with a short-lived handle of its own,
    closed before it returns.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            raise DataFormatError(f"{self.path}: not found")
        self._handle = None
        self._pid = None

    def open(self):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def handle(self):
        pid = os.getpid()
        if self._handle is not None and self._pid != pid:  # inherited through fork()
            _INHERITED.append(self._handle)
            self._handle = None
        if self._handle is None:
            self._handle = self.open()
            self._pid = pid
        return self._handle

    def __getstate__(self):  # spawn / forkserver workers get the path, not the handle
        return {**self.__dict__, "_handle": None, "_pid": None}


class RowFile(LazyFile):
    """A :class:`LazyFile` of ``samples`` rows read one at a time: ``ds[i]`` is
    ``(row(i), i)``, and an index outside ``0..samples-1`` raises IndexError.

    Subclasses set ``self.samples`` in ``__init__`` and implement :meth:`row` (the chapter's
    readers: LMDB, HDF5, a tensor file, safetensors, Lance, ArrayRecord).
    """

    samples: int

    def row(self, i: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int):
        if not 0 <= i < self.samples:
            raise IndexError(i)
        return self.row(i), i
