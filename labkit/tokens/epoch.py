"""Documents, not windows: a sample index over shuffled documents, and exact resume (chapter 11c).

Megatron-style: each epoch shuffles the documents (seeded by seed and epoch), lays them back
to back, and cuts that stream into samples of ``context + 1`` tokens that overlap by one
(sample ``i`` starts at ``i * context``), so every token is an input exactly once and only
the last ``< context + 1`` tokens are left over; then the samples themselves are shuffled.
Everything is a pure function of (corpus, context, seed, epoch), so the state a resume needs
is how many samples were consumed (OLMo-core keeps the same: a global order plus a counter),
with a fingerprint that refuses a different corpus or context.

Over ranks, the order is cut into *global batches* of ``world_size x batch_size`` samples and
rank ``r`` takes the ``r``-th slice of each. The kit's strided split
(:func:`~labkit.streams.split.assign`, global worker ``g`` takes ``g, g + total, ...``) would
be exactly-once too, but after ``s`` steps the samples consumed would not be a prefix of the
order; with global batches they are, so one counter is the whole state of every rank and
worker, and a run stopped at one world size resumes exactly at another.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from ..loading.loaders import WORKER_TIMEOUT_S
from ..streams.split import current_split
from .corpus import TokenCorpus


class DocumentEpoch:
    """The sample index of one epoch: which file positions each sample reads.

    Attributes:
        doc_order: the documents in this epoch's order.
        sample_order: the order samples are delivered in.
        samples: how many samples of ``context + 1`` tokens the epoch holds.
        remainder: tokens at the end of the epoch's stream that are no sample's input.
    """

    def __init__(self, corpus: TokenCorpus, context: int, seed: int = 0, epoch: int = 0,
                 shuffle: bool = True):
        self.path, self.dtype = Path(corpus.path), corpus.tokens.dtype
        self.offsets, self.context, self.seed, self.epoch = corpus.offsets, context, seed, epoch
        rng = np.random.default_rng([seed, epoch])
        docs = len(corpus.offsets) - 1
        self.doc_order = rng.permutation(docs) if shuffle else np.arange(docs)
        lengths = np.diff(corpus.offsets)[self.doc_order]
        self.cum = np.concatenate([[0], np.cumsum(lengths)])
        total = int(self.cum[-1])
        self.samples = max((total - 1) // context, 0)
        self.remainder = total - self.samples * context
        self.sample_order = rng.permutation(self.samples) if shuffle else np.arange(self.samples)
        self._tokens = None

    @property
    def fingerprint(self) -> str:
        """What a saved state must match: the document index, the token count and context."""
        h = hashlib.sha256(np.ascontiguousarray(self.offsets).tobytes())
        h.update(f"{self.context}".encode())
        return h.hexdigest()[:16]

    def positions(self, samples) -> tuple[np.ndarray, np.ndarray]:
        """File positions and document ids of the ``context + 1`` tokens of each sample."""
        coords = np.asarray(samples)[:, None] * self.context + np.arange(self.context + 1)
        k = np.searchsorted(self.cum, coords, side="right") - 1
        doc = self.doc_order[k]
        return self.offsets[doc] + (coords - self.cum[k]), doc

    def batch(self, first: int, batch_size: int) -> dict:
        """Samples ``sample_order[first:first + batch_size]``: x, y, and their provenance."""
        if self._tokens is None:  # opened on first use: a worker maps the file itself
            n = self.path.stat().st_size // self.dtype.itemsize
            self._tokens = np.memmap(self.path, dtype=self.dtype, mode="r", shape=(n,))
        samples = self.sample_order[first:first + batch_size]
        pos, doc = self.positions(samples)
        rows = torch.from_numpy(self._tokens[pos].astype(np.int64))
        return {"x": rows[:, :-1], "y": rows[:, 1:], "pos": torch.from_numpy(pos[:, :-1]),
                "doc": torch.from_numpy(doc[:, :-1]), "sample": torch.from_numpy(samples)}

    def __getstate__(self):  # never pickle a memory map's bytes into a worker
        return {**self.__dict__, "_tokens": None}


class _Batches(torch.utils.data.IterableDataset):
    """One rank's batches from sample ``start`` on, over its workers.

    Step ``s`` is the global batch ``start + s * world_size * batch_size ...``; this rank reads
    its slice of it, and worker ``w`` of ``k`` reads steps ``w, w + k, ...``. The DataLoader
    takes one batch from each worker in turn, so it delivers the rank's steps in order,
    whatever the number of workers.
    """

    def __init__(self, epoch: DocumentEpoch, start: int, batch_size: int, drop_last: bool,
                 rank: int = 0, world_size: int = 1):
        self.epoch, self.start = epoch, start
        self.batch_size, self.drop_last = batch_size, drop_last
        self.rank, self.world_size = rank, world_size

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, k = (info.id, info.num_workers) if info else (0, 1)
        n, step = self.epoch.samples, self.batch_size * self.world_size
        last = n - (n - self.start) % step if self.drop_last else n
        for s, first in enumerate(range(self.start, last, step)):
            mine = first + self.rank * self.batch_size
            if s % k == w and mine < last:
                yield self.epoch.batch(mine, min(self.batch_size, last - mine))


class TokenBatches:
    """An epoch of document-shuffled token batches with a small, replayable state (chapter 11c).

    Iterate it for ``{"x", "y", "pos", "doc", "sample"}`` batches. ``state_dict()`` after any
    batch is ``{seed, epoch, samples_yielded, fingerprint}``; a fresh ``TokenBatches`` given
    that state continues exactly where the old one stopped, with any ``num_workers`` and any
    ``batch_size`` (the counter is in samples). A state from another corpus or context is
    refused with an error saying which.

    Over ranks (``rank``, ``world_size``; default: :func:`~labkit.streams.split.current_split`)
    ``batch_size`` is per rank and each step is one global batch of ``world_size x
    batch_size`` samples, rank ``r`` its ``r``-th slice. ``samples_yielded`` counts global
    samples (steps x global batch, as OLMo-core's ``batches_processed``), so every rank saves
    the same state, and it resumes at any world size (chapter 11c, section 2).
    """

    def __init__(self, corpus: TokenCorpus, context: int, batch_size: int, *, seed: int = 0,
                 epoch: int = 0, num_workers: int = 0, drop_last: bool = False,
                 timeout: float = WORKER_TIMEOUT_S, rank: int | None = None,
                 world_size: int | None = None):
        self.index = DocumentEpoch(corpus, context, seed, epoch)
        self.batch_size, self.num_workers, self.drop_last = batch_size, num_workers, drop_last
        place = current_split(rank, world_size)  # fails here on a rank outside the world
        self.rank, self.world_size = place.rank, place.world_size
        self.timeout = timeout
        self.samples_yielded = 0

    def dataset(self) -> torch.utils.data.IterableDataset:
        """The ``IterableDataset`` this iterates: this rank's batches from the counter on.

        It yields whole batches, so a loader over it takes ``batch_size=None``; worker ``w``
        of ``k`` builds steps ``w, w + k, ...``. Iterating it does not move the counter.
        """
        return _Batches(self.index, self.samples_yielded, self.batch_size, self.drop_last,
                        self.rank, self.world_size)

    def __iter__(self):
        start = self.samples_yielded
        ds = self.dataset()
        # batch_size=None: each worker yields whole batches; timeout: a stuck worker raises
        # (torch refuses a timeout without workers: the main process cannot time itself)
        loader = DataLoader(ds, batch_size=None, num_workers=self.num_workers,
                            timeout=self.timeout if self.num_workers > 0 else 0)
        step = self.batch_size * self.world_size
        it = iter(loader)
        try:
            for s, batch in enumerate(it, 1):  # counted here, in the training process
                # every rank finished global step s with this batch: one counter for all
                self.samples_yielded = min(start + s * step, self.index.samples)
                yield batch
        finally:  # also when the consumer stops mid-epoch (close(), or the generator dropped)
            del it  # the iterator's last reference: torch stops its workers now
        self.samples_yielded = 0  # a finished epoch: the next iteration starts it again

    def state_dict(self) -> dict:
        ix = self.index
        return {"seed": ix.seed, "epoch": ix.epoch, "samples_yielded": self.samples_yielded,
                "fingerprint": ix.fingerprint}

    def load_state_dict(self, state: dict) -> None:
        ix = self.index
        if state["fingerprint"] != ix.fingerprint:
            raise ValueError(
                f"resume state fingerprint {state['fingerprint']} does not match this loader's "
                f"{ix.fingerprint}: the document index or the context ({ix.context}) changed "
                "since the state was saved; resuming would deliver different tokens")
        if (state["seed"], state["epoch"]) != (ix.seed, ix.epoch):
            raise ValueError(f"resume state is for seed {state['seed']}, epoch {state['epoch']}; "
                             f"this loader has seed {ix.seed}, epoch {ix.epoch}")
        self.samples_yielded = int(state["samples_yielded"])
