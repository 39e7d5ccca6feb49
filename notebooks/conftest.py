"""nbval's report of a checked cell, completed with the stream text it leaves out; and
each chapter's kernel stopped the way JupyterLab stops it, not killed.

When a checked cell prints something its committed outputs lack, nbval says only
"Unexpected output fields from running code: {'stderr'}". A worker's or a library's
message on stderr is the one clue to an intermittent failure, so the failing report
gets a section with every stream the cell printed this run.
"""

from __future__ import annotations

import pytest
from nbval.kernel import RunningKernel


def _stop_gracefully(self) -> None:
    """nbval ends each kernel with ``shutdown_kernel(now=True)``: SIGKILL to its process
    group, multiprocessing's resource tracker included. Under spawn and forkserver a queue's
    or an event's semaphore keeps its name in /dev/shm (``sem.mp-...``) until its owner
    unlinks it or the tracker cleans up after it; both killed, every semaphore of a loader
    still alive at the end stayed behind (30 after chapters 09 and 10 under forkserver). A
    shutdown request lets the kernel's Python exit and clean up; a kernel that does not
    answer is still killed after jupyter_client's wait."""
    self.kc.stop_channels()
    self.km.shutdown_kernel(now=False)
    del self.km


RunningKernel.stop = _stop_gracefully


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
