"""The capped child run (chapter 02): mmap fits under a cap the eager load cannot."""

import numpy as np
import pytest

from labkit.errors import LabkitError
from labkit.instruments.memcap import run_capped


@pytest.fixture
def big(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.arange(4 << 18, dtype=np.float32).reshape(-1, 256))  # 4 MiB
    return path


def test_mmap_fits_eager_fails_under_the_same_cap(big):
    headroom = big.stat().st_size // 4
    lazy = run_capped(big, "mmap", headroom=headroom, batch_rows=64)
    eager = run_capped(big, "eager", headroom=headroom)
    assert lazy.ok and lazy.rows == 4096
    assert lazy.checksum == float(np.arange(4096) @ np.full(4096, 256.0))  # column 0 sums
    assert lazy.anon_growth < headroom
    assert lazy.cap == lazy.baseline_data + headroom
    assert not eager.ok and "MemoryError" in eager.error
    assert "FAILED" in eager.summary() and "completed" in lazy.summary()


def test_without_a_cap_problem_eager_works(big):
    r = run_capped(big, "eager", headroom=64 << 20)
    assert r.ok and r.rows == 4096 and r.anon_growth >= big.stat().st_size // 2


def test_bad_arguments(tmp_path, big):
    with pytest.raises(ValueError, match="how="):
        run_capped(big, "lazy", headroom=1)
    with pytest.raises(LabkitError, match="nope.npy"):
        run_capped(tmp_path / "nope.npy", headroom=1)
