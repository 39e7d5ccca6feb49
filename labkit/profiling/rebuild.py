"""Rebuilding a learner's DataLoader with other knobs, everything else kept (chapter 13).

``labkit diagnose`` and the timeline need the same loader with a knob changed (more
workers, num_workers=0 for an in-process profile, a wrapped dataset). A DataLoader keeps
what it was built with as public attributes; this reads them back and builds the copy
with :func:`lk.make_loader`, so every copy with workers has a ``timeout=``.
"""

from __future__ import annotations

from torch.utils.data import DataLoader, IterableDataset

from ..loading.loaders import make_loader

#: The knobs :func:`rebuild_loader` may change; anything else is kept from the original.
KNOBS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")


def rebuild_loader(loader: DataLoader, *, dataset=None, collate_fn=None, **knobs) -> DataLoader:
    """A new DataLoader like ``loader`` with ``knobs`` (and optionally dataset/collate) replaced.

    The batches are the same: the original's batch sampler (or sampler and batch size)
    and its worker_init_fn, generator and start method are reused.
    """
    bad = set(knobs) - set(KNOBS)
    if bad:
        raise TypeError(f"rebuild_loader() cannot change {sorted(bad)}; knobs: {', '.join(KNOBS)}")
    nw = knobs.get("num_workers", loader.num_workers)
    kw = dict(
        num_workers=nw,
        pin_memory=knobs.get("pin_memory", loader.pin_memory),
        collate_fn=collate_fn or loader.collate_fn,
        worker_init_fn=loader.worker_init_fn,
        generator=loader.generator,
    )
    if nw > 0:
        kw["persistent_workers"] = knobs.get("persistent_workers",
                                             loader.persistent_workers and loader.num_workers > 0)
        kw["prefetch_factor"] = knobs.get("prefetch_factor", loader.prefetch_factor if
                                          loader.num_workers > 0 else None)
        kw["multiprocessing_context"] = loader.multiprocessing_context
        if loader.timeout:
            kw["timeout"] = loader.timeout
    ds = dataset if dataset is not None else loader.dataset
    if isinstance(loader.dataset, IterableDataset):
        return make_loader(ds, batch_size=loader.batch_size, drop_last=loader.drop_last, **kw)
    if loader.batch_sampler is not None:
        return make_loader(ds, batch_size=1, batch_sampler=loader.batch_sampler, **kw)
    return make_loader(ds, batch_size=None, sampler=loader.sampler, **kw)
