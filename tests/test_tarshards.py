"""TarShardStream: the kit's resumable stream over tar shards, under the contracts."""

from __future__ import annotations

import numpy as np
import pytest
from contracts import (
    check_exactly_once,
    check_lazy_equals_eager,
    check_resume,
    check_same_order,
    epoch_ids,
)
from torch.utils.data import DataLoader

import labkit as lk
from labkit.errors import DataFormatError
from labkit.streams.tarshards import TarShardStream, shuffle_buffer

pytestmark = pytest.mark.filterwarnings("ignore:.set_vital. is deprecated")


def _loader(stream, num_workers=0, batch_size=32):
    return DataLoader(stream, batch_size=batch_size, num_workers=num_workers,
                      timeout=30 if num_workers else 0)


@pytest.fixture(scope="module")
def wds(ci_fixture):
    return ci_fixture("wds")


@pytest.mark.parametrize("buffer_size", [0, 64])
def test_exactly_once_over_workers_and_ranks(wds, buffer_size):
    def make(rank, world_size, num_workers):
        return _loader(TarShardStream(wds, seed=1, buffer_size=buffer_size, rank=rank,
                                      world_size=world_size), num_workers)

    check_exactly_once(make, wds.samples)


def test_same_seed_same_order_new_epoch_new_order(wds):
    def make_seeded(seed, epoch):
        s = TarShardStream(wds, seed=seed, buffer_size=64)
        s.set_epoch(epoch)
        return _loader(s)

    first = check_same_order(make_seeded)
    assert sorted(first) == list(range(wds.samples))


def test_unshuffled_is_the_stored_order(wds):
    ids = epoch_ids(_loader(TarShardStream(wds, shuffle_shards=False)))
    assert ids == list(range(wds.samples))


def test_lazy_equals_eager_npy_members(wds):
    import io
    import tarfile

    eager = {}
    for shard in wds.file_list(".tar"):
        with tarfile.open(shard) as tar:
            for m in tar:
                if m.name.endswith(".npy"):
                    eager[int(m.name.split(".")[0])] = np.load(io.BytesIO(tar.extractfile(m)
                                                                          .read()))
    stream = TarShardStream(wds, buffer_size=64)
    n = check_lazy_equals_eager(_loader(stream), eager.__getitem__,
                                values_of=lambda b: b["features"])
    assert n == wds.samples


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_with_stateful_dataloader(wds, num_workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make():
        kw = {"timeout": 30} if num_workers else {}
        stream = TarShardStream(wds, seed=3, buffer_size=64)
        return StatefulDataLoader(stream, batch_size=32,
                                  num_workers=num_workers, **kw)

    trial = check_resume(make, stops=(3, 4), name=f"TarShardStream w{num_workers}")
    assert [r.name for r in trial.runs] == ["uninterrupted", "resumed once", "resumed twice"]


def test_resume_of_the_dataset_itself(wds):
    """No torchdata: iterate the stream and save its own state between samples."""
    def make():
        return TarShardStream(wds, seed=3, buffer_size=64)

    check_resume(make, stops=(100, 57), ids_of=lambda sample: [sample["id"]])


def test_state_for_another_stream_is_refused(wds):
    state = TarShardStream(wds, seed=3).state_dict()
    with pytest.raises(ValueError, match="different stream"):
        TarShardStream(wds, seed=4).load_state_dict(state)


def test_shuffle_buffer_is_a_permutation():
    rng = np.random.default_rng(0)
    out = list(shuffle_buffer(list(range(100)), 10, rng))
    assert sorted(out) == list(range(100)) and out != list(range(100))
    assert list(shuffle_buffer([1, 2, 3], 0, rng)) == [1, 2, 3]


def test_truncated_shard_names_the_file(wds, tmp_path):
    bad = lk.damaged_copy(wds, tmp_path / "wds", "truncate", file="shard-00001.tar", at=0.5)
    with pytest.raises(DataFormatError, match="shard-00001.tar"):
        epoch_ids(_loader(TarShardStream(tmp_path / "wds", shuffle_shards=False)))
    assert bad.name == "shard-00001.tar"


def test_shard_cut_inside_a_member_header_is_not_silently_short(wds, tmp_path):
    """tarfile stops quietly at a cut header; the stream must not deliver a short shard."""
    shard = wds.file_list(".tar")[1]
    _, members = TarShardStream([shard])._shard_index(0)[5]
    cut = min(offset for offset, _ in members.values()) - 256  # inside that member's header
    bad = tmp_path / "cut.tar"
    bad.write_bytes(shard.read_bytes()[:cut])
    with pytest.raises(DataFormatError, match=r"cut.tar: the shard is truncated"):
        epoch_ids(_loader(TarShardStream([bad], shuffle_shards=False)))


def test_state_saved_after_set_epoch_starts_the_new_epoch(wds):
    s = TarShardStream(wds, seed=1)
    n = sum(1 for _ in s)
    s.set_epoch(1)
    t = TarShardStream(wds, seed=1)
    t.load_state_dict(s.state_dict())
    assert sum(1 for _ in t) == n == wds.samples


def test_missing_shard_names_the_file(wds, tmp_path):
    with pytest.raises(DataFormatError, match="gone.tar"):
        epoch_ids(_loader(TarShardStream([tmp_path / "gone.tar"])))
