"""labkit.loading.prefetchers: the thread and CUDA-stream prefetchers (chapter 09)."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.loading.prefetchers import CudaStreamPrefetcher, to_device
from tests.contracts import check_exactly_once, epoch_ids


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("labkit-prefetch")]


def _no_prefetch_thread_left(timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while _prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _prefetch_threads()


@pytest.mark.parametrize("depth", [1, 2, 8])
def test_order_preserved_every_item_once(depth):
    got = list(lk.loading.ThreadPrefetcher(range(1000), depth=depth))
    assert got == list(range(1000))
    assert _no_prefetch_thread_left()


def test_reiterable_fresh_thread_per_pass():
    p = lk.loading.ThreadPrefetcher(range(10))
    assert list(p) == list(p) == list(range(10))
    assert len(p) == 10


def test_exactly_once_over_workers_and_ranks():
    ds = lk.instruments.WorkDataset(64, ms=0.0)

    def make(rank, world_size, num_workers):
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=world_size, rank=rank, shuffle=False)
        return lk.loading.ThreadPrefetcher(DataLoader(ds, batch_size=8, num_workers=num_workers,
                                              sampler=sampler,
                                              timeout=60 if num_workers else 0))

    check_exactly_once(make, 64)
    assert _no_prefetch_thread_left()


def test_producer_exception_reaches_consumer():
    def gen():
        yield 1
        yield 2
        raise KeyError("boom in the producer")

    it = iter(lk.loading.ThreadPrefetcher(gen()))
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(KeyError, match="boom in the producer"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert _no_prefetch_thread_left()


def test_dataloader_worker_error_propagates_and_workers_stop():
    class Bad(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            if i == 5:
                raise ValueError("sample 5 is bad")
            return i

    loader = DataLoader(Bad(), batch_size=2)
    with pytest.raises(ValueError, match="sample 5 is bad"):
        list(lk.loading.ThreadPrefetcher(loader))
    assert _no_prefetch_thread_left()


def test_early_break_leaves_no_thread():
    produced = []

    def gen():
        for i in range(10_000):
            produced.append(i)
            yield i

    p = lk.loading.ThreadPrefetcher(gen(), depth=4)
    for i in p:
        if i == 3:
            break
    # the abandoned iterator is closed when it is collected; it.close() does it at once
    assert _no_prefetch_thread_left()
    assert len(produced) < 100  # the producer stopped, bounded by depth


def test_close_stops_thread_and_loader_workers(live_workers):
    ds = lk.instruments.WorkDataset(200, ms=1.0, kind="sleep")
    it = iter(lk.loading.ThreadPrefetcher(DataLoader(ds, batch_size=4, num_workers=2, timeout=60)))
    next(it)
    it.close()
    assert _no_prefetch_thread_left()
    assert not live_workers()


def test_measure_accepts_a_prefetcher():
    m = lk.measure(lk.loading.ThreadPrefetcher(DataLoader(lk.instruments.WorkDataset(64, ms=0.0),
                                                      batch_size=8)),
                   step=lk.simulated_step(0.1), repeats=2)
    assert m.samples == 64 and m.passes[0].batches == 8


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth must be at least 1"):
        lk.loading.ThreadPrefetcher([], depth=0)


def test_to_device_cpu_keeps_structure():
    batch = {"x": torch.ones(2), "ids": [torch.arange(2), 3]}
    out = to_device(batch, "cpu", pin=False)
    assert set(out) == {"x", "ids"} and out["ids"][1] == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_prefetcher_says_plainly_why_it_is_skipped():
    ok, reason = lk.status("cuda")
    assert not ok and ("CPU-only" in reason or "no CUDA device" in reason)
    with pytest.raises(lk.LabkitError, match="cannot run here: .*(CPU-only|no CUDA)"):
        CudaStreamPrefetcher([torch.ones(2)])


def test_cuda_prefetcher_makes_one_side_stream_for_all_its_passes(monkeypatch):
    """Review 09-F2: the caching allocator reuses a freed block only on the stream that
    allocated it, so a stream per pass would allocate each pass's first batches afresh. On
    the CPU, with torch.cuda's stream calls counted, not run."""
    import contextlib

    from labkit.loading import prefetchers

    made = []

    class Stream:
        def __init__(self, device=None):
            made.append(self)

        def wait_stream(self, other):
            assert other is made[0]  # the compute stream waits for the prefetcher's one stream

    monkeypatch.setattr(prefetchers, "_cuda_status", lambda device: (True, ""))
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    compute = object.__new__(Stream)  # the current stream: not one the prefetcher made
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: compute)
    prefetcher = CudaStreamPrefetcher([torch.ones(2), torch.zeros(2)], "cpu")
    passes = [[x.tolist() for x in prefetcher] for _ in range(3)]
    assert passes == [[[1.0, 1.0], [0.0, 0.0]]] * 3
    assert len(made) == 1


@pytest.mark.gpu  # skipped, with the reason, without CUDA
def test_cuda_prefetcher_on_gpu_same_batches_in_order():
    ds = lk.instruments.WorkDataset(256, ms=0.0)
    loader = DataLoader(ds, batch_size=32, num_workers=2, pin_memory=True, timeout=60)
    out = [(x, ids) for x, ids in CudaStreamPrefetcher(loader, "cuda")]
    assert all(x.device.type == "cuda" for x, _ in out)
    assert torch.cat([ids.cpu() for _, ids in out]).tolist() == list(range(256))
    ref = torch.cat([x for x, _ in DataLoader(ds, batch_size=32)])
    assert torch.equal(torch.cat([x.cpu() for x, _ in out]), ref)
    assert epoch_ids(CudaStreamPrefetcher(loader)) == list(range(256))


def test_a_persistent_worker_loader_survives_many_passes():
    """Ending a pass must not stop persistent workers: the next pass reuses them."""
    loader = DataLoader(list(range(64)), batch_size=8, num_workers=2,
                            persistent_workers=True, timeout=60)
    try:
        pf = lk.loading.ThreadPrefetcher(loader)
        assert [sum(len(b) for b in pf) for _ in range(3)] == [64, 64, 64]
        assert lk.measure(pf, repeats=2).samples_per_s > 0
    finally:
        loader = pf = None  # the last references: the persistent workers stop
