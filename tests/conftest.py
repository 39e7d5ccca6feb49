"""Shared test set-up: a private data and records folder, cached ci fixtures, a leak check.

* Every test runs with LABKIT_DATA and LABKIT_RECORDS pointing at this session's temporary
  folders, so nothing is ever written into the checkout. A test that corrupts or regenerates
  data takes its own folder (the ``own_data`` fixture) and leaves the shared cache intact.
* ``ci_fixture(name)`` generates a ``ci`` fixture at most once per session.
* After every test, no DataLoader worker may outlive it: leftovers get a few seconds to
  exit, then the test fails naming them (and they are stopped, so the next test starts clean).
* At the very end of the session (after the notebooks), the tests in ``test_session_end.py``
  (marked ``session_last``) check with ``session_leftovers`` that no process the session
  started and no new /dev/shm entry is left, and that the chapters' records are complete.
* Every process of the session writes its temp files in one folder of the session's
  (TMPDIR, ``_own_temp_folder``); anything left there at the end but the few expected names
  (``EXPECTED_IN_TEMP``) fails the run, and the folder is removed. /tmp stays as it was.
* ``make test`` runs the suite in two pytest-xdist workers (the Makefile says why): on 2
  cores much of its time is spent waiting for processes to start and stop. Files are the
  unit of work (a notebook's cells share one kernel) and the session-end file runs alone
  after every other file (``pytest_xdist_make_scheduler``). Every process the session starts carries
  ``SESSION_TAG`` in its environment, so the end check sees what any worker left, orphans
  included. A plain ``pytest`` (one process) works the same way.
"""

from __future__ import annotations

import gc
import getpass
import multiprocessing.util
import os
import shutil
import tempfile
import time
from pathlib import Path

import matrix
import psutil
import pytest
from gpu_gate import gpu_gate

from labkit.loading.loaders import worker_processes
from labkit.loading.processes import stop_processes
from labkit.optional import status

# LABKIT_SCALE is left alone on purpose: `make test` sets it to ci for the whole run.
_ENV = ("LABKIT_DATA", "LABKIT_RECORDS", "LABKIT_SPECS")
_TESTS = Path(__file__).resolve().parent
LEAK_GRACE_S = 5.0


def _grace_s() -> float:
    """The session-end checks' grace: ``LABKIT_LEAK_GRACE_S``, else ``LEAK_GRACE_S``."""
    return float(os.environ.get("LABKIT_LEAK_GRACE_S", LEAK_GRACE_S))
SESSION_TAG = "LABKIT_TEST_SESSION"
SESSION_END = "test_session_end.py"

_state: dict = {"dirs": None, "saved": None}


def _enter() -> None:
    """Point the kit at the session folders in ``os.environ`` (no-op if already there)."""
    if _state["dirs"] is None or _state["saved"] is not None:
        return
    _state["saved"] = {k: os.environ.get(k) for k in _ENV}
    os.environ["LABKIT_DATA"] = str(_state["dirs"]["data"])
    os.environ["LABKIT_RECORDS"] = str(_state["dirs"]["records"])
    os.environ.pop("LABKIT_SPECS", None)  # the checkout's data_fixtures/fixtures.toml


