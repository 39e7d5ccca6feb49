"""labkit.loading.loaders and labkit.tools.bench: DataLoaders that cannot hang a workshop
(chapter 01)."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import re
import signal
import time
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import labkit as lk
from labkit.loading import _torch_private as _tp
from labkit.loading.loaders import DEFAULT_TIMEOUT_S, make_loader, shutdown, worker_processes
from labkit.tools import bench


def _ids() -> TensorDataset:
    return TensorDataset(torch.arange(20))


def test_no_workers_accepts_worker_knobs_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = make_loader(_ids(), batch_size=4, num_workers=0, prefetch_factor=4,
                             persistent_workers=True, timeout=5)
        batches = list(loader)
    assert loader.num_workers == 0 and not loader.persistent_workers
    assert loader.timeout == 0  # nothing to time out without workers
    assert len(batches) == 5 and torch.cat([b[0] for b in batches]).tolist() == list(range(20))


def test_workers_get_a_timeout_and_the_knobs(live_workers):
    loader = make_loader(_ids(), batch_size=4, num_workers=2, prefetch_factor=3)
    assert loader.timeout == DEFAULT_TIMEOUT_S > 0
    assert loader.prefetch_factor == 3 and loader.persistent_workers is False
    custom = make_loader(_ids(), num_workers=1, timeout=7.5, persistent_workers=True,
                         drop_last=True, batch_size=8)
    assert custom.timeout == 7.5 and custom.persistent_workers and custom.drop_last
    it = iter(loader)
    try:
        got = sorted(i for batch in it for i in batch[0].tolist())
    finally:
        shutdown(it)
    assert got == list(range(20)) and live_workers() == []


def test_batch_size_and_shuffle_pass_through():
    loader = make_loader(_ids(), batch_size=None, shuffle=True)
    items = [int(x[0]) for x in loader]
    assert sorted(items) == list(range(20)) and items != list(range(20))


@pytest.mark.skipif(torch.cuda.is_available(), reason="pinning works with CUDA")
def test_pin_memory_without_cuda_warns_once_and_is_disabled():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = make_loader(_ids(), batch_size=5, pin_memory=True)
        list(loader)  # torch would warn again here if pinning were still on
    messages = [str(w.message) for w in caught]
    assert loader.pin_memory is False
    assert len(messages) == 1 and "pin_memory=True ignored" in messages[0], messages
    assert caught[0].filename == __file__  # points at the caller's line


class _Stuck(Dataset):
    """Item 0 takes far longer than the loader's timeout: a stuck worker."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 0:
            time.sleep(1.5)
        return i


def test_stuck_worker_times_out_instead_of_hanging(live_workers):
    loader = make_loader(_Stuck(), batch_size=1, num_workers=1, timeout=0.2)
    it = iter(loader)
    try:
        # without the timeout this next() would simply return item 0 after 1.5 s
        with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
            next(it)
    finally:
        shutdown(it)
    assert live_workers() == []


def test_shutdown_is_safe_on_anything():
    shutdown(None)
    shutdown(iter([1, 2]))
    closed = []

    def gen():
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    g = gen()
    next(g)
    shutdown(g)
    assert closed == [True]
    shutdown(g)  # twice is fine


def test_shutdown_stops_workers_mid_epoch(live_workers):
    loader = make_loader(TensorDataset(torch.arange(1000)), batch_size=4, num_workers=2,
                         timeout=30)
    it = iter(loader)
    next(it)
    assert len(live_workers()) == 2
    shutdown(it)
    assert live_workers() == []


def test_worker_processes_ignores_multiprocessing_helpers():
    loader = make_loader(_ids(), batch_size=10, num_workers=1, timeout=60,
                         multiprocessing_context="forkserver")
    it = iter(loader)
    try:
        assert len(list(it)) == 2
    finally:
        shutdown(it)
    assert worker_processes() == []


# -- bench ----------------------------------------------------------------------------------


