"""lk.resume_trial counts lost and duplicated samples honestly, for good and bad loaders."""

from __future__ import annotations

import pytest
from contracts import check_resume

import labkit as lk


class Counting:
    """Batches of ids 0..n-1; a good state_dict, or one that forgets (lose) or lags (dup)."""

    def __init__(self, n=40, batch=4, bug=None):
        self.n, self.batch, self.bug, self.pos = n, batch, bug, 0

    def __iter__(self):
        while self.pos < self.n:
            lo = self.pos
            self.pos = min(self.n, lo + self.batch)
            yield (None, list(range(lo, self.pos)))

    def state_dict(self):
        shift = {"lose": self.batch, "dup": -self.batch}.get(self.bug, 0)
        return {"pos": self.pos + shift}

    def load_state_dict(self, state):
        self.pos = state["pos"]


def test_a_correct_loader_passes_with_identical_runs():
    trial = check_resume(lambda: Counting(), stops=(3, 2), name="good")
    assert trial.ok and [len(r.ids) for r in trial.runs] == [40, 40, 40]


@pytest.mark.parametrize("bug, lost, dup", [("lose", 4, 0), ("dup", 0, 4)])
def test_lost_and_duplicated_samples_are_counted(bug, lost, dup):
    trial = lk.resume_trial(lambda: Counting(bug=bug), stops=(3, 2), name=bug)
    once, twice = trial.runs[1], trial.runs[2]
    assert (once.lost, once.duplicated) == (lost, dup)
    assert (twice.lost, twice.duplicated) == (2 * lost, 2 * dup)
    assert not trial.ok
    with pytest.raises(AssertionError, match="resume changed the epoch"):
        check_resume(lambda: Counting(bug=bug), stops=(3, 2))


def test_table_is_deterministic_and_combines_trials():
    a = lk.resume_trial(lambda: Counting(), name="a")
    b = lk.resume_trial(lambda: Counting(bug="lose"), name="b")
    text = lk.instruments.format_resume_table([a, b])
    assert text.splitlines()[0].split() == ["loader", "run", "delivered", "lost", "duplicated",
                                            "same", "order"]
    assert text.splitlines()[-1].split() == ["b", "resumed", "twice", "32", "8", "0", "no"]
    assert str(a) == a.table()


class Breaks(Counting):
    """Restores, then raises on the next iteration (a loader whose resume is broken)."""

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.broken = True

    def __iter__(self):
        if getattr(self, "broken", False):
            raise IndexError("list index out of range")
        yield from super().__iter__()


def test_errors_after_resume_are_recorded_when_asked():
    with pytest.raises(IndexError):
        lk.resume_trial(lambda: Breaks(), stops=(3, 2))
    trial = lk.resume_trial(lambda: Breaks(), stops=(3, 2), record_errors=True, name="broken")
    once = trial.runs[1]
    assert once.error.startswith("IndexError after resume 1") and once.lost == 28
    assert not trial.ok and "(IndexError after resume 1" in trial.table()


def test_verdict_table_pins_what_holds_for_any_seed_and_version():
    """counts=False (the checked cells of chapters 07 and 08): a verdict per run and an
    error's type, never the counts or the library's message."""
    exact = lk.resume_trial(lambda: Counting(), name="exact")
    loses = lk.resume_trial(lambda: Counting(bug="lose"), name="loses")
    broken = lk.resume_trial(lambda: Breaks(), stops=(3, 2), record_errors=True, name="broken")
    lines = lk.instruments.format_resume_table([exact, loses, broken], counts=False).splitlines()
    assert lines[0].split() == ["loader", "run", "every", "sample", "once", "same", "order"]
    assert lines[2].split() == ["exact", "uninterrupted", "exact", "yes"]
    assert lines[-4].split() == ["loses", "resumed", "twice", "loses", "no"]
    assert lines[-1].endswith("(IndexError after resume 1)")
    assert "list index out of range" not in "\n".join(lines)
    assert not any(ch.isdigit() for line in lines[2:-2] for ch in line)
