"""Stopping child processes for good: leftover workers, browsers, servers (chapters 01, 04, 07).

One way to end processes the kit (or a test) started: ask them to exit, give them a moment,
then kill what is left, and reap them all, so nothing outlives the cell or the test.
"""

from __future__ import annotations


def stop_processes(procs, grace_s: float = 2.0) -> list:
    """SIGTERM ``procs`` (``psutil.Process`` objects), SIGKILL those alive after ``grace_s``.

    Processes already gone are skipped. Returns the ones that could not be stopped (none,
    unless the kernel refuses: a process in uninterruptible sleep).
    """
    import psutil

    procs = list(procs)
    _, alive = psutil.wait_procs(_send(procs, "terminate"), timeout=grace_s)
    _, alive = psutil.wait_procs(_send(alive, "kill"), timeout=grace_s)
    return alive


def _send(procs: list, how: str) -> list:
    """Call ``terminate`` or ``kill`` on each process, skipping the ones already gone."""
    import psutil

    for p in procs:
        try:
            getattr(p, how)()
        except psutil.Error:
            pass
    return procs
