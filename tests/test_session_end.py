"""The end of the session: run after every other test and notebook (conftest.py), alone, on
one process even under pytest-xdist (conftest's scheduler holds this file back). Only tests
marked ``session_last`` live here, and every such test lives here (conftest checks).

* No process the session started (DataLoader worker, notebook kernel, torchrun rank, server)
  and no /dev/shm entry it created is left, whichever worker started it.
"""

from __future__ import annotations

import pytest


@pytest.mark.session_last
def test_session_leaves_no_process_and_no_shared_memory(session_leftovers):
    """Runs last in the whole session (conftest moves it after the notebooks)."""
    problems = session_leftovers()
    assert not problems, "\n".join(problems)
