"""Datasets that break their DataLoader worker on purpose (the fault matrix, test_loaders).

In a module of their own, not in a test file, so that spawn and forkserver workers can
import them by name (a class defined in a test function, like one defined in a notebook
cell, cannot be pickled into such a worker).
"""

from __future__ import annotations

import os
import signal
import time

from torch.utils.data import Dataset

#: How a worker breaks at the bad index: the process ends (an exit code or a signal) or hangs.
BREAKS = ("exit", "SIGSEGV", "SIGKILL", "hang")


class BreaksAt(Dataset):
    """``dataset[i] == i``, except that reading index ``bad`` breaks the worker.

    ``how``: ``"exit"`` (``os._exit(3)``: a library ending the process), ``"SIGSEGV"`` (a
    crash in native code), ``"SIGKILL"`` (the out-of-memory killer), ``"hang"`` (sleeps for
    ``hang_s``: a read that never returns). In the main process (``num_workers=0``) it does
    nothing of the sort, so a test cannot take down pytest itself by mistake.
    """

    def __init__(self, n: int = 64, bad: int = 10, how: str = "exit", hang_s: float = 3600):
        if how not in BREAKS:
            raise ValueError(f"how={how!r}: one of {', '.join(BREAKS)}")
        self.n, self.bad, self.how, self.hang_s = n, bad, how, hang_s
        self.parent = os.getpid()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad and os.getpid() != self.parent:
            if self.how == "exit":
                os._exit(3)
            elif self.how == "hang":
                time.sleep(self.hang_s)
            else:
                os.kill(os.getpid(), getattr(signal, self.how))
                time.sleep(10)  # the signal arrives asynchronously
        return i
