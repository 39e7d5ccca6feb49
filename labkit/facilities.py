"""Linux-only facilities, each read in one place, and why one is missing (ch. 00-03, 09-13, 15, 16).

Six things the chapters measure with are Linux's alone (the keys of :data:`WHY`); elsewhere
the cell that needs one says in one line what it cannot measure and why, and goes on. A
chapter asks ``lk.status("fadvise")``; ``LABKIT_HIDE_LINUX=1`` hides all six on Linux too
(CI's ``[macos]`` pass), so a Linux machine shows every chapter reaches its end on a Mac.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import LabkitError

HIDE_ENV = "LABKIT_HIDE_LINUX"

WHY = {
    "fadvise": "no posix_fadvise on {os}: a file's pages cannot be dropped from the page "
               "cache without root (macOS: `sudo purge` drops the whole cache), so a "
               "'cold' read cannot be made here",
    "pss": "psutil gives no PSS on {os} (Linux's /proc/<pid>/smaps_rollup): USS only",
    "proc": "no /proc/<pid>/status on {os}: anonymous vs file-backed RSS cannot be told "
            "apart here",
    "rlimit_data": "RLIMIT_DATA is not enforced on {os} (the cap needs Linux's accounting "
                   "of mapped anonymous memory), so the capped-memory run cannot be made",
    "affinity": "no sched_getaffinity on {os}: os.cpu_count() counts every core, a "
                "container's CPU set included",
    "dev_shm": "no /dev/shm folder on {os}: shared-memory segments cannot be listed or sized",
}


class NotOnThisOS(LabkitError, OSError):
    """A measurement needs a facility this OS lacks; the message says which and why."""


def hidden() -> bool:
    """True when ``LABKIT_HIDE_LINUX`` asks the kit to act as on a machine without them."""
    return os.environ.get(HIDE_ENV, "") not in ("", "0")


def _os_name() -> str:
    return "this machine (LABKIT_HIDE_LINUX)" if hidden() else {
        "darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)


def has(name: str) -> bool:
    """Whether this process can use the facility ``name`` (a key of :data:`WHY`)."""
    if name not in WHY:
        raise ValueError(f"unknown facility {name!r}: one of {sorted(WHY)}")
    if hidden():
        return False
    linux = sys.platform.startswith("linux")
    return {
        "fadvise": hasattr(os, "posix_fadvise"),
        "pss": linux,
        "proc": linux and Path("/proc/self/status").exists(),
        "rlimit_data": linux,
        "affinity": hasattr(os, "sched_getaffinity"),
        "dev_shm": Path("/dev/shm").is_dir(),
    }[name]


def why_not(name: str) -> str:
    """One line: what cannot be measured without ``name`` here, and why."""
    return WHY[name].format(os=_os_name())


def require(name: str) -> None:
    """Raise :class:`NotOnThisOS` (an ``OSError``) saying why, unless :func:`has` ``name``."""
    if not has(name):
        raise NotOnThisOS(why_not(name))


def usable_cores() -> int:
    """CPU cores this process may run on: its affinity where the OS has one, else all."""
    return len(os.sched_getaffinity(0)) if has("affinity") else os.cpu_count() or 1


def ptrace_scope() -> str | None:
    """Linux's Yama ``ptrace_scope`` (0: py-spy may read a user's processes), or None."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    return scope.read_text().strip() if has("proc") and scope.exists() else None

