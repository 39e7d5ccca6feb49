"""The suite's own /dev/shm check (conftest ``shm_since``) fails a test on what it leaves, and
not on an entry unlinked within the grace (another worker's, gone once its tracker runs)."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm here (macOS)")


def _entry() -> Path:
    p = SHM / f"lkt-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    p.write_bytes(b"x")
    return p


def test_an_entry_left_is_reported_after_the_grace(shm_since):
    shm_since.grace_s = 0.3
    p = _entry()
    try:
        assert shm_since.left() == [p.name]
    finally:
        p.unlink()
    assert shm_since.left() == []


def test_an_entry_unlinked_within_the_grace_is_not(shm_since):
    shm_since.grace_s = 5.0
    p = _entry()
    later = threading.Timer(0.5, p.unlink)
    later.start()
    try:
        assert shm_since.left() == []
    finally:
        later.join()
