"""labkit.loading.processes: a child that ignores SIGTERM is killed; none is left (ch. 01)."""

from __future__ import annotations

import subprocess
import sys

import psutil

from labkit.loading.processes import stop_processes


def test_stop_processes_terminates_then_kills_the_stubborn():
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"  # its handler is in place
    procs = [psutil.Process(polite.pid), psutil.Process(stubborn.pid)]
    assert stop_processes(procs, grace_s=0.5) == []
    # psutil reaped them (they are our children) and kept how each ended
    assert [p.returncode for p in procs] == [-15, -9]
    assert not psutil.pid_exists(polite.pid) or psutil.Process(polite.pid).status() == "zombie"
    stubborn.stdout.close()


def test_stop_processes_skips_the_already_gone():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = psutil.Process(p.pid)
    p.wait(timeout=30)
    assert stop_processes([proc], grace_s=0.1) == []
