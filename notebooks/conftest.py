"""nbval's report of a checked cell, completed with the stream text it leaves out; each
chapter's kernel stopped the way JupyterLab stops it, not killed, and one that dies at its
start quoting its stderr; and every chapter collected once more per start method named in
``--start-methods`` (spawn, forkserver, or ``macos``: spawn with the Linux-only facilities
hidden), less its cells tagged ``same-under-every-start-method``.

When a checked cell prints something its committed outputs lack, nbval says only
"Unexpected output fields from running code: {'stderr'}". A worker's or a library's
message on stderr is the one clue to an intermittent failure, so the failing report
gets a section with every stream the cell printed this run.
"""

from __future__ import annotations

import os
import tempfile

import nbval.kernel
import pytest
from nbval.kernel import RunningKernel
from nbval.plugin import IPyNbFile

import labkit as lk

STARTMETHOD = lk.paths.REPO_ROOT / "tests" / "startmethod"
# A cell whose outcome the kernel's default start method cannot change: every loader in it
# names its multiprocessing_context, or it runs in a Python process of its own (03b's
# break matrix). The start-method copies skip it; the plain run keeps it.
SAME_UNDER_EVERY_METHOD = "same-under-every-start-method"
# A checked cell whose output needs a Linux-only facility (labkit/facilities.py): the
# ``[macos]`` copy runs it, and it must not fail, but does not compare its output.
CHECKED_ON_LINUX = "checked-on-linux"
# ``--start-methods`` entries: a start method, or ``macos``: spawn (macOS's default) with the
# Linux-only facilities hidden (LABKIT_HIDE_LINUX, tests/startmethod/sitecustomize.py).
COPIES = {"fork": ("fork", False), "spawn": ("spawn", False),
          "forkserver": ("forkserver", False), "macos": ("spawn", True)}


def _stop_gracefully(self) -> None:
    """nbval ends each kernel with ``shutdown_kernel(now=True)``: SIGKILL to its process
    group, multiprocessing's resource tracker included. Under spawn and forkserver a queue's
    or an event's semaphore keeps its name in /dev/shm (``sem.mp-...``) until its owner
    unlinks it or the tracker cleans up after it; both killed, every semaphore of a loader
    still alive at the end stayed behind (30 after chapters 09 and 10 under forkserver). A
    shutdown request lets the kernel's Python exit and clean up; a kernel that does not
    answer is still killed after jupyter_client's wait.

    That wait is 1 s, not jupyter_client's 5: ipykernel first SIGTERMs the kernel's children
    and waits for them to go, and the tracker ignores SIGTERM, so every kernel that started
    one waited for jupyter_client's SIGTERM, at half the wait: 2.6 s after each chapter, under
    each start method (about 130 s of a CI run, issue 44). At 0.5 s the kernel's workers are
    gone; its tracker, not signalled, unlinks the semaphores as the kernel ends."""
    self.kc.stop_channels()
    self.km.shutdown_wait_time = 1.0
    self.km.shutdown_kernel(now=False)
    del self.km


RunningKernel.stop = _stop_gracefully
_start_new_kernel = nbval.kernel.start_new_kernel


def _start_saying_why(*args, **kwargs):
    """nbval sends a kernel's stderr to /dev/null, so a kernel that dies at its start says
    only "Kernel died before replying to kernel_info" (seen once, three xdist workers, a
    fresh clone). Its stderr goes to an unlinked temporary file instead, quoted on failure."""
    with tempfile.TemporaryFile("w+") as err:
        kwargs["stderr"] = err
        try:
            return _start_new_kernel(*args, **kwargs)
        except RuntimeError as e:
            err.seek(0)
            raise RuntimeError(f"{e}; the kernel's stderr ends:\n{err.read()[-4000:]}") from e


nbval.kernel.start_new_kernel = _start_saying_why


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    outputs = getattr(item, "test_outputs", None)  # nbval's cell item: this run's outputs
    if report.when != "call" or not report.failed or not outputs:
        return
    for out in outputs:
        if out.get("output_type") == "stream":
            report.sections.append((f"this run's {out['name']} of the cell", out["text"]))


