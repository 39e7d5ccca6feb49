"""instruments.tuning: the known-cost workload (chapters 09, 13) and the num_workers
suggestion ``labkit bench prefetch`` makes (chapter 09c types its own)."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit.instruments.tuning import WorkDataset, suggest_loader
from tests.contracts import check_exactly_once, check_lazy_equals_eager


def test_work_dataset_exactly_once_and_values():
    ds = WorkDataset(48, ms=0.0, features=4)
    sampler = __import__("torch").utils.data.distributed.DistributedSampler

    def make(rank, world_size, num_workers):
        s = sampler(ds, num_replicas=world_size, rank=rank, shuffle=False)
        return DataLoader(ds, batch_size=5, num_workers=num_workers, sampler=s,
                          timeout=60 if num_workers else 0)

    check_exactly_once(make, 48)
    n = check_lazy_equals_eager(DataLoader(ds, batch_size=7), lambda i: [float(i)] * 4)
    assert n == 48


def test_work_dataset_bad_args():
    with pytest.raises(ValueError, match="kind must be"):
        WorkDataset(4, kind="spin")
    with pytest.raises(IndexError):
        WorkDataset(4, ms=0)[4]


def test_suggest_enough_workers_with_headroom():
    s = suggest_loader(worker_batches_per_s=10, step_batches_per_s=25, cores=8)
    assert s.num_workers == 3 and s.limited_by == "step"  # 25 x 1.2 / 10 = 3.0
    assert s.expected_capacity == pytest.approx(30)
    assert s.loader_kwargs() == {"num_workers": 3, "prefetch_factor": 2,
                                 "persistent_workers": True}


def test_suggest_capped_by_cores_says_so():
    s = suggest_loader(10, 100, cores=2)
    assert s.num_workers == 2 and s.limited_by == "cores"
    assert "capped by 2 cores: loader-bound" in s.reason


def test_suggest_rejects_nonpositive_rates():
    with pytest.raises(ValueError, match="positive"):
        suggest_loader(0, 10)


def test_usable_cores():
    assert lk.usable_cores() >= 1
