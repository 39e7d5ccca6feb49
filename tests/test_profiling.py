"""The per-batch timeline ``labkit diagnose`` draws, and the profiling benchmark (ch. 13b)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.instruments.tuning import WorkDataset
from labkit_tools.bench import run_benchmark
from labkit_tools.timeline import close_log, record_timeline, timed_loader


@pytest.mark.parametrize("num_workers", [0, 2])
def test_timeline_has_every_batch_once_from_the_right_worker(num_workers):
    loader = DataLoader(WorkDataset(96, ms=0.2), batch_size=8,
                        num_workers=num_workers,
                        timeout=60 if num_workers else 0)  # torch: none without workers
    tl = record_timeline(loader, step=lk.simulated_step(1), max_batches=10)
    assert [r["batch"] for r in tl.loop] == list(range(10))
    made = [b["batch"] for b in tl.batches]
    assert made[:10] == list(range(10)) and len(set(made)) == len(made)
    for b in tl.batches:
        assert b["worker"] == (b["batch"] % num_workers if num_workers else -1)
        assert b["start"] <= b["fetched"] <= b["end"]
    # a batch is in the loop's hands only after its worker finished it (one clock for all)
    ends = {b["batch"]: b["end"] for b in tl.batches}
    assert all(ends[r["batch"]] <= r["got"] + 1e-6 for r in tl.loop)
    assert 0 <= tl.wait_fraction <= 1
    assert lk.worker_processes() == []


def test_timeline_of_a_loader_bound_loop_waits_and_of_a_step_bound_one_does_not():
    ds = WorkDataset(200, ms=2.0, kind="sleep")   # 16 ms a batch
    loader = DataLoader(ds, batch_size=8)
    slow_loader = record_timeline(loader, step=lk.simulated_step(1.6), max_batches=8)
    slow_step = record_timeline(loader, step=lk.simulated_step(160), max_batches=4,
                                num_workers=2)
    assert slow_loader.wait_fraction > 0.5
    assert slow_step.wait_fraction < 0.2
    # the hand-over leaves out queue time: a step-bound loop's batches waited in the queue
    # for 160 ms steps, yet each crossed over in well under a step
    ends = {b["batch"]: b["end"] for b in slow_step.batches}
    queued = [r["got"] - ends[r["batch"]] for r in slow_step.loop[1:]]
    handover = sorted(r["got"] - max(ends[r["batch"]], r["asked"]) for r in slow_step.loop)
    assert 0 <= handover[len(handover) // 2] < 0.05 < max(queued)
    fig = slow_step.plot()
    assert len(fig.axes[0].get_yticks()) == 3  # loop, worker 0, worker 1


def test_timeline_of_an_iterable_dataset():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return (torch.zeros(4) for _ in range(40))

    tl = record_timeline(DataLoader(Stream(), batch_size=8), max_batches=10)
    assert len(tl.loop) == 5 and len(tl.batches) == 5


def test_timed_loader_keeps_the_batches_and_never_waits_forever(tmp_path):
    from labkit.loading.loaders import WORKER_TIMEOUT_S

    loader = DataLoader(list(range(20)), batch_size=6, drop_last=True)
    copy = timed_loader(loader, str(tmp_path), num_workers=2)
    assert [b.tolist() for b in copy] == [b.tolist() for b in loader]
    assert copy.timeout == WORKER_TIMEOUT_S and copy.prefetch_factor == 2
    sampled = DataLoader(list(range(6)), batch_size=None, sampler=[5, 1, 3])
    assert [int(x) for x in timed_loader(sampled, str(tmp_path))] == [5, 1, 3]
    close_log()


def test_bench_profiling_runs_tiny():
    r = run_benchmark("profiling", batches=40, trials=1)
    assert r["plain_samples_per_s"] > 0 and r["timeline_samples_per_s"] > 0
    assert {"timeline_overhead", "torch_profiler_overhead", "goal_met"} <= set(r)
    assert lk.worker_processes() == []


def test_close_log_closes_the_file_a_main_process_timeline_kept_open(tmp_path):
    import os

    plain = DataLoader(WorkDataset(16, ms=0.0), batch_size=8)
    stamped = timed_loader(plain, str(tmp_path))
    assert len(list(stamped)) == 2
    fds = set(os.listdir("/proc/self/fd"))
    close_log()
    assert len(set(os.listdir("/proc/self/fd"))) == len(fds) - 1
    close_log()  # nothing open: a no-op
    assert (tmp_path / f"{os.getpid()}.tsv").read_text().count("\n") == 2
