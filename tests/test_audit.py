import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import labkit as lk
from labkit.data.faults import damage
from labkit.streams.split import current_split


def test_exactly_once():
    a = lk.audit({"worker0": [0, 2, 4], "worker1": np.array([1, 3, 5])}, 6)
    assert a.ok and a.duplicates == 0 and a.missing == 0
    assert a.per_source["worker1"] == {"samples": 3, "unique": 3, "shared": 0}
    assert "exactly once" in a.table()


def test_duplicates_missing_unexpected_counted():
    a = lk.audit([("w0", torch.tensor([0, 1, 2])), ("w1", [0, 1, 2]), ("w0", 9)], range(4))
    assert (a.delivered, a.unique, a.duplicates, a.missing) == (7, 4, 3, 1)
    assert a.duplicate_ids == (0, 1, 2) and a.missing_ids == (3,) and a.unexpected_ids == (9,)
    assert a.per_source["w0"]["shared"] == 3 and a.per_source["w1"]["shared"] == 3
    assert not a.ok
    text = a.table()
    assert "duplicated ids: 0, 1, 2" in text and "missing ids: 3" in text
    obs = a.as_observations("x y", {"num_workers": 2})
    assert {o["name"]: o["value"] for o in obs} == {"x_y.expected": 4, "x_y.delivered": 7,
                                                    "x_y.duplicates": 3, "x_y.missing": 1}
    assert {o["unit"] for o in obs} == {"samples"}
    assert all(o["config"] == {"num_workers": 2} for o in obs)


def test_pairs_as_lists_from_json():
    import json

    pairs = json.loads(json.dumps([("rank0", [0, 1]), ("rank1", [2, 3])]))
    assert sorted(lk.audit(pairs, 4).per_source) == ["rank0", "rank1"]


def test_plain_ids_and_long_lists_are_shortened():
    a = lk.audit(list(range(20)) * 2, 20)
    assert list(a.per_source) == ["all"] and a.duplicates == 20
    assert "(20 in all)" in a.table(max_ids=5)


def test_table_is_deterministic():
    d = {"b": [1, 2], "a": [0, 3]}
    assert lk.audit(d, 4).table() == lk.audit(dict(reversed(d.items())), 4).table()


class _Tagged(IterableDataset):
    """The trap: every worker yields every id."""

    def __iter__(self):
        tag = current_split().source
        for i in range(6):
            yield tag, i


def test_current_split_source_in_workers():
    assert current_split().source == "main"
    loader = DataLoader(_Tagged(), batch_size=None, num_workers=2, timeout=30)
    a = lk.audit([(t, i) for t, i in loader], 6)
    assert sorted(a.per_source) == ["worker0", "worker1"] and a.duplicates == 6


def test_current_split_source_reads_rank(monkeypatch):
    """torchrun sets RANK and WORLD_SIZE; the label is the streams' own (Place.source)."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert current_split().source == "rank1/main"
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    # one rank: no rank prefix, as every stream labels it
    assert current_split().source == "main"


@pytest.mark.parametrize("how", ["truncate", "flip", "zero", "delete"])
def test_damaged_copy_leaves_source_alone(tmp_path, how):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(bytes(range(200)))
    out = lk.damaged_copy(src, tmp_path / "copy", how, file="a.bin", at=0.25, length=10)
    assert (src / "a.bin").read_bytes() == bytes(range(200))
    if how == "delete":
        assert not out.exists()
    elif how == "truncate":
        assert out.read_bytes() == bytes(range(50))
    else:
        data = out.read_bytes()
        assert len(data) == 200 and data[:50] == bytes(range(50)) and data[60:] == bytes(
            range(60, 200))
        assert data[50:60] == (bytes(255 - b for b in range(50, 60)) if how == "flip"
                               else bytes(10))


def test_damage_bad_arguments(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    with pytest.raises(ValueError, match="choose one of"):
        damage(f, "burn")
    with pytest.raises(ValueError, match="fraction"):
        damage(f, "flip", at=1.5)
    with pytest.raises(FileNotFoundError, match="no such file"):
        damage(tmp_path / "nope", "flip")
    with pytest.raises(ValueError, match="file="):
        lk.damaged_copy(tmp_path, tmp_path / "c", "flip")
    with pytest.raises(FileNotFoundError, match="nope"):
        lk.damaged_copy(tmp_path, tmp_path / "c", "flip", file="nope")


def test_contracts_catch_the_trap():
    """The shared contract check fails on the duplicate trap and passes on a sharded dataset."""
    from contracts import check_exactly_once, check_same_order

    class Trap(IterableDataset):
        def __iter__(self):
            return iter([(torch.zeros(1), i) for i in range(8)])

    with pytest.raises(AssertionError, match="not exactly once"):
        check_exactly_once(lambda r, w, n: DataLoader(Trap(), batch_size=None, num_workers=n,
                                                      timeout=30 if n else 0), 8,
                           world_sizes=(1,))
    check_exactly_once(lambda r, w, n: [(None, list(range(r, 8, w)))], 8, workers=(0,))
    check_same_order(lambda s, e: [(None, list(np.random.default_rng(s * 10 + e)
                                                .permutation(8)))])
