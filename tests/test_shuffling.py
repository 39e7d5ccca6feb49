"""Shuffle-quality metrics: known values for the stored order and a full permutation."""

from __future__ import annotations

import numpy as np
import pytest

import labkit as lk
from labkit.data.writers import shard_bounds

SHARD = lk.instruments.shard_of_bounds([0, 250, 500, 750])


def test_stored_order_is_unshuffled():
    q = lk.instruments.shuffle_quality(range(1000), SHARD, [250] * 4)
    assert q["displacement"] == 0 and q["rank_correlation"] == 1
    assert q["same_shard_neighbours"] == pytest.approx(996 / 999)


def test_full_permutation_matches_expectations():
    order = np.random.default_rng(0).permutation(20_000)
    shard = lk.instruments.shard_of_bounds(shard_bounds(20_000, 4))
    q = lk.instruments.shuffle_quality(order, shard, [5_000] * 4)
    assert q["displacement"] == pytest.approx(1 / 3, abs=0.01)
    assert abs(q["rank_correlation"]) < 0.03
    assert q["same_shard_neighbours"] == pytest.approx(q["same_shard_if_permuted"], abs=0.02)


@pytest.mark.parametrize("n, k", [(1000, 4), (10, 3), (100_000, 64)])
def test_shard_of_bounds_inverts_the_cut(n, k):
    bounds = shard_bounds(n, k)
    shard = lk.instruments.shard_of_bounds(bounds)
    assert [shard(i) for i in range(n)] == [s for s in range(k)
                                           for _ in range(bounds[s], bounds[s + 1])]


def test_reversed_order_has_rank_correlation_minus_one():
    q = lk.instruments.shuffle_quality(range(99, -1, -1))
    assert q["rank_correlation"] == pytest.approx(-1)


def test_works_on_any_ids_not_only_0_to_n():
    q = lk.instruments.shuffle_quality([10, 30, 20], None)
    assert q["samples"] == 3 and "same_shard_neighbours" not in q


def test_empty_order_is_an_error():
    with pytest.raises(ValueError, match="empty order"):
        lk.instruments.shuffle_quality([])

