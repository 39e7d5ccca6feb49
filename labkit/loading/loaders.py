"""Worker processes a DataLoader leaves behind, found by public means (ch. 01, 03-04, 09, 13)."""

from __future__ import annotations

import os

#: Seconds a worker may take to deliver one batch before a labkit-built DataLoader raises.
WORKER_TIMEOUT_S = 60.0

#: multiprocessing's own long-lived helpers: started once per process, not leaks.
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def worker_processes(of: int | None = None) -> list:
    """Child processes of this one (or of pid ``of``) still alive: leftover DataLoader workers
    (multiprocessing's resource tracker and fork server are not counted)."""
    import psutil

    me = os.getpid() if of is None else of
    out = []
    for p in psutil.Process(me).children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            # Only our direct children can be the helpers: a worker the fork server forked
            # shares its command line but is the fork server's child, and is counted.
            if p.ppid() == me and any(h in " ".join(p.cmdline()) for h in _HELPERS):
                continue
            out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out
