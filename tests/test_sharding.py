"""Shard assignment over ranks x workers (chapters 03-04)."""

import pytest

from labkit.data.writers import shard_bounds
from labkit.streams.split import (
    Place,
    SplitStream,
    assign,
    current_split,
    shard_plan,
)


@pytest.mark.parametrize("items, world, workers", [(8, 1, 2), (8, 2, 2), (3, 2, 2), (5, 1, 4)])
def test_assign_covers_every_item_once(items, world, workers):
    got = sorted(i for r in range(world) for w in range(workers)
                 for i in assign(items, r, world, w, workers))
    assert got == list(range(items))


@pytest.mark.parametrize("n, parts", [(10, 3), (2, 4), (0, 2), (8192, 4), (100000, 64)])
def test_shard_bounds_is_a_partition(n, parts):
    bounds = shard_bounds(n, parts)
    assert len(bounds) == parts + 1 and bounds[0] == 0 and bounds[-1] == n
    sizes = [hi - lo for lo, hi in zip(bounds, bounds[1:], strict=False)]
    assert min(sizes) >= 0 and max(sizes) - min(sizes) <= 1


def test_shard_bounds_is_the_fixtures_cut():
    # the writers cut shards with these bounds; exact integers, no float rounding
    assert shard_bounds(10, 3) == [0, 3, 6, 10]
    assert shard_bounds(18, 66)[33] == 9
    with pytest.raises(ValueError, match="parts=0"):
        shard_bounds(5, 0)


def test_plan_shows_idle_workers():
    plan = shard_plan(2, 4)
    assert plan.idle == ["worker2", "worker3"]
    assert "(idle)" in plan.table() and "2 idle" in plan.table()
    assert shard_plan(8, 2, world_size=2).assignment["rank1/worker0"] == (2, 6)
    assert shard_plan(4, 0).assignment == {"worker0": (0, 1, 2, 3)}


def test_current_split_outside_workers(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert current_split() == (0, 1, 0, 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert current_split() == (1, 2, 0, 1)
    assert current_split(0, 4) == (0, 4, 0, 1)


class _Units(SplitStream):
    """The smallest stream on the base: yields its unit indices."""

    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units = units

    def __iter__(self):
        return iter(self.share(self.units))


@pytest.mark.parametrize("seed", [None, 7])
def test_split_stream_shares_partition_every_epoch(seed):
    ds = _Units(10, seed=seed)
    for epoch in (0, 1):
        ds.set_epoch(epoch)
        places = [Place(r, 2, w, 3) for r in range(2) for w in range(3)]
        shares = [ds.share(10, p) for p in places]
        assert sorted(u for s in shares for u in s) == list(range(10))
        assert [s[0] for s in shares] == ds.order(10)[:6]  # global worker g takes g first
    assert (ds.order(10) == list(range(10))) == (seed is None)


def test_split_stream_order_is_seed_and_epoch():
    a, b = _Units(20, seed=1), _Units(20, seed=1)
    assert a.order(20) == b.order(20)
    b.set_epoch(1)
    assert a.order(20) != b.order(20) and sorted(b.order(20)) == list(range(20))
    assert list(_Units(4, split="none", rank=1, world_size=2)) == [0, 1, 2, 3]
    assert list(_Units(4, split="worker", rank=1, world_size=2)) == [0, 1, 2, 3]
    assert list(_Units(4, rank=1, world_size=2)) == [1, 3]


def test_split_stream_refuses_bad_split_and_rank():
    with pytest.raises(ValueError, match=r"split='x': 'rank_worker', 'worker' or 'none'"):
        _Units(4, split="x")
    with pytest.raises(ValueError, match="outside world_size"):
        _Units(4, rank=2, world_size=2)
    assert Place(1, 2, 1, 3).slot == 4 and Place(1, 2, 0, 1).source == "rank1/main"
