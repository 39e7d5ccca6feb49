"""nbval's report of a checked cell, completed with the stream text it leaves out.

When a checked cell prints something its committed outputs lack, nbval says only
"Unexpected output fields from running code: {'stderr'}". A worker's or a library's
message on stderr is the one clue to an intermittent failure, so the failing report
gets a section with every stream the cell printed this run.
"""

from __future__ import annotations

import pytest


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
