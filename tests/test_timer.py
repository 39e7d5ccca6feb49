"""lk.best_of: the one best-of-N timer (its logic, not how fast anything is)."""

from __future__ import annotations

import pytest
import torch

import labkit as lk


def test_best_of_warms_up_untimed_and_keeps_every_trial():
    calls = []
    t = lk.best_of(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6 and len(t.trials_s) == 4
    assert t.best_s == min(t.trials_s) and t.best_s <= t.median_s
    assert t.spread_pct >= 0


def test_best_of_takes_the_fastest_trial_on_a_fake_clock(monkeypatch):
    from labkit.instruments import timer

    ticks = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # trials of 3, 1 and 2 s
    monkeypatch.setitem(timer.CLOCKS, "wall", lambda: next(ticks))
    t = lk.best_of(lambda: None, repeats=3, warmup=0)
    assert t.trials_s == (3.0, 1.0, 2.0) and t.best_s == 1.0 and t.median_s == 2.0
    assert t.spread_pct == pytest.approx(200.0)


def test_best_of_cpu_clock_and_bad_arguments():
    assert lk.best_of(lambda: sum(range(1000)), repeats=2, clock="cpu").best_s >= 0
    with pytest.raises(ValueError, match="clock"):
        lk.best_of(lambda: None, clock="sundial")
    with pytest.raises(ValueError, match="repeats"):
        lk.best_of(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="sync"):
        lk.best_of(lambda: None, sync="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_cuda_sync_without_cuda_is_a_clear_error():
    with pytest.raises(lk.LabkitError, match="needs CUDA"):
        lk.best_of(lambda: None, sync="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sync_waits_for_the_kernels():
    x = torch.randn(2048, 2048, device="cuda")
    t = lk.best_of(lambda: x @ x, repeats=3, sync="cuda")
    assert t.best_s > 0


def test_cuda_sync_calls_synchronize_around_the_clock(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    lk.best_of(lambda: events.append("work"), repeats=2, warmup=1, sync="cuda")
    assert events == ["work", "sync", "work", "sync", "sync", "work", "sync"]