def _leave() -> None:
    """Restore the environment the session started with."""
    saved, _state["saved"] = _state["saved"], None
    for k, v in (saved or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session", autouse=True)
def labkit_session_env(tmp_path_factory):
    """Session-private data and records folders, set in ``os.environ``.

    Set for the process, not per test, so that module- and session-scoped fixtures (set up
    before any function-scoped one, e.g. a CLI run in a subprocess) see them too. Restored
    when the run leaves tests/ (notebooks collected after it keep the caller's settings).
    """
    _state["dirs"] = {"data": tmp_path_factory.mktemp("labkit-data"),
                      "records": tmp_path_factory.mktemp("labkit-records")}
    _enter()
    yield _state["dirs"]
    _leave()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _enter()  # back in tests/ after items from elsewhere
    gpu = item.get_closest_marker("gpu")
    if gpu is not None:  # ``@pytest.mark.gpu`` or ``@pytest.mark.gpu(probe="dali")``
        probe = gpu.kwargs.get("probe", "cuda")
        ok, reason = status(probe)
        if not ok:
            verdict, why = gpu_gate(probe, reason, status("cuda")[0], os.environ)
            (pytest.fail if verdict == "fail" else pytest.skip)(why)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # trylast: after this item's fixtures (monkeypatch included) have been torn down
    if nextitem is None or _TESTS not in Path(nextitem.path).resolve().parents:
        _leave()


@pytest.fixture(autouse=True)
def labkit_env(labkit_session_env, monkeypatch):
    """Re-assert the session folders for each test (undoes any test's leftover changes)."""
    monkeypatch.setenv("LABKIT_DATA", str(labkit_session_env["data"]))
    monkeypatch.setenv("LABKIT_RECORDS", str(labkit_session_env["records"]))
    monkeypatch.delenv("LABKIT_SPECS", raising=False)
    return labkit_session_env


@pytest.fixture(scope="session")
def ci_fixture(labkit_session_env):
    """``ci_fixture(name)``: the named ``ci`` fixture, generated at most once per session.

    Read-only by convention: tests that corrupt data use ``own_data`` instead.
    """
    from labkit.data.fixtures import fixture

    cache = {}

    def get(name: str):
        if name not in cache:
            # always the session cache, even when the calling test moved LABKIT_DATA
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("LABKIT_DATA", str(labkit_session_env["data"]))
                mp.delenv("LABKIT_SPECS", raising=False)
                cache[name] = fixture(name, "ci", progress=False)
        return cache[name]

    return get


@pytest.fixture
def own_data(tmp_path, monkeypatch):
    """A fresh, test-private LABKIT_DATA folder (for tests that corrupt or regenerate)."""
    folder = tmp_path / "labkit-data"
    monkeypatch.setenv("LABKIT_DATA", str(folder))
    return folder


class OwnTemp:
    """The test's own temp folder (``path``); ``left()``: what is still in it."""

    def __init__(self, path: Path):
        self.path = path

    def left(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir())


@pytest.fixture
def own_tmp(monkeypatch):
    """A temp folder of the test's own, for this process (``tempfile``) and its children
    (``TMPDIR``): what a library leaves in /tmp (lock files, staging and log folders) is
    the test's to see, and no other test's files are mixed in.

    A short path next to /tmp's, not under ``tmp_path``: multiprocessing puts its AF_UNIX
    sockets there (``pymp-*/listener-*``, torch's file-descriptor hand-over among them), and
    a socket path past 107 bytes fails; under xdist ``tmp_path`` alone is 70 and more.
    """
    folder = Path(tempfile.mkdtemp(prefix="lkt-"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield OwnTemp(folder)
    shutil.rmtree(folder, ignore_errors=True)


class ShmSince:
    """/dev/shm as a test found it; ``left()``: entries made since and still there after
    ``grace_s`` (default ``LEAK_GRACE_S``), except those a live process outside this one and
    its children maps (the other xdist worker's, another session's on a shared machine: see
    ``_others_shm``).

    The grace is for the other worker's entries that nobody maps for a moment: a spawn
    kernel's ``sem.mp-...`` outlive its exit until its resource tracker unlinks them (CI,
    stop 49: eleven such semaphores failed a test that made none).
    """

    def __init__(self, grace_s: float = LEAK_GRACE_S):
        self.before, self.grace_s = _shm_entries(), grace_s

    def left(self) -> list[str]:
        return _shm_left(self.before, _my_pids(), self.grace_s)


@pytest.fixture
def shm_since() -> ShmSince:
    return ShmSince()


# worker_processes() leaves out multiprocessing's resource tracker and fork server, but
# still counts the workers the fork server forks.
_leftover_workers = worker_processes


@pytest.fixture
def live_workers():
    """``live_workers()``: child processes still running (see ``worker_processes``)."""
    return _leftover_workers


@pytest.fixture(autouse=True)
def no_leftover_workers():
    """Fail a test that leaves a DataLoader worker (or any child process) it started running.

    Children already alive before the test (owned by a module or session fixture) are not
    its leak.
    """
    before = {p.pid for p in _leftover_workers()}

    def new_ones():
        return [p for p in _leftover_workers() if p.pid not in before]

    yield
    left = new_ones()
    if not left:
        return
    # An error re-raised from a worker holds torch's iterator in a reference cycle (its
    # workers live until the collector runs; chapter 03): collected, not a leak of the test.
    # Only then: a full collection costs 0.08-0.15 s with torch loaded, and ran after each of
    # the ~1,000 tests (issue 44: CI time).
    gc.collect()
    deadline = time.monotonic() + LEAK_GRACE_S
    left = new_ones()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = new_ones()
    if not left:
        return
    names = []
    for p in left:
        try:
            names.append(f"pid {p.pid} ({p.name()}): {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            names.append(f"pid {p.pid}")
    try:  # stop them so one leak does not fail every later test
        stop_processes(left)
    except RuntimeError:
        pass  # torch's SIGCHLD handler reporting the worker just killed: expected here
    pytest.fail(
        f"{len(left)} child process(es) outlived the test by {LEAK_GRACE_S:.0f} s "
        f"(a DataLoader iterator not shut down?):\n  " + "\n  ".join(names),
        pytrace=False,
    )


# -- shared memory ------------------------------------------------------------------------

_SHM = Path("/dev/shm")


def _shm_entries() -> set[str]:
    try:
        return {p.name for p in _SHM.iterdir()}
    except OSError:  # no /dev/shm (macOS): nothing to check
        return set()


def _shm_left(before: set[str], mine: set[int], grace_s: float, poll_s: float = 0.2) -> list[str]:
    """The /dev/shm entries made since ``before`` and not another live process's (``mine``:
    the pids whose entries count), once they have had ``grace_s`` to go: a worker unlinks its
    segment shortly after it exits, a kernel's tracker its semaphores. Garbage holding them
    (an iterator in a traceback's reference cycle) is collected first: not a leak."""
    deadline = time.monotonic() + grace_s
    while True:
        gc.collect()
        new = _shm_entries() - before
        left = sorted(new - _others_shm(new, mine))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(poll_s)


def _my_pids(*more) -> set[int]:
    """This process and its children (recursive), plus ``more`` psutil processes."""
    return {os.getpid(), *(c.pid for c in psutil.Process().children(recursive=True)),
            *(p.pid for p in more)}


def pytest_sessionstart(session):
    session.config._labkit_shm = _shm_entries()
    session.config._labkit_t0 = time.time()


@pytest.fixture
def notebook_records(request) -> list[Path]:
    """The checkpoint records the notebooks wrote in this session.

    Notebooks keep the caller's settings (see ``labkit_session_env``): they write to the
    caller's LABKIT_RECORDS, else the checkout's ``records/``. Only files written since the
    session started count.
    """
    saved = (_state["saved"] or {}).get("LABKIT_RECORDS")
    folder = Path(saved) if saved else _TESTS.parent / "records"
    t0 = request.config._labkit_t0
    return sorted(p for p in folder.glob("*.json") if p.stat().st_mtime >= t0) \
        if folder.is_dir() else []


# -- the end of the session: real tests, run last ----------------------------------------------

SESSION_LAST = "session_last"


def _xdist_worker() -> bool:
    """This process is an xdist worker (not a pytest a test started inside one: it inherits
    PYTEST_XDIST_WORKER, so the environment cannot tell)."""
    return _state.get("xdist_worker", False)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{SESSION_LAST}: run after everything else in the session (the tests in "
        f"{SESSION_END}: the leak check, the chapters' records)")
    _state["xdist_worker"] = hasattr(config, "workerinput")
    matrix.check_expected_torch()
    if not _xdist_worker():  # the session's own tag, even inside another session's test
        os.environ[SESSION_TAG] = f"{os.getpid()}-{time.time_ns()}"
        _own_temp_folder()


# What a session may leave in its temp folder: not a run's leftovers.
EXPECTED_IN_TEMP = {
    # multiprocessing's folder for its sockets (pymp-*), removed at a clean exit: a notebook
    # kernel that started a resource tracker (spawn, forkserver, shared memory) is SIGTERMed
    # by jupyter_client 2.5 s into its shutdown, because ipykernel (7.4) first SIGTERMs its
    # own children for up to 14 s and the tracker ignores SIGTERM; no atexit runs then
    "pymp-": "a notebook kernel's multiprocessing folder (jupyter_client ends it by SIGTERM)",
    "ray": "Ray's session folders and logs, kept by design",
}


def _own_temp_folder() -> None:
    """Every process of the session writes its temp files in one folder of the session's
    (TMPDIR): what is left there at the end is checked (``pytest_sessionfinish``), then
    removed. pytest's own ``tmp_path`` folders stay where they were."""
    temp = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", temp)
    # torch's compile cache where torch puts it by default, kept from run to run
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                          os.path.join(temp, f"torchinductor_{getpass.getuser()}"))
    root = tempfile.mkdtemp(prefix="labkit-test-")
    os.environ["TMPDIR"] = tempfile.tempdir = root
    _state["temp"] = Path(root)


def _left_in_temp() -> list[str]:
    root = _state.get("temp")
    if root is None or not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if not any(p.name.startswith(k) for k in EXPECTED_IN_TEMP))


def tagged_processes(tag: str, var: str = SESSION_TAG) -> list[psutil.Process]:
    """Live processes whose environment at start carried ``var=tag``: everything a session
    (or a stress round) started with exec, and what those forked, wherever it was reparented."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(var) == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def _session_processes() -> list[psutil.Process]:
    """What this session started that still runs, pytest's own processes left out.

    This process's descendants (``worker_processes``: without multiprocessing's helpers),
    and every process carrying the session's tag: a kernel or worker another xdist worker
    left, or one orphaned by a process that exited. /proc shows a process's environment as
    it was at exec, so the tag finds exec'd processes and what they forked; forks of the
    process that set it are its descendants. Not counted: this process and its ancestors,
    and, under xdist, the other workers (siblings, idle until xdist's teardown).
    """
    me = psutil.Process()
    tagged = tagged_processes(os.environ.get(SESSION_TAG, ""))  # one scan of every process
    judged = {me.pid, *(p.pid for p in me.parents())}
    found: dict[int, psutil.Process] = {}
    # xdist keeps a worker that ended its session alive (idle) until the whole run ends,
    # with multiprocessing's helpers if it started them: its descendants, as ours, are
    # judged by ``worker_processes`` (helpers are not leftovers)
    for proc in [me, *(_siblings(me, tagged) if _xdist_worker() else [])]:
        try:
            found.update((p.pid, p) for p in _leftover_workers(proc.pid))
            judged |= {proc.pid, *(p.pid for p in proc.children(recursive=True))}
        except psutil.Error:
            pass
    found.update((p.pid, p) for p in tagged if p.pid not in judged)
    return list(found.values())


def _siblings(me: psutil.Process, tagged: list[psutil.Process]) -> list[psutil.Process]:
    """In an xdist worker: the session's other workers (the controller's other children)."""
    out = []
    for p in tagged:
        try:
            if p.pid != me.pid and p.ppid() == me.ppid():
                out.append(p)
        except psutil.Error:
            pass
    return out


@pytest.hookimpl(optionalhook=True)  # a plain pytest, without xdist, has no such hook
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (any ``--dist`` but ``each``): one file per unit of work, the
    session-end file last, on one worker, once every other worker has ended its session.

    A notebook's cells must run in order in one kernel, so its file is one unit (nbval's
    advice too). When only the session-end unit is left, one worker is kept and the others
    are told to shut down (they finish their tests, tear down their fixtures: a JupyterLab
    server, a browser). When the kept one is alone, it gets the unit, then the shutdown. An
    xdist worker runs a test only once it knows the next one or has been told to shut down:
    the kept worker's last test waits until then, and the unit's last test runs only after
    that shutdown, when nothing else is left anywhere.
    """
    def _is_end(scope: str) -> bool:
        return Path(scope).name == SESSION_END

    if config.getoption("dist") == "each":
        return None  # every test on every worker: xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling  # called only where xdist is installed

    config.option.loadscopereorder = False  # the collection's order is ours: longest first

    class SessionEndLast(LoadFileScheduling):
        kept = None

        def _only_end_left(self) -> bool:
            return list(map(_is_end, self.workqueue)) == [True]

        def _assign_work_unit(self, node):
            for scope in [s for s in self.workqueue if _is_end(s)]:
                self.workqueue.move_to_end(scope)
            if self._only_end_left() and len(self.nodes) > 1:
                return  # not while another worker runs
            super()._assign_work_unit(node)

        def _reschedule(self, node):
            if self._only_end_left() and len(self.nodes) > 1:
                self.kept = self.kept or node
                for other in self.nodes:
                    if other is not self.kept and not other.shutting_down:
                        other.shutdown()
                return
            super()._reschedule(node)

        def remove_node(self, node):  # a worker ended its session (or crashed)
            crashed = super().remove_node(node)
            if self._only_end_left() and len(self.nodes) == 1:
                self._reschedule(self.nodes[0])  # alone now: the unit, then the shutdown
            return crashed

    return SessionEndLast(config, log)


# Seconds each file takes (wall time summed over its tests, printed at the end of every
# session), for the files that take longest. Under pytest-xdist a file is one unit of work,
# handed out in collection order: a long file handed out last leaves the other worker idle
# while it finishes, so the long ones go first (longest-processing-time first). A chapter
# under a forced start method is its own file (``03_map_style_vs_iterable.ipynb[spawn]``,
# notebooks/conftest.py). Measured at ci scale on a 2-core machine, in one session with
# ``--start-methods=macos,forkserver`` (a quiet fresh clone of 671f642, issue 45: its 25
# slowest files); a file not listed
# follows them, most tests first.
FILE_SECONDS = {
    "06_webdataset.ipynb[macos]": 156, "test_fault_matrix.py": 135,
    "03b_worker_processes.ipynb": 120, "04_scaling_out.ipynb[macos]": 114,
    "08c_resume_in_libraries.ipynb[macos]": 101, "08_shuffling_and_resume.ipynb[macos]": 86,
    "09_prefetch.ipynb[macos]": 83, "11c_epochs_and_resume.ipynb[macos]": 80,
    "16_capstone.ipynb[macos]": 74, "03_map_style_vs_iterable.ipynb[macos]": 70,
    "test_diagnose.py": 64, "10_decode_and_augment.ipynb[macos]": 57,
    "09c_workers_and_tuning.ipynb[macos]": 56, "07_hf_datasets_streaming.ipynb[macos]": 54,
    "12_storage_formats.ipynb[macos]": 53, "08c_resume_in_libraries.ipynb[forkserver]": 52,
    "04b_uneven_shards.ipynb[macos]": 52, "05_parquet_and_arrow.ipynb[macos]": 51,
    "test_objstore_systems.py": 47, "test_formats.py": 47, "00_start_here.ipynb[macos]": 45,
    "12b_more_formats.ipynb[macos]": 43, "15_video_and_audio.ipynb[macos]": 42,
    "13_profiling.ipynb[macos]": 42, "07_hf_datasets_streaming.ipynb[forkserver]": 40,
    "test_room.py": 45,   # alone on 2 cores, 2026-12-04 (issue 47)
}


def _longest_first(items: list) -> list:
    """``items`` regrouped by file (xdist's unit: the node id before ``::``), the
    ``FILE_SECONDS`` files longest first, then the others with the most tests first; each
    file's own order is kept."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(unit: str):
        return -FILE_SECONDS.get(Path(unit).name, 0), -len(files[unit])

    return [item for unit in sorted(files, key=key) for item in files[unit]]


_FILE_TIMES: dict[str, float] = {}


def pytest_report_header(config):
    return matrix.header()


def pytest_runtest_logreport(report):
    """Sum each file's setup, call and teardown times (in the controller under xdist), and
    count each outcome into the tested matrix's cell (tests/matrix.py)."""
    if not _xdist_worker():
        name = report.nodeid.split("::")[0]
        _FILE_TIMES[name] = _FILE_TIMES.get(name, 0.0) + report.duration
        matrix.count(report)


def pytest_terminal_summary(terminalreporter):
    """The slowest files: how ``FILE_SECONDS`` is kept true, and where CI's time goes."""
    if not _FILE_TIMES:
        return
    slowest = sorted(_FILE_TIMES.items(), key=lambda kv: -kv[1])[:25]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} files (s, summed over tests; "
                                    f"all {len(_FILE_TIMES)} files: "
                                    f"{sum(_FILE_TIMES.values()):.0f} s)")
    for name, took in slowest:
        terminalreporter.write_line(f"{took:8.1f}  {name}")


