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


def test_table_is_deterministic_and_rows_combine_trials():
    a = lk.resume_trial(lambda: Counting(), name="a")
    b = lk.resume_trial(lambda: Counting(bug="lose"), name="b")
    text = b.table()
    assert text.splitlines()[0].split() == ["loader", "run", "delivered", "lost", "duplicated",
                                            "same", "order"]
    assert text.splitlines()[-1].split() == ["b", "resumed", "twice", "32", "8", "0", "no"]
    assert str(a) == a.table() == lk.resume_trial(lambda: Counting(), name="a").table()
    rows = [row for t in (a, b) for row in t.rows()]   # what a chapter hands pandas
    assert [(r["loader"], r["run"]) for r in rows][2:4] == [("a", "resumed twice"),
                                                            ("b", "uninterrupted")]
    assert rows[-1]["lost"] == 8 and rows[-1]["same_order"] is False


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


def test_verdicts_pin_what_holds_for_any_seed_and_version():
    """``verdict`` (the checked cells of chapters 07 and 08): exact, loses, duplicates and an
    error's type, never the counts or the library's message."""
    exact = lk.resume_trial(lambda: Counting(), name="exact")
    loses = lk.resume_trial(lambda: Counting(bug="lose"), name="loses")
    dup = lk.resume_trial(lambda: Counting(bug="dup"), name="dup")
    broken = lk.resume_trial(lambda: Breaks(), stops=(3, 2), record_errors=True, name="broken")
    verdicts = {t.name: [r["verdict"] for r in t.rows()] for t in (exact, loses, dup, broken)}
    assert verdicts["exact"] == ["exact"] * 3
    assert verdicts["loses"] == ["exact", "loses", "loses"]
    assert verdicts["dup"] == ["exact", "duplicates", "duplicates"]
    assert verdicts["broken"][1] == "loses (IndexError after resume 1)"
    assert not any(ch.isdigit() for v in verdicts.values() for w in v for ch in w.split("(")[0])
    assert "list index out of range" not in str(verdicts)
