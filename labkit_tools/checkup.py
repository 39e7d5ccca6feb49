"""``labkit doctor``: each fact of this machine the chapters depend on, and what to fix (ch. 00)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import psutil

from labkit.facilities import has, hidden, usable_cores, why_not
from labkit.media.backends import FFMPEG_VERSIONS
from labkit.optional import status
from labkit.records.table import text_table

SHM_NEEDED = 512 * 2**20  # the kit's choice: several workers' prefetched image batches at once
_START_METHODS = {"fork": "the default on Linux before Python 3.14",
                  "spawn": "the default on macOS and Windows",
                  "forkserver": "the default on Linux from Python 3.14"}


@dataclass(frozen=True)
class Check:
    """One fact: its value here, whether the chapters get what they need, and the fix if not."""

    name: str
    ok: bool
    found: str
    fix: str = ""  # what to do; emptied where ``ok``

    def __post_init__(self):
        if self.ok:
            object.__setattr__(self, "fix", "")


def _cores() -> Check:
    usable = usable_cores()
    found = f"{usable} usable by this process (os.cpu_count() says {os.cpu_count()})"
    return Check("cores", usable >= 2, found,
                 "one core: worker processes cannot run beside the main one, so chapters 03, 09 "
                 "and 16 show no speed-up; give the machine or container 2+ CPUs "
                 "(docker run --cpus=4, or a larger VM)")


def _shm(path: str = "/dev/shm") -> Check:  # a parameter so tests can point elsewhere
    if not (has("dev_shm") if path == "/dev/shm" else Path(path).is_dir()):
        if sys.platform != "linux" or hidden():  # macOS: shm objects without a folder
            return Check("/dev/shm", True, why_not("dev_shm"))
        return Check("/dev/shm", False, f"no {path}",
                     f"mount a tmpfs at {path} (mount -t tmpfs -o size=2g tmpfs {path})")
    usage = psutil.disk_usage(path)
    found = f"{usage.total / 2**20:,.0f} MiB, {usage.free / 2**20:,.0f} MiB free"
    return Check("/dev/shm", usage.total >= SHM_NEEDED, found,
                 f"below {SHM_NEEDED // 2**20} MiB, workers' batches can fail with 'bus error': "
                 "in Docker, docker run --shm-size=2g (or --ipc=host); on Kubernetes, an "
                 "emptyDir with medium: Memory mounted at /dev/shm")


def _start_method() -> Check:  # every chapter runs under all three
    method = multiprocessing.get_start_method()
    return Check("start method", True,
                 f"{method} ({_START_METHODS.get(method, 'set by this program')})")


def _free_threading() -> Check:  # informational: chapter 09 reads it
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return Check("free-threaded", True, f"no: Python {sys.version.split()[0]} with the GIL")
    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()  # Python 3.13+
    return Check("free-threaded", True, "yes, GIL " + (
        "re-enabled (PYTHON_GIL=1 or an extension)" if enabled else "off"))


def _ffmpeg() -> Check:
    ok, reason = status("ffmpeg")
    return Check("FFmpeg libs", ok, reason,
                 f"chapter 15 needs FFmpeg's shared libraries ({FFMPEG_VERSIONS}): "
                 "apt-get install ffmpeg (Debian/Ubuntu), brew install ffmpeg (macOS) or "
                 "conda install -c conda-forge 'ffmpeg<9'")


def _browser(search: str | None = None) -> Check:
    search = search or os.environ.get("PATH", "") + os.pathsep + "/usr/bin"  # Debian's home
    found = {name: shutil.which(name, path=search) for name in ("chromium", "chromedriver")}
    text = ", ".join(f"{name} {where or 'missing'}" for name, where in found.items())
    return Check("browser", None not in found.values(), text,
                 "only make test's real-browser test needs it: apt-get install chromium "
                 "chromium-driver (Debian/Ubuntu); the chapters run without it")


def doctor() -> list[Check]:
    """Every check of ``labkit doctor``, in the order above (chapter 00)."""
    return [_cores(), _shm(), _start_method(), _free_threading(), _ffmpeg(), _browser()]


def format_doctor(checks: list[Check]) -> str:
    """The checks as ``labkit doctor`` prints them: one line each, a fix under each failure."""
    rows = []
    for c in checks:
        rows.append(["ok" if c.ok else "FIX", c.name, c.found])
        if c.fix:
            rows.append(["", f"-> {c.fix}"])  # a short row: the fix runs on
    return text_table({"ok": "<3", "check": "<15", "found": "<"}, rows, header=False, sep=" ")
