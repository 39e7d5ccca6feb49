"""Chapter 05's own ``rowgroups.py`` (its ``%%writefile`` cell): contracts over ranks x
workers, and bad Parquet input named by file (the reader is typed in the chapter, issue 46)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from chapter_code import chapter_module
from contracts import check_exactly_once, check_lazy_equals_eager
from torch.utils.data import DataLoader

from labkit.data.faults import damaged_copy
from labkit.errors import DataFormatError


@pytest.fixture(scope="module")
def rg(tmp_path_factory):
    return chapter_module("05", "rowgroups.py", tmp_path_factory.mktemp("ch05"))


@pytest.fixture(scope="module")
def pq_fx(ci_fixture):
    return ci_fixture("parquet")


def _files(fx):
    return [fx.path / s["file"] for s in fx.meta["shards"]]


def test_exactly_once_over_ranks_and_workers(rg, pq_fx):
    check_exactly_once(
        lambda rank, ws, nw: DataLoader(rg.RowGroups(_files(pq_fx), 300, rank=rank,
                                                     world_size=ws),
                                        batch_size=None, num_workers=nw, timeout=60 if nw else 0),
        pq_fx.samples)


def test_lazy_equals_eager(rg, pq_fx):
    table = pq.read_table(_files(pq_fx), columns=["id", "features"])
    ref = np.stack(table.column("features").to_numpy(zero_copy_only=False))
    assert (table.column("id").to_numpy() == np.arange(pq_fx.samples)).all()
    n = check_lazy_equals_eager(DataLoader(rg.RowGroups(_files(pq_fx), 256), batch_size=None,
                                           num_workers=2, timeout=60), lambda i: ref[i],
                                values_of=lambda b: b["x"])
    assert n == pq_fx.samples


def test_missing_column_names_the_file(rg, pq_fx, tmp_path):
    path = tmp_path / "x.parquet"
    pq.write_table(pq.read_table(_files(pq_fx)[0]).drop_columns(["features"]), path)
    with pytest.raises(DataFormatError, match=r"x.parquet: no column\(s\) \['features'\]"):
        rg.RowGroups([path], 256)
    with pytest.raises(DataFormatError, match="x.parquet: no column"):
        rg.open_parquet(path, ["label", "features"])


def test_missing_and_truncated_shards_name_the_file(rg, pq_fx, tmp_path):
    gone = damaged_copy(pq_fx, tmp_path / "gone", "delete", file="shard-00001.parquet")
    with pytest.raises(DataFormatError, match="shard-00001.parquet: Parquet shard missing"):
        rg.RowGroups([gone.parent / p.name for p in _files(pq_fx)], 256)
    short = damaged_copy(pq_fx, tmp_path / "short", "truncate", file="shard-00002.parquet")
    with pytest.raises(DataFormatError, match="shard-00002.parquet: not a readable Parquet"):
        rg.RowGroups(sorted(short.parent.glob("*.parquet")), 256)
