"""Building and tearing down torch DataLoaders the way every chapter should.

:func:`make_loader` turns knob values into a DataLoader that cannot hang a workshop
(``timeout=`` whenever there are workers) and accepts every knob at every setting (torch
refuses ``prefetch_factor`` and ``persistent_workers`` without workers).
:func:`shutdown` stops an iterator's workers now instead of whenever garbage collection
runs; :func:`worker_processes` lists the ones still alive. Introduced in chapter 01.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

#: Seconds a worker may take to deliver one batch before the DataLoader raises.
DEFAULT_TIMEOUT_S = 60.0


def make_loader(
    dataset,
    *,
    batch_size: int | None = 64,
    num_workers: int = 0,
    prefetch_factor: int | None = None,
    pin_memory: bool = False,
    persistent_workers: bool = False,
    shuffle: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    **kwargs: Any,
):
    """A ``torch.utils.data.DataLoader`` from knob values, safe at every setting.

    With ``num_workers=0`` the worker-only knobs are dropped (torch raises otherwise); with
    workers, ``timeout`` is always set so a stuck worker fails the cell instead of hanging.
    ``pin_memory=True`` without CUDA is dropped with one warning (pinning needs a device).
    Other keyword arguments go to the DataLoader unchanged.
    """
    import torch
    from torch.utils.data import DataLoader

    if pin_memory and not torch.cuda.is_available():
        warnings.warn("pin_memory=True ignored: no CUDA device to pin for", stacklevel=2)
        pin_memory = False
    if num_workers > 0:
        kwargs.update(timeout=timeout, persistent_workers=persistent_workers)
        if prefetch_factor is not None:
            kwargs["prefetch_factor"] = prefetch_factor
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                      pin_memory=pin_memory, shuffle=shuffle, **kwargs)


def shutdown(it: Any) -> None:
    """Stop a loader iterator's worker processes now (and close a generator).

    Given a DataLoader itself, stops the iterator it keeps for ``persistent_workers``.
    """
    if it is None:
        return
    if hasattr(it, "_iterator") and hasattr(it, "dataset"):  # a DataLoader
        it, it_owner = it._iterator, it
        it_owner._iterator = None
        if it is None:
            return
    stop = getattr(it, "_shutdown_workers", None)  # torch's multiprocessing iterator
    if stop is not None:
        stop()
    close = getattr(it, "close", None)  # a generator: runs its finally blocks
    if close is not None:
        close()


def end_pass(it: Any) -> None:
    """End one pass over a loader's iterator: stop its workers unless they are persistent.

    Persistent workers belong to the DataLoader and are meant to outlive the pass (the next
    ``iter()`` reuses them); shutting them down would break that next pass. Everything else
    is stopped now with :func:`shutdown`. The meter and the prefetchers end passes this way.
    """
    if getattr(it, "_persistent_workers", False):  # torch's iterator over persistent workers
        return
    shutdown(it)


#: multiprocessing's own long-lived helpers: started once per process, not leaks.
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def worker_processes() -> list:
    """Child processes of this one still alive: leftover DataLoader workers.

    multiprocessing's resource tracker and fork server (started once by the first spawn /
    forkserver worker, and kept for the life of the process) are not counted.
    """
    import psutil

    me = os.getpid()
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            # Only our direct children can be the helpers: a worker the fork server forked
            # shares its command line but is the fork server's child, and is counted.
            if p.ppid() == me and any(h in " ".join(p.cmdline()) for h in _HELPERS):
                continue
            out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out
