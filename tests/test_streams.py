"""ShardStream (chapter 03): contracts over ranks x workers, start methods, bad shards.

The trap and the by-hand fixes (get_worker_info, worker_init_fn) are typed in chapter 03,
whose checked cells pin them."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from contracts import check_exactly_once, check_lazy_equals_eager, check_same_order, epoch_ids
from torch.utils.data import DataLoader

from labkit.data.fixtures import fixture
from labkit.errors import DataFormatError
from labkit.instruments.audits import audit, deliveries
from labkit.streams.arrays import ShardStream


@pytest.fixture(scope="module")
def shards_fx(ci_fixture):
    return ci_fixture("array_shards")


@pytest.fixture(scope="module")
def array_fx(ci_fixture):
    return ci_fixture("array")


@pytest.fixture(scope="module")
def shards_ref(shards_fx):
    return np.concatenate([np.load(p) for p in shards_fx.file_list(".npy")])


def test_shard_stream_exactly_once_over_ranks_and_workers(shards_fx):
    check_exactly_once(
        lambda rank, ws, nw: DataLoader(ShardStream(shards_fx, rank=rank, world_size=ws),
                                         batch_size=64, num_workers=nw, timeout=60 if nw else 0),
        shards_fx.samples)


def test_shard_stream_lazy_equals_eager(shards_fx, shards_ref):
    n = check_lazy_equals_eager(DataLoader(ShardStream(shards_fx, seed=3), batch_size=100,
                                            num_workers=2, timeout=60), lambda i: shards_ref[i])
    assert n == shards_fx.samples


def test_shard_stream_same_seed_same_order(shards_fx):
    def make(seed, epoch):
        ds = ShardStream(shards_fx, seed=seed)
        ds.set_epoch(epoch)
        return DataLoader(ds, batch_size=64, num_workers=2, timeout=60)

    check_same_order(make)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # 3 on 2 cores
def test_fewer_shards_than_workers_leaves_workers_idle(shards_fx):
    loader = DataLoader(ShardStream(shards_fx, shards=[0, 1], tag=True), batch_size=64,
                         num_workers=3, timeout=60)
    pairs = deliveries(loader)
    assert [s for s, _ in pairs] == ["worker0", "worker1"]  # worker2 delivered nothing
    assert audit(pairs, range(0, 2048)).ok


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_start_methods(shards_fx, method):
    loader = DataLoader(ShardStream(shards_fx, tag=True), batch_size=256, num_workers=2,
                         multiprocessing_context=method, timeout=60)
    assert audit(deliveries(loader), shards_fx.samples).ok


def test_missing_shard_names_the_file(shards_fx, own_data, tmp_path):
    copy = tmp_path / "shards"
    shutil.copytree(shards_fx.path, copy)
    (copy / "shard-00003.npy").unlink()
    broken = type(shards_fx)(**{**shards_fx.__dict__, "path": copy})
    with pytest.raises(DataFormatError, match="shard-00003.npy: shard file missing"):
        ShardStream(broken)


def test_truncated_shard_names_the_file(shards_fx, tmp_path):
    from labkit.data.faults import damaged_copy

    copy = tmp_path / "shards"
    damaged_copy(shards_fx, copy, "truncate", file="shard-00001.npy", at=0.3)
    broken = type(shards_fx)(**{**shards_fx.__dict__, "path": copy})
    with pytest.raises(DataFormatError, match="shard-00001.npy: .* truncated"):
        ShardStream(broken)


def test_wrong_dtype_or_shape_shard_names_the_file(shards_fx, tmp_path):
    copy = tmp_path / "shards"
    shutil.copytree(shards_fx.path, copy)
    broken = type(shards_fx)(**{**shards_fx.__dict__, "path": copy})
    rows = np.load(copy / "shard-00002.npy")
    np.save(copy / "shard-00002.npy", rows.astype(np.float64))
    with pytest.raises(DataFormatError, match=r"shard-00002.npy: rows are float64 \(256,\), "
                                              r"expected float32 \(256,\)"):
        ShardStream(broken)
    np.save(copy / "shard-00002.npy", rows[:, :255])
    with pytest.raises(DataFormatError, match=r"shard-00002.npy: rows are float32 \(255,\)"):
        ShardStream(broken)


def test_bad_arguments(shards_fx, array_fx):
    with pytest.raises(ValueError, match="split="):
        ShardStream(shards_fx, split="rank")
    with pytest.raises(DataFormatError, match="no shards"):
        ShardStream(array_fx)
    with pytest.raises(ValueError, match="outside world_size"):
        epoch_ids(ShardStream(shards_fx, rank=2, world_size=2))


def test_tagged_batches_carry_the_rank(shards_fx):
    pairs = deliveries(DataLoader(ShardStream(shards_fx, tag=True, rank=1, world_size=2),
                                   batch_size=64, num_workers=2, timeout=60))
    assert [s for s, _ in pairs] == ["rank1/worker0", "rank1/worker1"]
    ids = torch.tensor([i for _, ids in pairs for i in ids])
    assert ids.numel() == shards_fx.samples // 2


def test_fixture_still_intact(shards_fx):
    assert fixture("array_shards", "ci", progress=False).digest == shards_fx.digest