def test_meter_overhead_benchmark_reports_its_figures():
    result = bench.run_benchmark("meter-overhead", batches=2000, pairs=2)
    figures = {"bare_batches_per_s", "overhead_pct", "overhead_ns_per_batch", "clock_read_ns",
               "clock_floor_pct", "exact_sizing_overhead_pct", "exact_sizing_ns_per_batch"}
    assert {"benchmark", "goal", "batches", "pairs", "verdict", "goal_met"} | figures <= set(result)
    assert result["benchmark"] == "meter-overhead" and "2%" in result["goal"]
    assert (result["batches"], result["pairs"]) == (2000, 2)
    assert isinstance(result["goal_met"], bool)
    assert result["verdict"] in ("pass", "fail", "inconclusive")
    for k in figures:  # values only: percentages are figures to print, not to assert on
        assert isinstance(result[k], float) and math.isfinite(result[k]), k
    lo, hi = result["overhead_pct_ci"]
    assert lo <= result["overhead_pct"] <= hi
    for k, v in result.items():  # anything added later stays JSON-ready
        assert isinstance(v, str | int | float | bool | list), k
    assert result["bare_batches_per_s"] > 0
    json.dumps(result)
    text = bench.format_result(result)
    assert text.startswith("benchmark meter-overhead") and "overhead_pct" in text


def test_unknown_benchmark_lists_the_available_ones():
    with pytest.raises(KeyError, match="no benchmark named 'nope'.*meter-overhead"):
        bench.run_benchmark("nope")
    assert "meter-overhead" in bench.BENCHMARKS


def test_a_worker_forked_by_the_fork_server_is_still_counted():
    """Excluding the fork server itself must not hide the workers it forks."""
    loader = make_loader(_ids(), batch_size=10, num_workers=1, timeout=60,
                         multiprocessing_context="forkserver", persistent_workers=True)
    it = iter(loader)
    next(it)
    try:
        assert len(worker_processes()) == 1
    finally:
        shutdown(loader)
    assert worker_processes() == []


# -- worker failures (every row of the fault matrix: tests/test_fault_matrix.py) -------------


def test_a_worker_failure_resets_a_persistent_loader(live_workers):
    from faulty_datasets import BreaksAt

    loader = make_loader(BreaksAt(how="exit"), batch_size=4, num_workers=2, timeout=30,
                         persistent_workers=True)
    pids = []
    for _ in range(2):  # the next epoch starts new workers instead of reusing the stopped ones
        with pytest.raises(RuntimeError,
                           match=r"worker 0 \(pid \d+\) exited with code 3") as info:
            list(loader)
        pids.append(re.search(r"worker 0 \(pid (\d+)\)", str(info.value)).group(1))
        assert live_workers() == []
    assert pids[0] != pids[1], pids  # a reused, stopped iterator would name the same worker


def test_worker_errors_raised_by_the_dataset_pass_through_unchanged(live_workers):
    from faulty_datasets import BreaksAt

    loader = make_loader(BreaksAt(n=8, bad=99), batch_size=4, num_workers=2, timeout=30)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # an exception from the dataset is torch's to re-raise, and the iterator stays usable
    # (torch lets a caller skip a bad batch), so its workers live on until shut down
    it = iter(make_loader(_Raises(), batch_size=2, num_workers=1, timeout=30))
    try:
        with pytest.raises(IndexError, match="no item 0"):
            next(it)
        assert len(live_workers()) == 1
    finally:
        shutdown(it)


