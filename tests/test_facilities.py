"""labkit/facilities.py: the Linux-only facilities, each read in one place, hidden on demand
(``LABKIT_HIDE_LINUX``, CI's ``[macos]`` copy) and saying why where they are missing."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit import facilities

LINUX = sys.platform.startswith("linux")


@pytest.fixture
def hidden(monkeypatch):
    monkeypatch.setenv(facilities.HIDE_ENV, "1")


@pytest.mark.skipif(not LINUX, reason="the facilities are Linux's")
def test_linux_has_all_six_unless_hidden(monkeypatch):
    monkeypatch.delenv(facilities.HIDE_ENV, raising=False)
    assert {n: facilities.has(n) for n in facilities.WHY} == dict.fromkeys(facilities.WHY, True)
    monkeypatch.setenv(facilities.HIDE_ENV, "1")
    assert not any(facilities.has(n) for n in facilities.WHY)
    monkeypatch.setenv(facilities.HIDE_ENV, "0")   # "0" is off, as an empty value
    assert facilities.has("fadvise")


def test_an_unknown_name_is_an_error():
    with pytest.raises(ValueError, match="unknown facility 'fadvice'"):
        facilities.has("fadvice")


def test_what_is_missing_says_what_cannot_be_measured_and_is_an_oserror(hidden):
    with pytest.raises(OSError, match="no posix_fadvise on .*cold.* cannot be made here"):
        facilities.require("fadvise")
    assert isinstance(facilities.NotOnThisOS("x"), lk.LabkitError)
    assert "USS only" in facilities.why_not("pss")


def test_usable_cores_falls_back_to_every_core(hidden):
    assert lk.usable_cores() == (os.cpu_count() or 1)


def test_cold_reads_and_the_memory_cap_refuse_without_them(hidden, tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(1024, dtype=np.float32))
    with pytest.raises(facilities.NotOnThisOS, match="posix_fadvise"):
        lk.evict_page_cache(path)
    with pytest.raises(facilities.NotOnThisOS, match="posix_fadvise"):
        lk.measure_cold(lambda: DataLoader(range(4)), path, repeats=1)
    assert not lk.status("rlimit_data")[0]   # chapter 02 then does not run its capped child
    # the residency probe (mincore) is not Linux's alone: it still answers
    assert 0.0 <= lk.evict_page_cache(path, dry_run=True) <= 1.0


def test_pss_hidden_leaves_uss(hidden):   # chapter 03b then shows USS alone
    ok, why = lk.status("pss")
    assert not ok and why.endswith("USS only")


def test_a_chapter_asks_lk_status_which_says_why_not(hidden):
    ok, why = lk.status("fadvise")
    assert not ok and why == facilities.why_not("fadvise")
    with pytest.raises(lk.LabkitError, match="fadvise"):   # the known names listed
        lk.status("fadvice")
