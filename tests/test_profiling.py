"""Chapter 13's tools: the per-batch timeline, torch.profiler traces, sampling workers."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.profiling.rebuild import rebuild_loader


@pytest.mark.parametrize("num_workers", [0, 2])
def test_timeline_has_every_batch_once_from_the_right_worker(num_workers):
    loader = DataLoader(lk.instruments.WorkDataset(96, ms=0.2), batch_size=8,
                        num_workers=num_workers,
                        timeout=60 if num_workers else 0)  # torch: none without workers
    tl = lk.profiling.record_timeline(loader, step=lk.simulated_step(1), max_batches=10)
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
    ds = lk.instruments.WorkDataset(200, ms=2.0, kind="sleep")   # 16 ms a batch
    loader = DataLoader(ds, batch_size=8)
    slow_loader = lk.profiling.record_timeline(loader, step=lk.simulated_step(1.6), max_batches=8)
    slow_step = lk.profiling.record_timeline(loader, step=lk.simulated_step(160), max_batches=4,
                                   num_workers=2)
    assert slow_loader.wait_fraction > 0.5
    assert slow_step.wait_fraction < 0.2
    # the hand-over leaves out queue time: a step-bound loop's batches waited in the queue
    # for 160 ms steps, yet each crossed over in well under a step
    ends = {b["batch"]: b["end"] for b in slow_step.batches}
    queued = [r["got"] - ends[r["batch"]] for r in slow_step.loop[1:]]
    assert 0 <= slow_step.handover_s() < 0.05 < max(queued)
    fig = slow_step.plot()
    assert len(fig.axes[0].get_yticks()) == 3  # loop, worker 0, worker 1


def test_timeline_of_an_iterable_dataset():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return (torch.zeros(4) for _ in range(40))

    tl = lk.profiling.record_timeline(DataLoader(Stream(), batch_size=8), max_batches=10)
    assert len(tl.loop) == 5 and len(tl.batches) == 5


def test_profile_loop_sorts_data_wait_from_the_step(tmp_path):
    # 12 ms batches
    loader = DataLoader(lk.instruments.WorkDataset(200, ms=3.0, kind="sleep"), batch_size=4)
    s = lk.profiling.profile_loop(loader, lk.simulated_step(1.2), wait=1, warmup=1, active=4,
                        trace_dir=tmp_path)
    assert s.path.parent == tmp_path and json.loads(s.path.read_text())["traceEvents"]
    assert s.steps == 4
    assert s.data_wait_ms > 3 * s.stage_ms["step"]   # planted: the loader is ~10x the step
    assert 0.5 < s.data_wait_fraction <= 1
    assert "data wait" in str(s)
    if not torch.cuda.is_available():
        assert s.kernel_ms is None and s.gpu_busy_fraction is None  # a CPU step: no kernels


def test_profiler_overhead_is_measured():
    loader = DataLoader(lk.instruments.WorkDataset(64, ms=0.0), batch_size=4)
    o = lk.profiling.profiler_overhead(loader, lk.simulated_step(0.5), batches=8, repeats=1)
    assert o["plain_s"] > 0 and o["profiled_s"] > 0


def test_sample_workers_names_the_worker_hotspot_or_says_why_not():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import planted_loaders as pl

    loader = DataLoader(pl.HeavyDecode(), batch_size=8, num_workers=2, timeout=60)
    s = lk.profiling.sample_workers(loader, seconds=1)
    ok, why = lk.status("pyspy")
    if ok:
        assert s.sampled and len(s.pids) == 2
        assert "decode_sample" in s.top(1)[0][0]
        s.plot()
    else:
        assert not s.sampled and why in s.how
        assert s.fallback[0].name.endswith("decode_sample")
    assert lk.worker_processes() == []


def test_rebuild_loader_keeps_the_batches_and_refuses_other_changes():
    from labkit.loading.loaders import WORKER_TIMEOUT_S

    loader = DataLoader(list(range(20)), batch_size=6, drop_last=True)
    copy = rebuild_loader(loader, num_workers=2)
    assert [b.tolist() for b in copy] == [b.tolist() for b in loader]
    assert copy.timeout == WORKER_TIMEOUT_S  # with workers it never waits forever
    assert copy.prefetch_factor == 2 and not copy.persistent_workers
    assert rebuild_loader(copy, num_workers=0).prefetch_factor is None  # torch's rule
    with pytest.raises(TypeError, match="batch_size"):
        rebuild_loader(loader, batch_size=3)


def test_rebuild_loader_copies_the_public_knobs():
    def init(worker_id):
        pass

    def collate(samples):
        return torch.tensor(samples)

    loader = DataLoader(list(range(20)), batch_size=4, num_workers=1, timeout=300,
                        prefetch_factor=3, persistent_workers=True, collate_fn=collate,
                        worker_init_fn=init, multiprocessing_context="fork", drop_last=True)
    copy = rebuild_loader(loader, num_workers=2)
    assert (copy.num_workers, copy.timeout, copy.prefetch_factor) == (2, 300, 3)
    assert copy.persistent_workers and copy.collate_fn is collate
    assert copy.worker_init_fn is init and copy.batch_sampler is loader.batch_sampler
    assert copy.multiprocessing_context is loader.multiprocessing_context
    alone = rebuild_loader(loader, num_workers=0)  # no worker-only knob left behind
    assert (alone.prefetch_factor, alone.persistent_workers, alone.multiprocessing_context,
            alone.timeout) == (None, False, None, 0)
    assert [b.tolist() for b in alone] == [list(range(i, i + 4)) for i in range(0, 20, 4)]
    sampled = DataLoader(list(range(6)), batch_size=None, sampler=[5, 1, 3])
    assert [int(x) for x in rebuild_loader(sampled, num_workers=1)] == [5, 1, 3]


def test_bench_profiling_runs_tiny():
    r = lk.tools.run_benchmark("profiling", batches=40, trials=1)
    assert r["plain_samples_per_s"] > 0 and r["timeline_samples_per_s"] > 0
    assert {"timeline_overhead", "torch_profiler_overhead", "goal_met"} <= set(r)
    assert lk.worker_processes() == []


def test_close_log_closes_the_file_a_main_process_timeline_kept_open(tmp_path):
    import os

    from labkit.profiling.timeline import close_log, timed_loader

    plain = DataLoader(lk.instruments.WorkDataset(16, ms=0.0), batch_size=8)
    stamped = timed_loader(plain, str(tmp_path))
    assert len(list(stamped)) == 2
    fds = set(os.listdir("/proc/self/fd"))
    close_log()
    assert len(set(os.listdir("/proc/self/fd"))) == len(fds) - 1
    close_log()  # nothing open: a no-op
    assert (tmp_path / f"{os.getpid()}.tsv").read_text().count("\n") == 2
