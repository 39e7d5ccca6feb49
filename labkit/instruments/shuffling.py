"""Shuffle quality: how far an order is from the stored order, measured three ways (ch. 08, 14).

A streaming loader cannot permute the whole dataset; it permutes shards and mixes samples
through a buffer. How close does that get to a full permutation? Given the ids in the order
a loader delivered them (the stored order is ``0..n-1``, sorted by id):

* **same-shard neighbours** (the chapter's headline metric): the share of consecutive
  samples that come from the same shard. A minibatch is a run of consecutive samples, so this
  is what a training step feels: 1.0 means every batch is one shard's (correlated) samples;
  a full permutation gives about ``1 / shards``. Reported with that expected value.
* **rank correlation** (Spearman) between delivered position and stored position: the
  global order left over (1: unshuffled, about 0: no trace of the stored order).
* **displacement**: mean ``|delivered position - stored position| / n``; about 1/3 for a full
  permutation, small when samples only move within a buffer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _positions(order) -> np.ndarray:
    order = np.asarray(list(order), dtype=np.int64)
    if order.size == 0:
        raise ValueError("an empty order has no shuffle quality")
    # rank of each delivered id among all delivered ids = its stored position
    return np.argsort(np.argsort(order, kind="stable"), kind="stable")


def displacement(order) -> float:
    """Mean distance between delivered and stored position, as a fraction of ``n``."""
    stored = _positions(order)
    return float(np.abs(stored - np.arange(stored.size)).mean() / stored.size)


def rank_correlation(order) -> float:
    """Spearman's rho between delivered and stored position (1: unshuffled)."""
    stored = _positions(order).astype(np.float64)
    n = stored.size
    if n < 2:
        return 1.0
    d = stored - np.arange(n)
    return float(1 - 6 * (d ** 2).sum() / (n * (n ** 2 - 1)))


def same_shard_neighbours(order, shard_of) -> float:
    """Share of consecutive pairs from the same shard; ``shard_of(id) -> shard``."""
    shards = np.array([shard_of(int(i)) for i in order])
    if shards.size < 2:
        return 1.0
    return float((shards[1:] == shards[:-1]).mean())


def expected_same_shard(shard_sizes) -> float:
    """Same-shard neighbour share of a full random permutation (sampling without replacement)."""
    s = np.asarray(shard_sizes, dtype=np.float64)
    n = s.sum()
    return float((s * (s - 1)).sum() / (n * (n - 1)))


def shard_of_bounds(first_ids) -> Callable[[int], int]:
    """``shard_of`` for shards holding consecutive ids starting at ``first_ids`` (sorted).

    The inverse of the kit's one cut: a manifest's ``first_id`` values, or
    ``labkit.streams.split.shard_bounds(n, k)`` (its end bound is harmless).
    """
    starts = np.asarray(first_ids, dtype=np.int64)
    return lambda i: int(np.searchsorted(starts, i, side="right") - 1)


def shuffle_quality(order, shard_of=None, shard_sizes=None) -> dict:
    """All three measures of one delivered order (see the module docstring)."""
    order = list(order)
    out = {"samples": len(order), "displacement": displacement(order),
           "rank_correlation": rank_correlation(order)}
    if shard_of is not None:
        out["same_shard_neighbours"] = same_shard_neighbours(order, shard_of)
    if shard_sizes is not None:
        out["same_shard_if_permuted"] = expected_same_shard(shard_sizes)
    return out
