"""Stopping child processes for good: leftover workers, browsers, servers (chapters 01, 04, 07)."""

from __future__ import annotations


def stop_processes(procs, grace_s: float = 2.0) -> list:
    """SIGTERM ``procs`` (``psutil.Process`` objects), SIGKILL those alive after ``grace_s``;
    returns the ones that could not be stopped."""
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
