"""Page-cache control for cold vs warm experiments: evict a file's pages (ch. 00-02, 11, 12, 16).

A "cold" read is only cold if the file's pages are really gone: :func:`evict_page_cache`
drops them (Linux's ``posix_fadvise``, no root) and counts what is still resident
(``mincore``), so a chapter shows the eviction worked. Introduced in chapter 02.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import mmap
import os
import warnings
from pathlib import Path

import numpy as np

from ..data.fixtures import source_files
from ..facilities import require
from .measurement import Measurement
from .meter import measure


@functools.cache  # loading libc per file cost ~5 ms each: 2.7 s over 2048 sample files
def _mincore():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc.mincore


def _resident_pages(path: Path) -> tuple[int, int]:
    """(resident, total) pages of one file: ``mincore`` on a mapping of it (no page read)."""
    size = path.stat().st_size
    if size == 0:
        return 0, 0
    vec = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
    # ACCESS_COPY: a writable (private) mapping, so ctypes can take its address
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
        start = ctypes.c_char.from_buffer(mm)
        failed = _mincore()(ctypes.addressof(start), size, vec) != 0
        del start  # the mapping cannot close while ctypes holds a pointer into it
    if failed:
        err = ctypes.get_errno()
        raise OSError(err, f"{path}: mincore failed: {os.strerror(err)}")
    return int((np.frombuffer(vec, np.uint8) & 1).sum()), len(vec)


def _residency(files: list[Path]) -> float:
    pages = [_resident_pages(p) for p in files]
    total = sum(t for _, t in pages)
    return sum(r for r, _ in pages) / total if total else 0.0


def evict_page_cache(paths, check: bool = True, dry_run: bool = False) -> float:
    """Drop the files' pages from the page cache; returns the fraction still resident.

    ``paths``: a file, a folder (all files under it), a list of them, or a Fixture.
    ``dry_run=True`` drops nothing: the fraction resident now (``mincore``, macOS too).
    Dirty pages are written back first (``fdatasync``), since the kernel only drops clean
    ones. Pages another process has mapped stay (a live ``np.memmap`` or a DataLoader
    worker holding the file), and some filesystems (tmpfs: the file *is* memory) ignore the
    request. With ``check=True`` a warning says so instead of letting a "cold" run be warm.
    """
    files = source_files(paths, missing_ok=True)  # a Fixture's: its data files
    if dry_run:
        return _residency(files)
    require("fadvise")  # NotOnThisOS (an OSError) saying why, on macOS
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # a read-only filesystem: nothing to write
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    left = _residency(files)
    if check and left > 0.05:
        warnings.warn(
            f"page-cache eviction incomplete: {left:.0%} of {len(files)} file(s) still "
            "resident (mapped by a live process, or a filesystem such as tmpfs that ignores "
            "POSIX_FADV_DONTNEED); a 'cold' measurement now would be partly warm",
            stacklevel=2)
    return left


def measure_cold(make_loader, paths, *, repeats: int = 3, name: str | None = None,
                 config: dict | None = None, **measure_kwargs):
    """:func:`labkit.measure` with the page cache evicted before every pass.

    ``make_loader()`` builds a fresh loader (and dataset) per pass: a memory map left over
    from the previous pass would pin its pages, and the "cold" pass would be warm. The
    residency after eviction goes into the config. Without eviction (macOS) it raises
    :class:`labkit.facilities.NotOnThisOS` before any pass, not a warm run named cold.
    """
    require("fadvise")
    out = Measurement(name=name or "cold", config=dict(config or {}))
    left = []
    for _ in range(repeats):
        gc.collect()  # drop the previous pass's maps before evicting
        left.append(evict_page_cache(paths))
        m = measure(make_loader(), repeats=1, warmup=0, name=out.name, **measure_kwargs)
        out.passes.extend(m.passes)
        out.step = m.step
    out.config.update(cache="cold", resident_after_eviction=round(max(left), 3))
    return out
