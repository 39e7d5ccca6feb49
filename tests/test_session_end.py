"""The end of the session: run after every other test and notebook (conftest.py), alone, on
one process even under pytest-xdist (conftest's scheduler holds this file back). Only tests
marked ``session_last`` live here, and every such test lives here (conftest checks).

* No process the session started (DataLoader worker, notebook kernel, torchrun rank, server)
  and no /dev/shm entry it created is left, whichever worker started it.
* The decision table (labkit.records.decisions) finds each figure in the records the
  chapters just wrote.
"""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.records.decisions import SITUATIONS


@pytest.mark.session_last
def test_session_leaves_no_process_and_no_shared_memory(session_leftovers):
    """Runs last in the whole session (conftest moves it after the notebooks)."""
    problems = session_leftovers()
    assert not problems, "\n".join(problems)


@pytest.mark.session_last
def test_every_figure_is_found_in_the_records_the_chapters_wrote(notebook_records):
    """After the notebooks ran (nbval, same session), each row finds its figure.

    The observation names and configs in SITUATIONS must match what the chapters record:
    a renamed loader label (chapter 08's ``lk.streams.TarShardStream``) once left a row saying
    "rerun chapter 08" on a machine that had just run it. Chapters whose notebooks did not
    run in this session are not checked.
    """
    records = lk.records.load_records(notebook_records) if notebook_records else []
    ran = {r["chapter"] for r in records}
    if not ran & {ev.chapter for s in SITUATIONS for ev in s.evidence}:
        pytest.skip("no chapter of the decision table ran in this session (run pytest on "
                    "notebooks/ too)")
    rows = lk.records.decision_table(records, scale=lk.resolve_scale())
    missing = [f"{e['chapter']}: {e['observation']} ({e['text']})" for r in rows
               for e in r["evidence"]
               if e["chapter"] in ran and e["value"] is None and not e["needs"]]
    assert not missing, "figures the decision table cannot find:\n" + "\n".join(missing)