def pytest_collection_modifyitems(session, config, items):
    """The longest files first (``FILE_SECONDS``), and ``session_last`` tests after every
    other item, the notebooks included.

    Chapter 15 and 15b need FFmpeg's shared libraries (torchcodec): without them they are
    skipped with what to install, except under CI=true, where it runs and fails saying so.
    """
    items[:] = _longest_first(items)
    last = [i for i in items if i.get_closest_marker(SESSION_LAST)]
    stray = [i.nodeid for i in last if Path(str(i.path)).name != SESSION_END]
    if stray:  # under xdist only that file is held back until the end
        raise pytest.UsageError(f"session_last tests must live in {SESSION_END}: {stray}")
    if last:
        items[:] = [i for i in items if not i.get_closest_marker(SESSION_LAST)] + last
    media = [i for i in items if Path(str(i.path)).name in ("15_video_and_audio.ipynb",
                                                               "15b_audio_spdl_nvdec.ipynb")]
    if media and os.environ.get("CI") != "true":
        ok, reason = status("ffmpeg")
        if not ok:
            for i in media:
                i.add_marker(pytest.mark.skip(reason=reason))


def _shm_mappers() -> dict[int, set[int]]:
    """/dev/shm inode -> the pids that have it mapped. By inode, not name: glibc creates a
    named semaphore under a temporary name, maps it, then links it to ``sem.mp-...``, so its
    creator's mapping shows the temporary (deleted) name."""
    try:
        dev = _SHM.stat().st_dev
    except OSError:
        return {}
    out: dict[int, set[int]] = {}
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            lines = maps.read_text().splitlines()
        except OSError:  # gone, or not ours to read
            continue
        for line in lines:
            f = line.split(maxsplit=5)
            if len(f) == 6 and f[5].startswith("/dev/shm/"):
                major, minor = (int(x, 16) for x in f[3].split(":"))
                if os.makedev(major, minor) == dev:
                    out.setdefault(int(f[4]), set()).add(int(maps.parent.name))
    return out


