"""``labkit bench tokens``: random token windows vs a plain copy, packing, resume (chapter 11).

Windows as nanoGPT's ``get_batch`` cuts them against one contiguous copy of as many bytes
(the ceiling); best-fit packing's padding (11b); a document epoch (11c) stopped with two
workers and resumed with one: every sample once, in the uninterrupted order.
"""

from __future__ import annotations

import bisect
import pickle
from collections import Counter

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from labkit.data.fixtures import fixture
from labkit.instruments.stats import FAIL, PASS, judge, paired_trials
from labkit.instruments.timer import best_of
from labkit.loading.loaders import WORKER_TIMEOUT_S
from labkit.scale import resolve_scale
from labkit.tokens import open_tokens

from .registry import benchmark

RATIO_GOAL, PADDING_GOAL = 0.5, 0.05


def _exact(name: str, value, ok: bool) -> dict:
    """:func:`judge`'s keys for a figure without noise (a count): its interval is the value."""
    return {name: value, f"{name}_ci": [value, value], f"{name}_ci_level": 1.0,
            f"{name}_verdict": PASS if ok else FAIL}


def _view_rows(flat: np.ndarray, starts: np.ndarray, context: int) -> np.ndarray:
    """Rows ``starts`` of the window view (row ``i`` is ``flat[i:i + context + 1]``), built with
    ``as_strided``: ``sliding_window_view``'s argument checks cost microseconds a batch."""
    view = as_strided(flat, (len(flat) - context, context + 1), flat.strides * 2, writeable=False)
    return view[starts]


def _slice_rows(flat: np.ndarray, starts: np.ndarray, context: int) -> np.ndarray:
    """One slice per window copied into a buffer of the file's dtype."""
    buf = np.empty((len(starts), context + 1), flat.dtype)
    for j, i in enumerate(starts.tolist()):
        buf[j] = flat[i:i + context + 1]
    return buf


def _best_fit_rows(lengths, context: int) -> int:
    """Rows best-fit decreasing packs ``lengths`` into: chunks of at most ``context``, longest
    first, each into the open row with the least room that fits (rows bucketed by room)."""
    chunks = sorted((min(context, n - s) for n in map(int, lengths) for s in range(0, n, context)),
                    reverse=True)
    rows, by_room, rooms = 0, {}, []  # rooms: sorted, each with a non-empty bucket
    for c in chunks:
        k = bisect.bisect_left(rooms, c)
        if k < len(rooms):
            have = rooms[k]
            by_room[have] -= 1
            if not by_room[have]:
                rooms.pop(k)
        else:
            have, rows = context, rows + 1
        if (left := have - c) > 0:
            if not by_room.get(left):
                by_room[left] = 0
                bisect.insort(rooms, left)
            by_room[left] += 1
    return rows


