"""Datasets that break their DataLoader worker on purpose (the fault matrix, test_loaders).

In a module of their own, not in a test file, so that spawn and forkserver workers can
import them by name (a class defined in a test function, like one defined in a notebook
cell, cannot be pickled into such a worker). :func:`break_a_loader` runs one such loader in
a process of its own: a test that kills a worker never does it in pytest's process, where
torch's SIGCHLD handler would raise its error wherever the main thread happens to be.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from torch.utils.data import Dataset

#: How a worker breaks at the bad index: the process ends (an exit code or a signal) or hangs.
BREAKS = ("exit", "SIGSEGV", "SIGKILL", "hang")

TESTS = Path(__file__).resolve().parent


class BreaksAt(Dataset):
    """``dataset[i] == i``, except that reading index ``bad`` breaks the worker.

    ``how``: ``"exit"`` (``os._exit(3)``: a library ending the process), ``"SIGSEGV"`` (a
    crash in native code), ``"SIGKILL"`` (the out-of-memory killer), ``"hang"`` (sleeps for
    ``hang_s``: a read that never returns). In the main process (``num_workers=0``) it does
    nothing of the sort, so a test cannot take down pytest itself by mistake. ``stamp``: a
    file the worker writes ``time.time()`` to just before it breaks.
    """

    def __init__(self, n: int = 64, bad: int = 10, how: str = "exit", hang_s: float = 3600,
                 stamp: str | None = None):
        if how not in BREAKS:
            raise ValueError(f"how={how!r}: one of {', '.join(BREAKS)}")
        self.n, self.bad, self.how, self.hang_s, self.stamp = n, bad, how, hang_s, stamp
        self.parent = os.getpid()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad and os.getpid() != self.parent:
            if self.stamp:
                Path(self.stamp).write_text(repr(time.time()))
            if self.how == "exit":
                os._exit(3)
            elif self.how == "hang":
                time.sleep(self.hang_s)
            else:
                os.kill(os.getpid(), getattr(signal, self.how))
                time.sleep(10)  # the signal arrives asynchronously
        return i


def _break_here(context: str, how: str, timeout: float, bad: int, stamp: str) -> dict:
    """One epoch over ``BreaksAt`` through torch's own DataLoader (2 workers), in this
    process; what torch raised, when, and how many workers ``del it`` left."""
    import multiprocessing

    from torch.utils.data import DataLoader

    from labkit.loading.loaders import worker_processes

    if context == "forkserver":  # the server imports torch once; its workers start at once
        multiprocessing.set_forkserver_preload(["faulty_datasets"])
    loader = DataLoader(BreaksAt(how=how, bad=bad, stamp=stamp), batch_size=4, num_workers=2,
                        timeout=timeout, multiprocessing_context=context)
    got, error, t_error = [], None, None
    it = None
    try:
        it = iter(loader)  # a worker can die before iter() returns
        for batch in it:
            got += batch.tolist()
    except Exception as e:  # noqa: BLE001 - what torch raised is the result
        t_error = time.time()
        error = {"type": type(e).__name__, "message": str(e)}
    t_stop = time.monotonic()
    del it  # the traceback is gone with the except block: this is the last reference
    deadline = time.monotonic() + 15
    while (left := len(worker_processes())) and time.monotonic() < deadline:
        time.sleep(0.1)
    broke = float(Path(stamp).read_text()) if os.path.exists(stamp) else None
    return {"got": got, "error": error, "left": left,
            "stop_s": round(time.monotonic() - t_stop, 2),
            "noticed_s": round(t_error - broke, 2) if error and broke else None}


def break_a_loader(context: str, how: str, timeout: float, *, bad: int = 0,
                   limit_s: float = 120) -> dict:
    """Run :func:`_break_here` in a Python process of its own and return its result."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "broke")
        code = ("import json, faulty_datasets as f; print(json.dumps(f._break_here("
                f"{context!r}, {how!r}, {timeout!r}, {bad!r}, {stamp!r})))")
        path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=limit_s, env={**os.environ, "PYTHONPATH": path})
    if r.returncode != 0 or not r.stdout.strip():
        raise AssertionError(f"exit status {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["stderr"] = r.stderr
    return out
