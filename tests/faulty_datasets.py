"""Datasets that break their DataLoader worker on purpose (the fault matrix).

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

    ``after_s``: the worker first waits this long, so that the main thread is already
    blocked waiting for a batch when the worker dies. torch's SIGCHLD handler raises its
    error wherever the main thread is; a death in the loader's first milliseconds can land
    inside ``multiprocessing.Queue.put`` (torch sending indices), where the error can leave
    the queue's lock held and ``del it`` then hangs forever, or inside torch's first
    ``record_function``, which swallows it (CONTRIBUTING, "Races the kit has met"). A test
    that pins the usual path waits; one CI run hung without it.
    """

    def __init__(self, n: int = 64, bad: int = 10, how: str = "exit", hang_s: float = 3600,
                 stamp: str | None = None, after_s: float = 0.0):
        if how not in BREAKS:
            raise ValueError(f"how={how!r}: one of {', '.join(BREAKS)}")
        self.n, self.bad, self.how, self.hang_s, self.stamp = n, bad, how, hang_s, stamp
        self.after_s = after_s
        self.parent = os.getpid()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad and os.getpid() != self.parent:
            time.sleep(self.after_s)
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


def _break_here(context: str, how: str, timeout: float, bad: int, stamp: str,
                after_s: float = 0.0) -> dict:
    """One epoch over ``BreaksAt`` through torch's own DataLoader (2 workers), in this
    process; what torch raised, when, and how many workers ``del it`` left."""
    import multiprocessing

    from torch.utils.data import DataLoader

    from labkit.loading.loaders import worker_processes

    if context == "forkserver":  # the server imports torch once; its workers start at once
        multiprocessing.set_forkserver_preload(["faulty_datasets"])
    loader = DataLoader(BreaksAt(how=how, bad=bad, stamp=stamp, after_s=after_s), batch_size=4,
                        num_workers=2, timeout=timeout, multiprocessing_context=context)
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
                   after_s: float = 0.0, limit_s: float = 120) -> dict:
    """Run :func:`_break_here` in a Python process of its own and return its result.

    Should that process hang, ``faulthandler`` writes every thread's stack to its stderr
    shortly before ``limit_s`` and ends it, and the error shows where it stood. Its output
    goes to files, not pipes: a worker left behind would hold a pipe open. It runs in a
    session of its own, which is killed whole at the end, so no worker outlives it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        stamp, out, err = (os.path.join(tmp, name) for name in ("broke", "out", "err"))
        code = (f"import faulthandler; faulthandler.dump_traceback_later({limit_s - 10!r}, "
                "exit=True)\n"
                "import json, faulty_datasets as f; print(json.dumps(f._break_here("
                f"{context!r}, {how!r}, {timeout!r}, {bad!r}, {stamp!r}, {after_s!r})))")
        path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
        with open(out, "w") as o, open(err, "w") as e:
            p = subprocess.Popen([sys.executable, "-c", code], stdout=o, stderr=e,
                                 env={**os.environ, "PYTHONPATH": path}, start_new_session=True)
            try:
                p.wait(timeout=limit_s)
            finally:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # its workers, should any be left
                except ProcessLookupError:
                    pass
                p.wait()
        stdout, stderr = Path(out).read_text(), Path(err).read_text()
    if p.returncode != 0 or not stdout.strip():
        raise AssertionError(f"exit status {p.returncode}\n{stdout}\n{stderr[-8000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["stderr"] = stderr
    return result
