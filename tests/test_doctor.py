"""labkit doctor: each check reads its fact, and every check that fails says what to do."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import namedtuple

from labkit import optional
from labkit_tools import checkup


def test_every_check_has_a_name_a_finding_and_a_fix_when_it_fails():
    checks = checkup.doctor()
    assert [c.name for c in checks] == ["cores", "/dev/shm", "start method", "free-threaded",
                                        "FFmpeg libs", "browser"]
    for c in checks:
        assert c.found
        assert bool(c.fix) == (not c.ok), c  # a fix exactly where something needs fixing


def test_one_core_asks_for_more(monkeypatch):
    monkeypatch.setattr(checkup, "usable_cores", lambda: 1)
    c = checkup._cores()
    assert not c.ok and "--cpus" in c.fix and "1 usable" in c.found


def test_dockers_64_mib_shm_is_named_with_the_flag(monkeypatch, tmp_path):
    usage = namedtuple("usage", "total used free percent")
    mib64 = usage(64 * 2**20, 0, 64 * 2**20, 0)
    monkeypatch.setattr(checkup.psutil, "disk_usage", lambda p: mib64)
    c = checkup._shm(str(tmp_path))
    assert not c.ok and "64 MiB" in c.found and "--shm-size" in c.fix


def test_without_dev_shm_as_on_macos_the_check_passes_and_says_why(monkeypatch):
    monkeypatch.setenv("LABKIT_HIDE_LINUX", "1")  # facilities.has("dev_shm") is False
    c = checkup._shm()
    assert c.ok and "/dev/shm" in c.found and not c.fix


def test_missing_ffmpeg_says_what_to_install(monkeypatch):
    monkeypatch.setitem(optional._CHECKS, "ffmpeg", lambda: (False, "no libavutil"))
    c = checkup._ffmpeg()
    assert not c.ok and "apt-get install ffmpeg" in c.fix and "brew install ffmpeg" in c.fix


def test_missing_browser_names_the_packages(tmp_path):
    c = checkup._browser(search=str(tmp_path))  # an empty folder: neither program is there
    assert not c.ok and "chromium missing" in c.found
    assert "apt-get install chromium chromium-driver" in c.fix


def test_the_start_method_is_reported_as_set():
    c = checkup._start_method()
    assert c.ok and c.found.split()[0] == __import__("multiprocessing").get_start_method()


def test_cli_prints_the_checks_and_exits_by_them():
    r = subprocess.run([sys.executable, "-m", "labkit_tools.cli", "doctor", "--json"],
                       capture_output=True, text=True, timeout=120)
    checks = json.loads(r.stdout)
    assert r.returncode == (0 if all(c["ok"] for c in checks) else 1), r.stderr
    assert {c["name"] for c in checks} >= {"cores", "/dev/shm", "FFmpeg libs"}
