"""Stress the worker crash / hang / kill tests under CPU contention (issue 12's race).

Not collected by pytest (not a ``test_*.py`` file), so not part of ``make test``. Run it as

    python tests/stress_workers.py --runs 50

Each round runs pytest on the tests below in a subprocess of its own, while ``--busy`` busy
loops (``python -c "while True: pass"``) compete for the cores, so the main process and its
workers are descheduled at random points (where torch's SIGCHLD handler and its own check
of the workers race to report a dead worker). A round in which pytest ends with an
INTERNALERROR (what the race did to CI) is counted as such instead of ending the harness.
After each round, processes still carrying the round's tag in their environment (a worker,
its fork server) and /dev/shm entries the round left are counted as leftovers, and stopped.
Exit status 0 only if every count is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import conftest as _conftest  # noqa: E402 (its /dev/shm attribution, shared)

TESTS = [
    "tests/test_fault_matrix.py::test_worker_crash_is_a_runtime_error_and_del_it_leaves_no_worker",
    "tests/test_fault_matrix.py::test_worker_hang_ends_at_the_timeout_and_del_it_leaves_no_worker",
    "tests/test_fault_matrix.py::test_spawn_worker_cannot_import_a_notebook_cell_class",
    "tests/test_loaders.py::test_a_stuck_worker_times_out_instead_of_hanging",
    "tests/test_loaders.py::test_del_it_stops_the_workers_mid_epoch",
    "tests/test_loaders.py::test_persistent_workers_live_as_long_as_their_dataloader",
    "tests/test_loaders.py::test_an_error_raised_by_the_dataset_is_reraised_and_the_workers_live_on",
    # the session's own end check: no child process, no /dev/shm entry (runs last)
    "tests/test_session_end.py::test_session_leaves_no_process_and_no_shared_memory",
]
TAG = "LABKIT_STRESS_TAG"
GRACE_S = 5.0


def _others_shm(names: set[str], tag: str) -> set[str]:
    """The entries of ``names`` a live process outside this round holds (another run on a
    shared machine): not this round's leftovers. As conftest's check, by pid instead of
    environment tag."""
    ours = {p.pid for p in _tagged(tag)}
    return _conftest._others_shm(names, ours)


def _tagged(tag: str) -> list[psutil.Process]:
    return _conftest.tagged_processes(tag, TAG)


def _kill(procs) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _round(n: int, python: str, timeout_s: float, tag: str) -> dict:
    env = {**os.environ, TAG: tag, "LABKIT_SCALE": "ci",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    shm_before = _conftest._shm_entries()
    t0 = time.monotonic()
    try:
        r = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        out, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = f"{e.stdout or ''}{e.stderr or ''}\nharness: pytest still running after {timeout_s} s"
        rc = "timeout"
    seconds = time.monotonic() - t0
    deadline = time.monotonic() + GRACE_S
    while (left := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    _kill(left)  # so that one round's leak does not disturb the next
    while ((shm := sorted((new := _conftest._shm_entries() - shm_before) - _others_shm(new, tag)))
           and time.monotonic() < deadline):
        time.sleep(0.1)
    counts = {k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}", out)) else 0
              for k in ("passed", "failed", "error")}
    return {"round": n, "rc": rc, "seconds": round(seconds, 1), **counts,
            "internal_error": "INTERNALERROR" in out, "leftover_processes": len(left),
            "leftover_shm": shm,
            "output": out if rc != 0 or left or shm else ""}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="rounds of the tests (default 50)")
    ap.add_argument("--busy", type=int, default=2, help="busy CPU loops beside them (2)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one round may take")
    ap.add_argument("--json", type=Path, help="write every round's figures here")
    args = ap.parse_args(argv)

    # stoppable with Ctrl-C or kill even when started in the background (SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    rounds, t0, tag = [], time.monotonic(), ""
    try:
        for n in range(1, args.runs + 1):
            tag = f"{uuid.uuid4().hex}-{n}"
            r = _round(n, sys.executable, args.timeout, tag)
            rounds.append(r)
            bad = (r["rc"] != 0 or r["internal_error"] or r["leftover_processes"]
                   or r["leftover_shm"])
            print(f"round {n:3d}/{args.runs}: rc {r['rc']}, {r['passed']} passed, "
                  f"{r['failed']} failed, {r['error']} errors, internal error "
                  f"{'YES' if r['internal_error'] else 'no'}, leftovers "
                  f"{r['leftover_processes']} processes {len(r['leftover_shm'])} shm, "
                  f"{r['seconds']} s", flush=True)
            if bad:
                print(r["output"][-6000:], flush=True)
    except (KeyboardInterrupt, SystemExit):  # stopped early: report the rounds that ran
        print(f"stopped after {len(rounds)} of {args.runs} rounds", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
        _kill(_tagged(tag))  # an interrupted round's pytest, workers, fork server
    summary = {
        "rounds": len(rounds),
        "busy_loops": args.busy,
        "failed_rounds": sum(r["rc"] != 0 for r in rounds),
        "failed_tests": sum(r["failed"] + r["error"] for r in rounds),
        "internal_errors": sum(r["internal_error"] for r in rounds),
        "leftover_processes": sum(r["leftover_processes"] for r in rounds),
        "leftover_shm": sum(len(r["leftover_shm"]) for r in rounds),
        "minutes": round((time.monotonic() - t0) / 60, 1),
    }
    print("summary: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rounds": rounds}, indent=1))
    ok = not any(summary[k] for k in ("failed_rounds", "failed_tests", "internal_errors",
                                      "leftover_processes", "leftover_shm"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
