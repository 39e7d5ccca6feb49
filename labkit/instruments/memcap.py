"""Larger than memory, for real: a read in a child under an enforced memory cap (chapter 02).

The cap is ``RLIMIT_DATA``, set by the child on itself after its imports: it limits the
process's private writable memory (heap, anonymous mappings: where ``np.load`` puts an
array) but not read-only file mappings (where ``np.load(mmap_mode="r")`` points). So a
memory-mapped pass over a file several times the cap succeeds while the eager load of the
same file fails with ``MemoryError``. The cap sits on top of the child's own start-up
footprint (its baseline ``VmData``, measured in the child), so ``headroom`` is what the
data may use. Introduced in chapter 02.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabkitError
from ..facilities import require

_CHILD = Path(__file__).with_name("_memcap_child.py")


@dataclass(frozen=True)
class CappedRun:
    """What one capped child run did. Sizes in bytes; ``peak_*`` from /proc/<pid>/status."""

    how: str
    file_bytes: int
    headroom: int
    baseline_data: int      # VmData after imports, before the cap
    cap: int                # RLIMIT_DATA = baseline_data + headroom
    rows: int
    checksum: float
    error: str | None
    anon_growth: int        # RssAnon, private memory the read added to the start-up's
    peak_file: int          # RssFile: file pages mapped in, which the kernel may drop
    peak_rss: int           # VmHWM: RSS = anon + file + shmem, at its highest

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> str:
        mib = 1 << 20
        state = "completed" if self.ok else f"FAILED ({self.error.split(':')[0]})"
        return (f"{self.how:<6} {state:<22} file {self.file_bytes / mib:7.1f} MiB = "
                f"{self.file_bytes / self.headroom:4.1f}x the headroom of "
                f"{self.headroom / mib:.1f} MiB; anon +{self.anon_growth / mib:6.1f} MiB, "
                f"peak RSS {self.peak_rss / mib:6.1f} MiB (file-backed "
                f"{self.peak_file / mib:6.1f} MiB)")


def run_capped(path, how: str = "mmap", *, headroom: int, batch_rows: int = 256,
               timeout: float = 120.0) -> CappedRun:
    """Read a ``.npy`` file in a child process whose data memory is capped.

    Args:
        path: the ``.npy`` file (e.g. ``lk.fixture("array", SCALE).file("array.npy")``).
        how: ``"mmap"`` (``np.load(mmap_mode="r")``, ``batch_rows`` rows copied at a time)
            or ``"eager"`` (``np.load`` of everything).
        headroom: bytes of private memory allowed on top of the child's start-up footprint.
        timeout: seconds before the child is killed (nothing hangs).
    """
    if how not in ("mmap", "eager"):
        raise ValueError(f"how={how!r}: 'mmap' or 'eager'")
    require("rlimit_data")   # NotOnThisOS (an OSError) saying why, on macOS
    require("proc")
    path = Path(path)
    if not path.is_file():
        raise LabkitError(f"{path}: file not found")
    job = {"path": str(path), "how": how, "headroom": int(headroom),
           "batch_rows": int(batch_rows)}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    try:
        proc = subprocess.run([sys.executable, str(_CHILD), json.dumps(job)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LabkitError(f"capped {how} read of {path} took over {timeout:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        # without a JSON line the child died before reporting (e.g. killed at start-up
        # because the cap was below what Python itself needs)
        raise LabkitError(f"capped {how} read of {path} failed (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-500:]}")
    return CappedRun(how=how, file_bytes=path.stat().st_size, headroom=int(headroom),
                     **json.loads(lines[-1]))
