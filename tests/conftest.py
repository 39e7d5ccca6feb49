"""Shared test set-up: a private data and records folder, cached ci fixtures, a leak check.

* Every test runs with LABKIT_DATA and LABKIT_RECORDS pointing at this session's temporary
  folders, so nothing is ever written into the checkout. A test that corrupts or regenerates
  data takes its own folder (the ``own_data`` fixture) and leaves the shared cache intact.
* ``ci_fixture(name)`` generates a ``ci`` fixture at most once per session.
* After every test, no DataLoader worker may outlive it: leftovers get a few seconds to
  exit, then the test fails naming them (and they are stopped, so the next test starts clean).
* At the very end of the session (after the notebooks), a test marked ``session_last`` checks
  with ``session_leftovers`` that no child process and no new /dev/shm entry is left.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import psutil
import pytest

from labkit.loading.loaders import worker_processes
from labkit.loading.processes import stop_processes

# LABKIT_SCALE is left alone on purpose: `make test` sets it to ci for the whole run.
_ENV = ("LABKIT_DATA", "LABKIT_RECORDS", "LABKIT_SPECS")
_TESTS = Path(__file__).resolve().parent
LEAK_GRACE_S = 5.0

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
    if gpu is not None:  # ``@pytest.mark.gpu`` or ``@pytest.mark.gpu(probe=lk.dali_status)``
        from labkit.loading.prefetchers import cuda_status

        ok, reason = gpu.kwargs.get("probe", cuda_status)()
        if not ok:
            pytest.skip(reason)


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


# -- the end of the session: a real test, run last --------------------------------------------

SESSION_LAST = "session_last"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{SESSION_LAST}: run after everything else in the session (the end-of-"
        "session leak check in test_fault_matrix.py)")


def pytest_collection_modifyitems(session, config, items):
    """Move ``session_last`` tests after every other item, the notebooks included.

    Chapter 15 needs FFmpeg's shared libraries (torchcodec): without them its notebook is
    skipped with what to install, except under CI=true, where it runs and fails saying so.
    """
    last = [i for i in items if i.get_closest_marker(SESSION_LAST)]
    if last:
        items[:] = [i for i in items if not i.get_closest_marker(SESSION_LAST)] + last
    media = [i for i in items if Path(str(i.path)).name == "15_video_and_audio.ipynb"]
    if media and os.environ.get("CI") != "true":
        from labkit.media.backends import ffmpeg_status

        ok, reason = ffmpeg_status()
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

    Child processes still alive (DataLoader workers, notebook kernels, torchrun ranks; not
    multiprocessing's resource tracker and fork server) and /dev/shm entries created since
    the session started. Both get ``LABKIT_LEAK_GRACE_S`` (default 5 s) to go away: a worker
    unlinks its segment shortly after it exits.
    """
    config = request.config

    def check() -> list[str]:
        # An iterator kept by a traceback's reference cycle (a test's pytest.raises) holds
        # its queues' semaphores (sem.mp-... under spawn / forkserver) until the collector
        # runs: garbage, not a leak.
        gc.collect()
        grace = float(os.environ.get("LABKIT_LEAK_GRACE_S", LEAK_GRACE_S))
        before = getattr(config, "_labkit_shm", set())
        deadline = time.monotonic() + grace
        while True:
            procs = _leftover_workers()
            me = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
            new = _shm_entries() - before
            shm = sorted(new - _others_shm(new, me))
            if (not procs and not shm) or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        problems = []
        for p in procs:
            try:
                what = f"{p.name()}: {' '.join(p.cmdline())[:120]}"
            except psutil.Error:
                what = "gone while listed"
            problems.append(f"child process pid {p.pid} still alive ({what})")
        problems += [f"/dev/shm/{n} created during the session and still there" for n in shm]
        return problems

    return check


def pytest_sessionfinish(session, exitstatus):
    """After the whole suite, notebooks included: no shared-memory segment left behind."""
    before = getattr(session.config, "_labkit_shm", set())
    gc.collect()  # garbage holding semaphores is not a leak (see session_leftovers)
    deadline = time.monotonic() + float(os.environ.get("LABKIT_LEAK_GRACE_S", LEAK_GRACE_S))
    me = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    while ((leaked := (new := _shm_entries() - before) - _others_shm(new, me))
           and time.monotonic() < deadline):
        time.sleep(0.2)  # a worker's segment is unlinked shortly after it exits
    if leaked and exitstatus == 0:
        print(f"\nFAILED: shared memory left in /dev/shm after the suite: {sorted(leaked)}")
        session.exitstatus = 1

