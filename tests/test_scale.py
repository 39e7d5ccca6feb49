"""labkit.scale: scale names and the one table of scale-dependent knobs (chapter 00)."""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.errors import ScaleError
from labkit.scale import KNOBS, SCALES


def test_every_knob_has_a_value_at_every_scale():
    for name, row in KNOBS.items():
        assert set(row) == set(SCALES), name


def test_knob_reads_the_scale_argument_else_labkit_scale(monkeypatch):
    assert lk.knob("repeats", "ci") == KNOBS["repeats"]["ci"]
    assert lk.knob("repeats", " Full ") == KNOBS["repeats"]["full"]
    monkeypatch.setenv("LABKIT_SCALE", "workshop")
    assert lk.knob("dashboard_s") == KNOBS["dashboard_s"]["workshop"]


def test_a_list_knob_is_a_copy():
    buffers = lk.knob("shuffle_buffers", "ci")
    buffers.append(10**6)
    assert lk.knob("shuffle_buffers", "ci") == KNOBS["shuffle_buffers"]["ci"] != buffers


def test_unknown_knob_and_scale_are_named():
    with pytest.raises(KeyError, match="no scale knob 'repeat'.*repeats"):
        lk.knob("repeat", "ci")
    with pytest.raises(ScaleError, match="'huge' is not a scale"):
        lk.knob("repeats", "huge")


def test_ci_is_no_bigger_than_workshop():
    """ci exists to be quick: no knob may make a ci run do more than a workshop run."""
    for name, row in KNOBS.items():
        ci, workshop = row["ci"], row["workshop"]
        if isinstance(ci, list):
            assert len(ci) <= len(workshop), name
        elif ci is not None and workshop is not None:
            assert ci <= workshop, name