class _Raises(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        raise IndexError(f"no item {i}")


def test_a_worker_killed_between_batches_is_reported_by_the_kit_alone(live_workers):
    """The worker dies while the main thread is elsewhere (here: asleep). torch's SIGCHLD
    handler would raise its own message right there, in whatever code was running (pytest's
    reporting included); the kit's workers are off that watch, so the next wait reports it."""
    loader = make_loader(TensorDataset(torch.arange(1000)), batch_size=4, num_workers=2,
                         timeout=30)
    it = iter(loader)
    try:
        next(it)
        victim = worker_processes()[0].pid
        os.kill(victim, signal.SIGKILL)
        time.sleep(1.0)  # SIGCHLD arrives and torch's handler runs in here
        with pytest.raises(RuntimeError, match=rf"worker \d \(pid {victim}\) was killed by "
                                               "SIGKILL: killed from outside"):
            for _ in it:
                pass
        assert live_workers() == []  # its other worker was stopped with it
    finally:
        shutdown(it)



def test_a_worker_that_dies_handing_over_a_batch_is_named(monkeypatch, live_workers):
    """A batch's tensors are fetched from the worker that sent it when the batch is read
    (torch's file-descriptor sharing). A worker that dies between sending and that fetch
    fails the read (connection refused or reset) while it may still count as alive, so
    torch's own check lets the OSError through. Simulated here: worker 0 is SIGKILLed and
    the read fails at once. The kit waits for the death and names the worker."""
    from labkit.loading import _torch_private

    real, fired = _torch_private.try_get, []

    def handover_fails(it, seconds):
        # the first read after a batch arrived (not "the second read": a batch that came out
        # of order is served from torch's buffer without one): worker 0 dies as it is read from
        if got and not fired:
            fired.append(True)
            os.kill(_torch_private.workers(it)[0].pid, signal.SIGKILL)
            raise ConnectionResetError(104, "Connection reset by peer")
        return real(it, seconds)

    monkeypatch.setattr(_torch_private, "try_get", handover_fails)
    loader = make_loader(TensorDataset(torch.arange(1000)), batch_size=4, num_workers=2,
                         timeout=30)
    it, got = iter(loader), []
    try:
        with pytest.raises(RuntimeError, match=r"^DataLoader worker \(pid\(s\) \d+\) exited "
                                               r"unexpectedly: worker 0 \(pid \d+\) was "
                                               "killed by SIGKILL") as info:
            for batch in it:
                got.append(batch)
        assert isinstance(info.value.__cause__, ConnectionResetError)
        assert live_workers() == []
    finally:
        shutdown(it)


class _SamplerThatBreaks:
    """Raises while the iterator is being built, after its worker started: plainly, or as
    torch's SIGCHLD handler would for a worker killed in that instant."""

    def __init__(self, kill: bool):
        self.kill, self.calls = kill, 0

    def __len__(self):
        return 4

    def __iter__(self):
        self.calls += 1
        if self.calls == 1:  # torch's first iter(), before it starts the workers
            return iter(range(4))
        (w,) = worker_processes()
        if not self.kill:
            raise RuntimeError("the sampler broke")
        os.kill(w.pid, signal.SIGKILL)
        time.sleep(0.5)  # dead, not yet reaped: as torch's handler finds it
        raise RuntimeError(f"DataLoader worker (pid {w.pid}) is killed by signal: Killed. ")


@pytest.mark.parametrize("kill", [False, True], ids=["error", "worker-death"])
def test_a_failure_while_the_iterator_is_built_stops_its_workers(kill, live_workers):
    loader = make_loader(_ids(), batch_size=None, sampler=_SamplerThatBreaks(kill),
                         num_workers=1, timeout=30)
    death = r"exited unexpectedly: worker 0 \(pid \d+\) was killed by SIGKILL"
    with pytest.raises(RuntimeError, match=death if kill else "^the sampler broke$"):
        iter(loader)
    assert live_workers() == []  # now, while the traceback still holds the iterator


def test_one_worker_timeout_rule_for_loaders_the_kit_does_not_build():
    from labkit.loading.loaders import DEFAULT_TIMEOUT_S, make_loader, worker_kwargs

    assert worker_kwargs(0) == {} and worker_kwargs(2) == {"timeout": DEFAULT_TIMEOUT_S}
    assert make_loader(range(4), num_workers=2).timeout == DEFAULT_TIMEOUT_S
    assert make_loader(range(4), num_workers=0).timeout == 0


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_stopped_mid_epoch_spawn_workers_first_hand_over_what_they_owe(method):
    """A spawn worker stopped while its feeder thread pickles a batch can abort at exit
    (labkit.loading._torch_private.drain says why); shutdown collects what is owed first."""
    loader = DataLoader(lk.WorkDataset(512, ms=1.0), batch_size=8, num_workers=2, timeout=60,
                        multiprocessing_context=multiprocessing.get_context(method))
    it = iter(loader)
    for i, _ in enumerate(it):
        if i == 2:
            break
    procs = _tp.workers(it)
    owed = _tp.owed_batches(it)
    assert owed > 0  # the prefetched batches: stopped mid-epoch for real
    assert _tp.drain(it) == (owed if method == "spawn" else 0)
    lk.shutdown(it)
    assert [p.exitcode for p in procs] == [0, 0]  # ended cleanly, not by a signal