# -- every chapter under each start method, in the one session ---------------------------

def pytest_addoption(parser):
    parser.addoption(
        "--start-methods", default="", metavar="M,M",
        help="collect every notebook once more per entry (spawn, forkserver, fork, or macos: "
             "spawn with the Linux-only facilities hidden), its kernel (and every process it "
             "starts) taking that method as the default")


class StartMethodNotebook(IPyNbFile):
    """A chapter collected once more, as ``notebooks/NN_name.ipynb[spawn]``: its kernel is
    started with ``tests/startmethod`` on ``PYTHONPATH`` and ``LABKIT_START_METHOD`` set, so
    its sitecustomize makes ``method`` multiprocessing's default in the kernel and in every
    process the kernel starts, as on macOS (spawn) or Linux from Python 3.14 (forkserver).
    ``[macos]`` is spawn with ``LABKIT_HIDE_LINUX=1`` as well: what a Mac lacks is gone
    (issue 33), and a cell tagged ``checked-on-linux`` runs without its output compared.

    Issue 22 ran these as two more pytest sessions after ``make test``; in one session the
    xdist workers take the longest files first across all of them (issue 32: CI time), and
    the session-end leak check sees all of them. The fork server preloads torch
    (``LABKIT_FORKSERVER_PRELOAD``, see the sitecustomize). Chapter 13's traces go to a
    ``runs/`` folder per method: the same chapter may run under two methods at once.
    """

    def __init__(self, *args, method: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.method = method

    def setup(self):
        method, hide_linux = COPIES[self.method]
        env = {"LABKIT_START_METHOD": method, "LABKIT_FORKSERVER_PRELOAD": "torch",
               "LABKIT_HIDE_LINUX": "1" if hide_linux else "",
               "LABKIT_RUNS": str(lk.paths.runs_dir() / f"start-method-{self.method}"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(STARTMETHOD),
                                                           os.environ.get("PYTHONPATH")]))}
        with pytest.MonkeyPatch.context() as mp:  # the kernel takes this process's environment
            for name, value in env.items():
                mp.setenv(name, value)
            super().setup()

    def collect(self):
        """nbval's cells, those tagged ``SAME_UNDER_EVERY_METHOD`` skipped saying why:
        running them again under this method would repeat the plain run's experiment
        (03b's break matrix names all three methods itself: 70-110 s per copy)."""
        hide_linux = COPIES[self.method][1]
        for cell in super().collect():
            tags = cell.cell.metadata.get("tags", ())
            if SAME_UNDER_EVERY_METHOD in tags:
                cell.add_marker(pytest.mark.skip(
                    reason=f"{SAME_UNDER_EVERY_METHOD}: runs in the plain run only"))
            if hide_linux and CHECKED_ON_LINUX in tags:
                cell.options["check"] = False   # it runs; its output says what is missing
            yield cell


class _CollectUnder:
    """A plugin per ``--start-methods`` entry (a ``pytest_collect_file`` returns one node):
    each notebook nbval collects, once more under that method."""

    def __init__(self, method: str):
        self.method = method

    def pytest_collect_file(self, file_path, parent):
        option = parent.config.option
        if file_path.suffix != ".ipynb" or not (option.nbval or option.nbval_lax):
            return None
        if not file_path.is_relative_to(parent.config.rootpath):
            return None   # pytest 8 visits the folders above an argument (a stray /tmp/x.ipynb)
        name = f"{file_path.name}[{self.method}]"
        nodeid = f"{file_path.relative_to(parent.config.rootpath).as_posix()}[{self.method}]"
        return StartMethodNotebook.from_parent(parent, path=file_path, name=name,
                                               nodeid=nodeid, method=self.method)


def pytest_configure(config):
    for method in filter(None, config.option.start_methods.split(",")):
        if method not in COPIES:
            raise pytest.UsageError(f"--start-methods: {method!r} is not one of {sorted(COPIES)}")
        config.pluginmanager.register(_CollectUnder(method), f"labkit-start-method-{method}")
