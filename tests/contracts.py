"""Contract checks reused for every teaching dataset and loader the chapters build.

One generic check per promise (style guide: torchdata's ``run_test_save_load_state``):

* ``check_exactly_once``: over ``num_workers`` in {0, 1, 2} x ``world_size`` in {1, 2}, every
  sample id comes exactly once per epoch, across all ranks and workers together.
* ``check_same_order``: the same seed gives the same order; a different epoch or seed a
  different one (when the loader shuffles).
* ``check_lazy_equals_eager``: what a lazy loader yields equals an eager reference.

A loader is described by a factory ``make(rank, world_size, num_workers) -> iterable of
batches``; ``ids_of(batch)`` returns the sample ids in a batch (default: ``batch["id"]`` for a
dict, else ``batch[1]``, the kit's ``(features, id)`` convention).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from labkit.instruments.audits import audit, ids_of  # ids_of: the kit's one reading of ids

WORKERS = (0, 1, 2)
WORLD_SIZES = (1, 2)


def epoch_ids(loader: Iterable, ids_of: Callable = ids_of) -> list[int]:
    """Every id one full pass over ``loader`` yields, in order; drops the iterator (its
    workers stop)."""
    it = iter(loader)
    try:
        return [i for batch in it for i in ids_of(batch)]
    finally:
        del it


def check_exactly_once(make: Callable, expected, *, ids_of: Callable = ids_of,
                       workers=WORKERS, world_sizes=WORLD_SIZES):
    """Assert exactly-once coverage for every (num_workers, world_size); returns the audits."""
    audits = {}
    for world_size in world_sizes:
        for num_workers in workers:
            deliveries = [(f"rank{rank}", epoch_ids(make(rank, world_size, num_workers), ids_of))
                          for rank in range(world_size)]
            result = audit(deliveries, expected)
            if not result.ok:
                raise AssertionError(
                    f"not exactly once with world_size={world_size}, num_workers={num_workers}:"
                    f"\n{result.table()}")
            audits[(world_size, num_workers)] = result
    return audits


def check_same_order(make_seeded: Callable, *, ids_of: Callable = ids_of,
                     shuffles: bool = True) -> list[int]:
    """``make_seeded(seed, epoch)`` twice with the same arguments gives the same order.

    With ``shuffles``, a different seed and a different epoch each give a different order
    (over the same ids).
    """
    first = epoch_ids(make_seeded(0, 0), ids_of)
    assert epoch_ids(make_seeded(0, 0), ids_of) == first, "same seed and epoch, new order"
    if shuffles:
        for args in ((1, 0), (0, 1)):
            other = epoch_ids(make_seeded(*args), ids_of)
            assert sorted(other) == sorted(first), f"seed/epoch {args} changed the ids"
            assert other != first, f"seed/epoch {args} gave the same order as (0, 0)"
    return first


def check_lazy_equals_eager(lazy: Iterable, eager: Callable[[int], np.ndarray], *,
                            ids_of: Callable = ids_of,
                            values_of: Callable = lambda b: b[0]) -> int:
    """Every sample ``lazy`` yields equals ``eager(id)``, the reference row; returns the count."""
    n = 0
    it = iter(lazy)
    try:
        for batch in it:
            values = np.asarray(values_of(batch))
            ids = ids_of(batch)
            values = values.reshape(len(ids), -1)
            for i, row in zip(ids, values, strict=True):
                np.testing.assert_array_equal(row, np.asarray(eager(i)).reshape(-1),
                                              err_msg=f"sample {i}")
                n += 1
    finally:
        del it
    return n


def check_resume(make: Callable, stops=(3, 2), *, name: str = "loader", ids_of=ids_of,
                 state_of: Callable | None = None, load_state: Callable | None = None):
    """Uninterrupted = resumed once = resumed twice: same ids, same order, none lost or repeated.

    ``make()`` returns a fresh stateful loader (a restart); ``state_of(loader)`` and
    ``load_state(loader, state)`` default to its ``state_dict`` / ``load_state_dict``.
    Returns the ``lk.resume_trial`` result (its ``table()`` counts lost/duplicated ids).
    """
    from labkit.instruments.resume import resume_trial

    kw = {k: v for k, v in (("state_of", state_of), ("load_state", load_state)) if v}
    trial = resume_trial(make, stops, name=name, ids_of=ids_of, **kw)
    if not trial.ok:
        raise AssertionError(f"resume changed the epoch:\n{trial.table()}")
    assert len(trial.runs[0].ids) > sum(stops), "the epoch ended before the last stop"
    return trial