def _others_shm(names: set[str], mine: set[int]) -> set[str]:
    """The entries of ``names`` that belong to a live process outside this session: another
    pytest run's on a shared machine, not ours to report. torch's ``torch_<pid>_...`` names
    its process; multiprocessing's ``sem.mp-...`` is mapped by the processes using it."""
    import re

    others, mappers = set(), _shm_mappers() if names else {}
    for name in names:
        m = re.match(r"torch_(\d+)_", name)
        if m and int(m.group(1)) not in mine and psutil.pid_exists(int(m.group(1))):
            others.add(name)
            continue
        try:
            holders = mappers.get((_SHM / name).stat().st_ino)
        except OSError:  # gone meanwhile
            continue
        if holders and not holders & mine:
            others.add(name)
    return others


@pytest.fixture(scope="session")
def session_leftovers(request):
    """``session_leftovers()``: what this session left behind, as a list of problems.

    Processes the session started still alive (DataLoader workers, notebook kernels, torchrun
    ranks, see ``_session_processes``; not multiprocessing's resource tracker and fork server)
    and /dev/shm entries created since the session started. Both get
    ``LABKIT_LEAK_GRACE_S`` (default 5 s) to go away: a worker unlinks its segment shortly
    after it exits.
    """
    config = request.config

    def check() -> list[str]:
        # An iterator kept by a traceback's reference cycle (a test's pytest.raises) holds
        # its queues' semaphores (sem.mp-... under spawn / forkserver) until the collector
        # runs: garbage, not a leak.
        gc.collect()
        deadline = time.monotonic() + _grace_s()
        while (procs := _session_processes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        shm = _shm_left(getattr(config, "_labkit_shm", set()), _my_pids(*procs),
                        max(0.0, deadline - time.monotonic()), poll_s=0.1)
        problems = []
        for p in procs:
            try:
                what = f"{p.name()}: {' '.join(p.cmdline())[:120]}"
            except psutil.Error:
                what = "gone while listed"
            problems.append(f"process pid {p.pid} started by the session still alive ({what})")
        problems += [f"/dev/shm/{n} created during the session and still there" for n in shm]
        return problems

    return check


def pytest_sessionfinish(session, exitstatus):
    """After the whole suite, notebooks included: the tested matrix's record written
    (tests/matrix.py), and no shared-memory segment left behind.

    Not in an xdist worker: one that finishes first would count the other's live entries.
    """
    if _xdist_worker():
        return
    matrix.write(exitstatus)
    before = getattr(session.config, "_labkit_shm", set())
    leaked = _shm_left(before, _my_pids(*tagged_processes(os.environ.get(SESSION_TAG, ""))),
                       _grace_s())
    if leaked and exitstatus == 0:
        print(f"\nFAILED: shared memory left in /dev/shm after the suite: {leaked}")
        session.exitstatus = 1
    left = _left_in_temp()
    if left and exitstatus == 0:
        print(f"\nFAILED: left in the session's temp folder {_state['temp']} after the suite "
              f"(expected there only {', '.join(EXPECTED_IN_TEMP)}): {left}")
        session.exitstatus = 1
    if _state.get("temp") is not None and not left:
        # at exit, after multiprocessing has removed this process's own pymp- folder in it
        # (its finalizer has exitpriority -100; removing the folder now made that one print
        # a FileNotFoundError after the summary)
        multiprocessing.util.Finalize(None, shutil.rmtree, args=(_state["temp"],),
                                      kwargs={"ignore_errors": True}, exitpriority=-101)

