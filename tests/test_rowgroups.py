"""ParquetRowGroups (chapter 05): contracts over ranks x workers, bad Parquet input."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from contracts import check_exactly_once, check_lazy_equals_eager, check_same_order
from torch.utils.data import DataLoader

from labkit.data.faults import damaged_copy
from labkit.errors import DataFormatError
from labkit.instruments.audits import audit, deliveries
from labkit.streams.rowgroups import ParquetRowGroups, open_parquet


@pytest.fixture(scope="module")
def pq_fx(ci_fixture):
    return ci_fixture("parquet")


def _files(fx):
    return [fx.path / s["file"] for s in fx.meta["shards"]]


def test_exactly_once_over_ranks_and_workers(pq_fx):
    check_exactly_once(
        lambda rank, ws, nw: DataLoader(ParquetRowGroups(pq_fx, batch_size=300, rank=rank,
                                                          world_size=ws),
                                         batch_size=None, num_workers=nw, timeout=60 if nw else 0),
        pq_fx.samples)


def test_lazy_equals_eager(pq_fx):
    table = pq.read_table(_files(pq_fx), columns=["id", "features"])
    ref = np.stack(table.column("features").to_numpy(zero_copy_only=False))
    ids = table.column("id").to_numpy()
    assert (ids == np.arange(pq_fx.samples)).all()
    n = check_lazy_equals_eager(DataLoader(ParquetRowGroups(pq_fx, seed=1), batch_size=None,
                                            num_workers=2, timeout=60), lambda i: ref[i])
    assert n == pq_fx.samples


def test_same_seed_same_order(pq_fx):
    def make(seed, epoch):
        ds = ParquetRowGroups(pq_fx, seed=seed)
        ds.set_epoch(epoch)
        return DataLoader(ds, batch_size=None)

    check_same_order(make)


def test_tagged_sources(pq_fx):
    pairs = deliveries(DataLoader(ParquetRowGroups(pq_fx, tag=True), batch_size=None,
                                   num_workers=2, timeout=60))
    assert [s for s, _ in pairs] == ["worker0", "worker1"]
    assert audit(pairs, pq_fx.samples).ok
    main = deliveries(DataLoader(ParquetRowGroups(pq_fx, tag=True, rank=1, world_size=2),
                                  batch_size=None))
    assert [s for s, _ in main] == ["rank1/main"]


def test_split_none_duplicates(pq_fx):
    pairs = deliveries(DataLoader(ParquetRowGroups(pq_fx, split="none", tag=True),
                                   batch_size=None, num_workers=2, timeout=60))
    assert audit(pairs, pq_fx.samples).duplicates == pq_fx.samples


def test_missing_column_names_the_file(pq_fx, tmp_path):
    path = tmp_path / "x.parquet"
    pq.write_table(pq.read_table(_files(pq_fx)[0]).drop_columns(["features"]), path)
    with pytest.raises(DataFormatError, match=r"x.parquet: no column\(s\) \['features'\]"):
        ParquetRowGroups([path])
    with pytest.raises(DataFormatError, match="x.parquet: no column"):
        open_parquet(path, ["label", "features"])


def test_missing_and_truncated_shards_name_the_file(pq_fx, tmp_path):
    gone = damaged_copy(pq_fx, tmp_path / "gone", "delete", file="shard-00001.parquet")
    with pytest.raises(DataFormatError, match="shard-00001.parquet: Parquet shard missing"):
        ParquetRowGroups([gone.parent / p.name for p in _files(pq_fx)])
    short = damaged_copy(pq_fx, tmp_path / "short", "truncate", file="shard-00002.parquet")
    with pytest.raises(DataFormatError, match="shard-00002.parquet: not a readable Parquet"):
        ParquetRowGroups(short.parent)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="empty: no Parquet files"):
        ParquetRowGroups(tmp_path / "empty")
