"""Page-cache control for cold vs warm experiments: evict a file's pages (ch. 00-02, 11, 12, 16).

A "cold" read is only cold if the file's pages are really gone from the page cache.
:func:`evict_page_cache` asks the kernel to drop them (``posix_fadvise(DONTNEED)``, no root
needed) and counts how many are still resident (``mincore`` through ctypes, on Linux and
macOS; ``dry_run=True`` counts alone), so a chapter can show the eviction worked instead of
assuming it. Eviction is Linux's alone (``labkit.facilities``). Introduced in chapter 02.
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
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..data.fixtures import source_files
from ..facilities import require
from .measurement import Measurement
from .meter import measure

_PROT_READ, _MAP_SHARED = 0x1, 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value


@functools.cache  # loading libc per file cost ~5 ms each: 2.7 s over 2048 sample files
def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def _resident_pages(path: Path) -> tuple[int, int]:
    """(resident, total) pages of one file, via mincore on a read-only shared mapping."""
    size = path.stat().st_size
    page = mmap.PAGESIZE
    total = (size + page - 1) // page
    if size == 0:
        return 0, 0
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"{path}: mmap for the residency probe failed: {os.strerror(err)}")
        try:
            vec = (ctypes.c_ubyte * total)()
            if libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"{path}: mincore failed: {os.strerror(err)}")
            return int((np.frombuffer(vec, np.uint8) & 1).sum()), total
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def page_cache_residency(paths: str | os.PathLike | Iterable | object) -> float:
    """Fraction (0..1) of the files' pages that sit in the page cache now.

    ``paths``: a file, a folder (all files under it), a list of them, or a Fixture.
    Checking does not load anything: ``mincore`` only reports.
    """
    resident = total = 0
    for p in source_files(paths, missing_ok=True):  # a Fixture's: its data files
        r, t = _resident_pages(p)
        resident, total = resident + r, total + t
    return resident / total if total else 0.0


def evict_page_cache(paths, check: bool = True, dry_run: bool = False) -> float:
    """Drop the files' pages from the page cache; returns the fraction still resident.

    ``dry_run=True`` drops nothing: the fraction resident now (``mincore``, macOS too).
    Dirty pages are written back first (``fdatasync``), since the kernel only drops clean
    ones. Pages another process has mapped stay (a live ``np.memmap`` or a DataLoader
    worker holding the file), and some filesystems (tmpfs: the file *is* memory) ignore the
    request. With ``check=True`` a warning says so instead of letting a "cold" run be warm.
    """
    if dry_run:
        return page_cache_residency(paths)
    require("fadvise")  # NotOnThisOS (an OSError) saying why, on macOS
    files = source_files(paths, missing_ok=True)
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # a read-only filesystem: nothing to write
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    left = page_cache_residency(files)
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
