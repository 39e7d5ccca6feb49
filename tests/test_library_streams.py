"""The library pipelines chapters 06-08 build (webdataset, HF datasets), under the contracts.

These pin what the chapters teach about third-party loaders: exactly-once splitting, seeded
order, and how resume behaves (including the known losses the chapters show, so an upgrade
that changes them is noticed and the chapter text updated).
"""

from __future__ import annotations

import functools
import os

import pytest
from chapter_code import chapter_module
from contracts import check_exactly_once, check_resume, check_same_order
from torch.utils.data import DataLoader

import labkit as lk

pytestmark = pytest.mark.filterwarnings("ignore:.set_vital. is deprecated")


@pytest.fixture(scope="module")
def wds_fx(ci_fixture):
    return ci_fixture("wds")


@pytest.fixture(scope="module")
def pq_files(ci_fixture):
    return [str(p) for p in ci_fixture("parquet").file_list(".parquet")]


@pytest.fixture(scope="module")
def nodesplit(tmp_path_factory):
    """Chapter 06's nodesplitter told its rank (its ``nodesplit.py``, which workers import)."""
    return chapter_module("06", "nodesplit.py", tmp_path_factory.mktemp("ch06"))


def _wds(shards, nodesplit, rank=0, world_size=1, seed=0, buffer=64):
    import webdataset as wds

    split = functools.partial(nodesplit.shards_of_rank, rank=rank, world_size=world_size)
    return (wds.WebDataset(shards, shardshuffle=len(shards), seed=seed, nodesplitter=split)
            .shuffle(buffer, seed=seed).to_tuple("npy", "__key__").map_tuple(lambda _: 0, int)
            .batched(16))


def test_webdataset_pipeline_exactly_once(wds_fx, nodesplit):
    import webdataset as wds

    shards = [str(p) for p in wds_fx.file_list(".tar")]

    def make(rank, world_size, num_workers):
        return wds.WebLoader(_wds(shards, nodesplit, rank, world_size), batch_size=None,
                             num_workers=num_workers, timeout=30 if num_workers else 0)

    check_exactly_once(make, wds_fx.samples)


def test_webdataset_seeded_order(wds_fx, nodesplit):
    shards = [str(p) for p in wds_fx.file_list(".tar")]
    check_same_order(lambda seed, epoch: _wds(shards, nodesplit, seed=seed + 10 * epoch))


def test_webdataset_fast_forward_resume_loses_batches_after_the_second_resume(wds_fx,
                                                                               nodesplit):
    """torchdata 0.11 counts fast-forwarded batches as yielded: the 2nd restore skips too far."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    shards = [str(p) for p in wds_fx.file_list(".tar")]
    trial = lk.resume_trial(lambda: StatefulDataLoader(_wds(shards, nodesplit), batch_size=None),
                            stops=(3, 2))
    once, twice = trial.runs[1], trial.runs[2]
    assert once.ok
    assert (twice.lost, twice.duplicated) == (3 * 16, 0), trial.table()


def _hf_parquet(files):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets
    from datasets import load_dataset

    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0.2  # see chapter 07
    return load_dataset("parquet", data_files=files, split="train",
                        streaming=True).select_columns(["id"])


def test_hf_split_by_node_and_workers_exactly_once(pq_files):
    from datasets.distributed import split_dataset_by_node

    def make(rank, world_size, num_workers):
        ds = split_dataset_by_node(_hf_parquet(pq_files).shuffle(seed=0, buffer_size=100),
                                   rank=rank, world_size=world_size)
        return DataLoader(ds.with_format("torch"), batch_size=512, num_workers=num_workers,
                              timeout=60 if num_workers else 0)

    # workers 0 and 2, not also 1: each worker imports datasets (~1 s on 2 cores), and 2
    # already splits a rank's shards between workers
    check_exactly_once(make, 8192, workers=(0, 2))


def test_hf_resume_without_shuffle_is_exact(pq_files):
    check_resume(lambda: _hf_parquet(pq_files), stops=(263, 256),
                 ids_of=lambda e: [e["id"]])


def test_hf_shuffled_resume_in_stateful_dataloader_workers_fails_to_restore(pq_files):
    """datasets 5.2: load_state_dict in a worker raises IndexError (chapter 08 shows it)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make():
        ds = _hf_parquet(pq_files).shuffle(seed=0, buffer_size=64).with_format("torch")
        return StatefulDataLoader(ds, batch_size=256, num_workers=2, timeout=60)

    trial = lk.resume_trial(make, stops=(3, 2), record_errors=True,
                            ids_of=lambda b: b["id"].tolist())
    assert trial.runs[0].ok
    assert "IndexError" in (trial.runs[1].error or ""), trial.table()


@pytest.mark.parametrize("fault, error", [
    (lk.Fault("drop", path="shard-00001.tar", after_bytes=20_000), "exit 18|unexpected end"),
    (lk.Fault("status", path="shard-00001.tar", code=404), "exit 22|empty file"),
])
def test_webdataset_over_http_faults_raise_and_leave_no_curl_behind(wds_fx, fault, error):
    import webdataset as wds

    with lk.remote.serve(wds_fx, faults=[fault]) as srv:
        with pytest.raises(Exception, match=error):
            sum(1 for _ in wds.WebDataset(srv.urls("*.tar"), shardshuffle=False))
    assert not lk.worker_processes()  # curl is a child process: it must be gone


def test_webdataset_over_http_retries_a_transient_503(wds_fx):
    import webdataset as wds

    fault = lk.Fault("status", path="shard-00000.tar", nth=1)
    with lk.remote.serve(wds_fx, faults=[fault]) as srv:
        n = sum(1 for _ in wds.WebDataset(srv.urls("*.tar"), shardshuffle=False))
        statuses = [r.status for r in srv.log if r.path == "shard-00000.tar"]
    assert n == wds_fx.samples and statuses == [503, 200]  # curl --retry
