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


def shard_of_bounds(first_ids) -> Callable[[int], int]:
    """``shard_of`` for shards holding consecutive ids starting at ``first_ids`` (sorted).

    The inverse of the kit's one cut: a manifest's ``first_id`` values, or
    ``labkit.streams.split.shard_bounds(n, k)`` (its end bound is harmless).
    """
    starts = np.asarray(first_ids, dtype=np.int64)
    return lambda i: int(np.searchsorted(starts, i, side="right") - 1)


def shuffle_quality(order, shard_of=None, shard_sizes=None) -> dict:
    """The three measures of one delivered order (the module docstring); ``shard_of(id) ->
    shard``; ``shard_sizes`` adds ``same_shard_if_permuted``, a full permutation's share."""
    order = np.asarray(list(order), dtype=np.int64)
    n = order.size
    if n == 0:
        raise ValueError("an empty order has no shuffle quality")
    # rank of each delivered id among all delivered ids = its stored position
    moved = np.argsort(np.argsort(order, kind="stable"), kind="stable") - np.arange(n)
    rho = 1 - 6 * (moved.astype(np.float64) ** 2).sum() / (n * (n ** 2 - 1)) if n > 1 else 1.0
    out = {"samples": n, "displacement": float(np.abs(moved).mean() / n),
           "rank_correlation": float(rho)}
    if shard_of is not None:
        shards = np.array([shard_of(int(i)) for i in order])
        out["same_shard_neighbours"] = float((shards[1:] == shards[:-1]).mean()) if n > 1 else 1.0
    if shard_sizes is not None:   # sampling without replacement
        s = np.asarray(shard_sizes, dtype=np.float64)
        out["same_shard_if_permuted"] = float((s * (s - 1)).sum() / (s.sum() * (s.sum() - 1)))
    return out
