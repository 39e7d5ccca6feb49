"""torch's own DataLoader where the kit relies on its behaviour (chapters 01 and 03), the kit's
worker_processes, and labkit_tools.bench.

No private torch name: each test drives a DataLoader through its public API and checks what
torch documents or does (the rules between its knobs, what ``timeout=`` raises, that ``del
it`` stops a multi-worker iterator's workers). Tests that kill a worker run in a process of
their own: tests/test_fault_matrix.py (worker crash rows).
"""

from __future__ import annotations

import gc
import json
import math
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from labkit.loading.loaders import worker_processes
from labkit_tools import bench


def _ids() -> TensorDataset:
    return TensorDataset(torch.arange(20))


def _none_left(within_s: float = 15.0) -> list:
    """The worker processes still alive once they have had ``within_s`` to end."""
    deadline = time.monotonic() + within_s
    while (left := worker_processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_torch_refuses_worker_knobs_without_workers():
    """The rule chapter 01 teaches: prefetch_factor, persistent_workers and a timeout need
    workers (torch refuses the first two when the DataLoader is built, a timeout at iter())."""
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(_ids(), batch_size=4, num_workers=0, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(_ids(), batch_size=4, num_workers=0, persistent_workers=True)
    with pytest.raises(AssertionError):
        iter(DataLoader(_ids(), batch_size=4, num_workers=0, timeout=60))
    nw, pf, pw = 0, 4, True  # a factory's knob values, written the way the chapters do
    loader = DataLoader(_ids(), batch_size=4, num_workers=nw, timeout=60 if nw > 0 else 0,
                        prefetch_factor=pf if nw > 0 else None, persistent_workers=pw and nw > 0)
    assert torch.cat([b[0] for b in loader]).tolist() == list(range(20))


def test_every_knob_with_workers(live_workers):
    loader = DataLoader(_ids(), batch_size=4, num_workers=2, timeout=60, prefetch_factor=3,
                        persistent_workers=False)
    assert (loader.timeout, loader.prefetch_factor, loader.persistent_workers) == (60, 3, False)
    it = iter(loader)
    got = sorted(i for batch in it for i in batch[0].tolist())
    del it
    assert got == list(range(20)) and _none_left() == []


class _Stuck(Dataset):
    """Item 0 takes far longer than the loader's timeout: a stuck worker."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 0:
            time.sleep(1.5)
        return i


def test_a_stuck_worker_times_out_instead_of_hanging():
    it = iter(DataLoader(_Stuck(), batch_size=1, num_workers=1, timeout=0.2))
    t0 = time.monotonic()
    # without the timeout this next() would simply return item 0 after 1.5 s
    with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0\.2 seconds$") as info:
        next(it)
    assert time.monotonic() - t0 < 1.4
    del info, it  # the traceback holds the iterator too
    assert _none_left() == []


def test_del_it_stops_the_workers_mid_epoch():
    it = iter(DataLoader(TensorDataset(torch.arange(1000)), batch_size=4, num_workers=2,
                         timeout=30))
    next(it)
    assert len(worker_processes()) == 2
    del it
    assert _none_left() == []


def test_persistent_workers_live_as_long_as_their_dataloader():
    loader = DataLoader(_ids(), batch_size=4, num_workers=2, timeout=30,
                        persistent_workers=True)
    pids = []
    for _ in range(2):
        assert sum(len(b[0]) for b in loader) == 20
        pids.append(sorted(p.pid for p in worker_processes()))
    assert len(pids[0]) == 2 and pids[0] == pids[1]  # the same two workers, both epochs
    del loader
    assert _none_left() == []


class _Raises(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        raise IndexError(f"no item {i}")


def test_an_error_raised_by_the_dataset_is_reraised_and_the_workers_live_on():
    # torch re-raises the dataset's exception in the main process; the iterator stays
    # usable (a caller may skip a bad batch), so its workers live until it is dropped
    it = iter(DataLoader(_Raises(), batch_size=2, num_workers=1, timeout=30))
    with pytest.raises(IndexError, match="no item 0") as info:
        next(it)
    assert len(worker_processes()) == 1
    del info, it
    # torch re-raises it from a local variable, so the traceback is a reference cycle
    # (exception -> frame -> exception) and only the garbage collector frees the iterator
    gc.collect()
    assert _none_left() == []


def test_worker_processes_ignores_multiprocessing_helpers():
    it = iter(DataLoader(_ids(), batch_size=10, num_workers=1, timeout=60,
                         multiprocessing_context="forkserver"))
    assert len(list(it)) == 2
    del it
    assert _none_left() == []  # the fork server (and resource tracker) live on, uncounted


def test_a_worker_forked_by_the_fork_server_is_still_counted():
    """Excluding the fork server itself must not hide the workers it forks."""
    loader = DataLoader(_ids(), batch_size=10, num_workers=1, timeout=60,
                        multiprocessing_context="forkserver", persistent_workers=True)
    next(iter(loader))
    assert len(worker_processes()) == 1
    del loader
    assert _none_left() == []


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
