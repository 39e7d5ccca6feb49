"""``labkit bench mmap``: batched memmap reads against plain reads, warm cache (chapter 02)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from labkit.instruments.stats import judge, paired_trials

from .registry import benchmark

GOAL = 0.7


@benchmark("mmap", goal=f"batched sequential memmap read >= {GOAL}x plain page-cache file read "
                        "(median of paired CPU-time ratios, 95% interval; no 1x ceiling: "
                        "memmap skips read()'s kernel-to-user copy but takes page faults, so "
                        "it can come out above 1x)")
def mmap_read(mib: int = 256, batch_kib: int = 256, pairs: int = 9) -> dict:
    """Warm page cache: a file copied out in chunks through a fresh ``np.memmap`` (its page
    faults count) vs ``f.readinto``, paired trials on the CPU clock."""
    nbytes, chunk = mib << 20, batch_kib << 10
    with tempfile.TemporaryDirectory(prefix="labkit-bench-mmap-") as tmp:
        path = os.path.join(tmp, "data.raw")
        block = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8).tobytes()
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(block)
        buf = np.empty(chunk, np.uint8)
        view = memoryview(buf)

        def plain():
            with open(path, "rb", buffering=0) as f:
                while f.readinto(view):
                    pass

        def mapped():
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for lo in range(0, nbytes, chunk):
                part = mm[lo:lo + chunk]
                buf[:len(part)] = part  # the batch copy a loader makes
            del mm

        plain(), mapped()  # warm-up: the file into the page cache
        trials = paired_trials(plain, mapped, pairs, clock="cpu")
    result = {"file_mib": mib, "batch_kib": batch_kib, "pairs": pairs,
              "plain_read_gb_per_s": nbytes / min(p for p, _ in trials) / 1e9,
              "mmap_read_gb_per_s": nbytes / min(m for _, m in trials) / 1e9}
    return result | judge("ratio", [p / m for p, m in trials], GOAL)
