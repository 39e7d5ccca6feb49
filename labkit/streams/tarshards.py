"""A resumable stream over tar shards, what chapters 06-08's libraries do: the fault-matrix tests'.

Not public (chapter 08 types its own ``ResumableIds``). Resume is exact because an epoch's
order is a pure function of ``(seed, epoch, slot)`` over sample positions (shard, index),
computed before any byte is read: a checkpoint needs only how many samples each worker yielded.
"""

from __future__ import annotations

import io
import itertools
import tarfile
from pathlib import Path

import numpy as np
import torch

from ..data.fixtures import source_files
from ..errors import DataFormatError
from .split import Place, SplitStream


def shuffle_buffer(items, buffer_size: int, rng: np.random.Generator):
    """``items`` through a shuffle buffer of ``buffer_size`` (1 or less: as is): each new item
    replaces a random buffered one, which is emitted; the numbers come from ``rng``."""
    if buffer_size <= 1:
        yield from items
        return
    buf: list = []
    for item in items:
        if len(buf) < buffer_size:
            buf.append(item)
            continue
        k = int(rng.integers(len(buf)))
        yield buf[k]
        buf[k] = item
    while buf:
        yield buf.pop(int(rng.integers(len(buf))))


def index_shard(path: Path) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """``[(key, {ext: (offset, size)})]`` in file order, from the tar headers only."""
    samples: dict[str, dict[str, tuple[int, int]]] = {}
    last = None
    try:
        size = path.stat().st_size
        with tarfile.open(path, "r:") as tar:
            for m in tar:
                last = m
                if not m.isfile():
                    continue
                key, _, ext = m.name.partition(".")
                samples.setdefault(key, {})[ext] = (m.offset_data, m.size)
            # tarfile stops quietly at a header cut short, so check the archive's end once:
            # a whole tar ends with two 512-byte zero blocks after the last member
            end = tar.offset
    except FileNotFoundError:
        raise DataFormatError(f"{path}: shard not found") from None
    except tarfile.TarError as e:
        # "unexpected end of data": tarfile found a member whose bytes run past the end
        if last is not None and last.offset_data + last.size > size:
            whole = sum(all(o + n <= size for o, n in members.values())
                        for members in samples.values())  # every member inside the file
            raise DataFormatError(
                f"{path}: the shard is truncated ({size} bytes, member {last.name} needs "
                f"{last.offset_data + last.size}); {whole} samples readable before the cut"
            ) from None
        raise DataFormatError(f"{path}: not a readable tar shard ({e})") from None
    if end + 1024 > size:
        raise DataFormatError(f"{path}: the shard is truncated ({size} bytes, its members and "
                              f"end-of-archive blocks need {end + 1024}); {len(samples)} "
                              "samples readable before the cut")
    return list(samples.items())


class TarShardStream(SplitStream):
    """``{"id", "label", "features"}`` samples of a ``wds`` Fixture, a folder of ``.tar`` shards
    or a list of them, shards round-robin over ``rank x worker``; ``shuffle_shards`` permutes
    them per epoch, ``buffer_size`` (0: none) shuffles samples."""

    splits = ("rank_worker",)

    def __init__(self, source, *, seed: int = 0, shuffle_shards: bool = True,
                 buffer_size: int = 0, rank: int | None = None, world_size: int | None = None):
        super().__init__(seed=int(seed), rank=rank, world_size=world_size)
        self.shards = source_files(source, ".tar")
        self.shuffle_shards, self.buffer_size = shuffle_shards, buffer_size
        self._index: dict[int, list] = {}
        self._yielded = 0  # samples this process's current iterator has yielded
        self._skip = 0     # samples to skip at the next __iter__ (set by a resume)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch; a new one starts at its beginning (the same keeps a resume)."""
        if int(epoch) != self.epoch:
            self._yielded = self._skip = 0
        super().set_epoch(epoch)

    @property
    def shuffled(self) -> bool:
        """Whether the shard list is permuted (the buffer shuffles anyway when it has a size)."""
        return self.shuffle_shards

    def _shard_index(self, s: int) -> list:
        if s not in self._index:
            self._index[s] = index_shard(self.shards[s])
        return self._index[s]

    def _positions(self, place: Place) -> list[tuple[int, int]]:
        """This slot's ``(shard, index)`` positions for the epoch, in yield order."""
        positions = [(s, k) for s in self.share(len(self.shards), place)
                     for k in range(len(self._shard_index(s)))]
        return list(shuffle_buffer(positions, self.buffer_size, self.rng(place.slot, 1)))

    def _read(self, s: int, k: int, fh) -> dict:
        key, members = self._shard_index(s)[k]
        path = self.shards[s]

        def member(ext):
            if ext not in members:
                raise DataFormatError(f"{path}: sample {key} has no .{ext} member")
            offset, size = members[ext]
            fh.seek(offset)
            data = fh.read(size)
            if len(data) != size:
                raise DataFormatError(f"{path}: sample {key}.{ext} is cut short "
                                      f"({len(data)} of {size} bytes)")
            return data

        try:
            features = np.load(io.BytesIO(member("npy")))
            label = int(member("cls"))
        except (ValueError, EOFError) as e:
            raise DataFormatError(f"{path}: sample {key} cannot be decoded ({e})") from None
        return {"id": int(key), "label": label, "features": torch.from_numpy(features)}

    def __iter__(self):
        order = self._positions(self.place())
        skip, self._skip = self._skip, 0  # a pending resume's samples, skipped once
        self._yielded = skip
        for sample in self._reads(order[skip:]):
            self._yielded += 1
            yield sample

    def _reads(self, positions):
        for s, group in itertools.groupby(positions, key=lambda p: p[0]):  # one shard open
            with open(self.shards[s], "rb") as fh:
                for _, k in group:
                    yield self._read(s, k, fh)

    def fingerprint(self) -> dict:  # what must match for a state to apply
        return {"seed": self.seed, "buffer_size": self.buffer_size, "shards": len(self.shards)}

    def state_dict(self) -> dict:
        """Where this process's iterator stands (``samples_yielded``: torchdata's word)."""
        return {"epoch": self.epoch, "samples_yielded": self._yielded, **self.fingerprint()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` at the next ``iter()`` (same shards and knobs)."""
        mine = self.fingerprint()
        theirs = {k: state.get(k) for k in mine}
        if theirs != mine:
            raise ValueError(f"state is for a different stream: {theirs}, this one is {mine}")
        self.epoch, self._skip = int(state["epoch"]), int(state["samples_yielded"])
        self._yielded = self._skip  # state_dict() before the next iter() says the same
