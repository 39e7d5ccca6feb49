"""Stopping child processes for good: leftover workers, browsers, servers (chapters 01, 04, 07)."""

from __future__ import annotations

import contextlib


def stop_processes(procs, grace_s: float = 2.0) -> list:
    """SIGTERM ``procs`` (``psutil.Process`` objects), SIGKILL those alive after ``grace_s``;
    returns the ones that could not be stopped."""
    import psutil

    alive = list(procs)
    for how in ("terminate", "kill"):
        for p in alive:
            with contextlib.suppress(psutil.Error):  # already gone
                getattr(p, how)()
        _, alive = psutil.wait_procs(alive, timeout=grace_s)
    return alive
