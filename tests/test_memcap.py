"""Chapter 02's own ``capped.py`` (its ``%%writefile`` cell): mmap fits under a cap the
eager load of the same file cannot."""

import json
import subprocess
import sys

import numpy as np
import pytest
from chapter_code import cell_source

import labkit as lk

pytestmark = pytest.mark.skipif(not (lk.status("rlimit_data")[0] and lk.status("proc")[0]),
                                reason="RLIMIT_DATA and /proc are Linux's")


@pytest.fixture
def capped(tmp_path):
    """``run(how, headroom)``: chapter 02's child on a 4 MiB .npy, its process back."""
    script, big = tmp_path / "capped.py", tmp_path / "big.npy"
    script.write_text(cell_source("02", "capped.py"))
    np.save(big, np.arange(4 << 18, dtype=np.float32).reshape(-1, 256))

    def run(how, headroom, path=big):
        return subprocess.run([sys.executable, script, path, how, str(headroom), "64"],
                              capture_output=True, text=True, timeout=120)
    run.big = big
    return run


def test_mmap_fits_eager_fails_under_the_same_cap(capped):
    headroom = capped.big.stat().st_size // 4
    lazy = json.loads(capped("mmap", headroom).stdout)
    eager = json.loads(capped("eager", headroom).stdout)
    assert lazy["ok"] and lazy["rows"] == 4096
    assert lazy["checksum"] == float(np.arange(4096) @ np.full(4096, 256.0))  # column 0 sums
    assert lazy["anon_growth"] < headroom
    assert not eager["ok"] and eager["error"] == "MemoryError" and eager["rows"] == 0


def test_without_a_cap_problem_eager_works(capped):
    r = json.loads(capped("eager", 64 << 20).stdout)
    assert r["ok"] and r["rows"] == 4096 and r["anon_growth"] >= capped.big.stat().st_size // 2


def test_a_missing_file_fails_naming_it(capped, tmp_path):
    r = capped("mmap", 1 << 20, path=tmp_path / "nope.npy")
    assert r.returncode != 0 and "nope.npy" in r.stderr