class _EpochBatches(IterableDataset):
    """One seeded document epoch (11c) from sample ``start`` on, in batches: documents shuffled
    and laid back to back, cut into samples of ``context + 1`` tokens, samples shuffled; worker
    ``w`` of ``k`` builds steps ``w, w + k, ...`` (the loader takes them in turn: in order)."""

    def __init__(self, corpus, context: int, batch_size: int, start: int, seed: int = 0):
        rng = np.random.default_rng([seed, 0])
        self.doc_order = rng.permutation(corpus.docs)
        self.cum = np.concatenate([[0], np.cumsum(corpus.lengths[self.doc_order])])
        self.samples = max((int(self.cum[-1]) - 1) // context, 0)
        self.order = rng.permutation(self.samples)
        self.path, self.dtype, self.offsets = corpus.path, corpus.tokens.dtype, corpus.offsets
        self.context, self.batch_size, self.start = context, batch_size, start

    def __iter__(self):
        info = get_worker_info()
        w, k = (info.id, info.num_workers) if info else (0, 1)
        tokens = np.memmap(self.path, dtype=self.dtype, mode="r")  # mapped by the reader
        for s, first in enumerate(range(self.start, self.samples, self.batch_size)):
            if s % k == w:
                samples = self.order[first:first + self.batch_size]
                coords = samples[:, None] * self.context + np.arange(self.context + 1)
                j = np.searchsorted(self.cum, coords, side="right") - 1
                rows = tokens[self.offsets[self.doc_order[j]] + coords - self.cum[j]]
                yield {"x": torch.from_numpy(rows.astype(np.int64)),
                       "sample": torch.from_numpy(samples)}


def _epoch_run(corpus, context: int, batch_size: int, state: dict, num_workers: int,
               stop_after: int | None = None) -> tuple[list[int], dict]:
    """Sample ids from ``state["samples_yielded"]`` on, and the state (counted here) after."""
    ds = _EpochBatches(corpus, context, batch_size, state["samples_yielded"])
    loader = DataLoader(ds, batch_size=None, num_workers=num_workers,
                        timeout=WORKER_TIMEOUT_S if num_workers else 0)
    got: list[int] = []
    for i, b in enumerate(loader, 1):
        got += b["sample"].tolist()
        if i == stop_after:
            break
    return got, {"samples_yielded": state["samples_yielded"] + len(got)}


def _resume_across_workers(corpus, context: int, batch_size: int, stop_after: int) -> dict:
    """Uninterrupted (0 workers) vs stopped after ``stop_after`` batches with 2 workers and
    resumed from the pickled state with 1: samples lost and repeated, same order or not."""
    ref, _ = _epoch_run(corpus, context, batch_size, {"samples_yielded": 0}, 0)
    got, state = _epoch_run(corpus, context, batch_size, {"samples_yielded": 0}, 2, stop_after)
    rest, _ = _epoch_run(corpus, context, batch_size, pickle.loads(pickle.dumps(state)), 1)
    got += rest
    seen = Counter(got)
    return {"resume_samples": len(ref), "resume_lost": len(set(ref) - set(seen)),
            "resume_repeated": sum(c - 1 for c in seen.values() if c > 1),
            "resume_same_order": got == ref}


@benchmark("tokens", goal=f"random (T+1)-token windows (T=2048, batch 64, uint16, page cache) "
                          f">= {RATIO_GOAL}x a plain contiguous copy of the same bytes (median "
                          f"of paired ratios, 95% interval); best-fit packing padding < "
                          f"{PADDING_GOAL:.0%} of the corpus fixture; resume across worker "
                          "counts: 0 samples lost, 0 repeated")
def token_windows(scale: str | None = None, context: int = 2048, batch_size: int = 64,
                  batches: int = 128, pairs: int = 9, pack_context: int = 1024,
                  resume_batch: int = 8) -> dict:
    """The module's three figures; ``scale`` sizes the corpus (ci's 1.4 MB of tokens sits in
    the CPU's caches, workshop's 20 MB does not)."""
    scale = resolve_scale(scale)
    corpus = open_tokens(fixture("corpus", scale, progress=False))
    tokens = corpus.tokens.view(np.ndarray)  # slicing an np.memmap builds a memmap per slice
    n, span = len(tokens), batch_size * (context + 1)
    tokens.sum()  # warm: the whole file into the page cache

    def run(sample):
        def go():
            rng = np.random.default_rng(0)
            for _ in range(batches):
                sample(rng)
        return go

    def copy(rng):
        start = int(rng.integers(0, n - span))
        torch.from_numpy(tokens[start:start + span].reshape(batch_size, context + 1).copy())

    def starts(rng):
        return rng.integers(0, n - context - 1, batch_size)

    candidates = {  # the faster is timed against the copy
        "window view, no cast": lambda r: torch.from_numpy(_view_rows(tokens, starts(r), context)),
        "slices, no cast": lambda r: torch.from_numpy(_slice_rows(tokens, starts(r), context))}
    quick = {k: best_of(run(f), repeats=3, clock="cpu").best_s for k, f in candidates.items()}
    best = min(quick, key=quick.get)
    trials = paired_trials(run(copy), run(candidates[best]), pairs, clock="cpu")
    gb = batches * span * tokens.itemsize / 1e9
    result = {"context": context, "batch_size": batch_size, "dtype": str(tokens.dtype),
              "tokens_in_file": n, "batches_per_trial": batches, "pairs": pairs, "sampler": best,
              "candidates_best_s": {k: round(v, 6) for k, v in quick.items()},
              "copy_gb_per_s": gb / min(c for c, _ in trials),
              "windows_gb_per_s": gb / min(w for _, w in trials),
              "windows_tokens_per_s": batches * span / min(w for _, w in trials)}
    result |= judge("ratio", [c / w for c, w in trials], RATIO_GOAL)

    padding = 1 - int(corpus.lengths.sum()) / (_best_fit_rows(corpus.lengths, pack_context)
                                               * pack_context)
    result |= {"packing_context": pack_context, "packing_documents": corpus.docs,
               **_exact("padding", padding, padding < PADDING_GOAL)}

    resume = _resume_across_workers(corpus, pack_context, resume_batch, stop_after=3)
    wrong = resume["resume_lost"] + resume["resume_repeated"]
    return result | resume | _exact("resume_lost_plus_repeated", wrong,
                                    wrong == 0 and resume["resume_same_order"])
