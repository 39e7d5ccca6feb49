"""Rebuilding a learner's DataLoader with other knobs, everything else kept (chapter 13).

``labkit diagnose`` and the timeline need the same loader with a knob changed (more
workers, num_workers=0 for an in-process profile, a wrapped dataset). A DataLoader keeps
what it was built with as public attributes; this reads them back and builds the copy with
``torch.utils.data.DataLoader`` itself. A copy with workers waits at least
:data:`WORKER_TIMEOUT_S` for a batch and then raises, so none can hang a diagnosis.
"""

from __future__ import annotations

from torch.utils.data import DataLoader, IterableDataset

from ..loading.loaders import WORKER_TIMEOUT_S

#: The knobs :func:`rebuild_loader` may change; anything else is kept from the original.
KNOBS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")


def rebuild_loader(loader: DataLoader, *, dataset=None, collate_fn=None, **knobs) -> DataLoader:
    """A new DataLoader like ``loader`` with ``knobs`` (and optionally dataset/collate) replaced.

    The batches are the same: the original's batch sampler (or sampler and batch size),
    collate_fn, drop_last, worker_init_fn, generator, ``in_order`` and start method are
    reused. torch's rules are kept: ``prefetch_factor``, ``persistent_workers`` and a
    ``timeout`` only with workers; with workers the timeout is at least
    :data:`WORKER_TIMEOUT_S`.
    """
    bad = set(knobs) - set(KNOBS)
    if bad:
        raise TypeError(f"rebuild_loader() cannot change {sorted(bad)}; knobs: {', '.join(KNOBS)}")
    nw = knobs.get("num_workers", loader.num_workers)
    had_workers = loader.num_workers > 0
    pf = knobs.get("prefetch_factor", loader.prefetch_factor if had_workers else None)
    pw = knobs.get("persistent_workers", loader.persistent_workers)
    kw = dict(
        num_workers=nw,
        collate_fn=collate_fn or loader.collate_fn,
        pin_memory=knobs.get("pin_memory", loader.pin_memory),
        # torch: no timeout without workers (its one-process iterator refuses one)
        timeout=max(loader.timeout, WORKER_TIMEOUT_S) if nw > 0 else 0,
        worker_init_fn=loader.worker_init_fn,
        # torch refuses a start method without workers, and uses the default for a None
        multiprocessing_context=loader.multiprocessing_context if nw > 0 else None,
        generator=loader.generator,
        prefetch_factor=pf if nw > 0 else None,
        persistent_workers=bool(pw) and nw > 0,
        in_order=loader.in_order,
    )
    ds = dataset if dataset is not None else loader.dataset
    if isinstance(loader.dataset, IterableDataset):
        return DataLoader(ds, batch_size=loader.batch_size, drop_last=loader.drop_last, **kw)
    if loader.batch_sampler is not None:  # batch_size= built one; or the learner passed it
        return DataLoader(ds, batch_sampler=loader.batch_sampler, **kw)
    return DataLoader(ds, batch_size=None, sampler=loader.sampler, **kw)
