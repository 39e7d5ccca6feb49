"""Building and tearing down torch DataLoaders the way every chapter should.

:func:`make_loader` turns knob values into a DataLoader that cannot hang a workshop
(``timeout=`` whenever there are workers) and accepts every knob at every setting (torch
refuses ``prefetch_factor`` and ``persistent_workers`` without workers).
:func:`shutdown` stops an iterator's workers now instead of whenever garbage collection
runs; :func:`worker_processes` lists the ones still alive. Introduced in chapter 01.

A loader from :func:`make_loader` also fails better than torch's own when a worker breaks:
a worker that dies (a crash in native code, ``os._exit``, the out-of-memory killer) is
noticed within :data:`POLL_S` under every start method and named with its exit code or
signal; a timeout says which worker owes the batch; either way the iterator's workers are
stopped at once, so none is left running behind the error.
"""

from __future__ import annotations

import os
import re
import signal
import time
import warnings
import weakref
from typing import Any

from torch.utils.data import DataLoader

from . import _torch_private as _tp

#: Seconds a worker may take to deliver one batch before the DataLoader raises.
DEFAULT_TIMEOUT_S = 60.0
#: How often a loader waiting for a batch checks that its workers are alive. torch checks
#: only when its ``timeout`` runs out, so under forkserver (no SIGCHLD reaches the loader: the
#: fork server is the workers' parent) a crashed worker went unreported for the whole timeout.
POLL_S = 0.5

# torch's worker-death errors: from its health check, "DataLoader worker (pid(s) 12, 13)
# exited unexpectedly", and from its SIGCHLD handler, "DataLoader worker (pid 12) exited
# unexpectedly with exit code 3" / "... (pid 12) is killed by signal: Killed."
_DEATH_MSG = re.compile(r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) (?:exited "
                        r"unexpectedly|is killed by signal)")

#: How long a failed batch handover waits for its worker's death to show (see wait_for_batch).
_HANDOVER_S = 5.0

_SIGNAL_HINTS = {
    signal.SIGSEGV: "a crash in native code (a decoder, an extension module)",
    signal.SIGBUS: "a bad memory access, e.g. a memory-mapped file truncated under it",
    signal.SIGKILL: "killed from outside, most often by the out-of-memory killer "
                    "(check worker memory, lk.worker_memory)",
    signal.SIGABRT: "aborted by native code",
}


def _death(worker_id: int, w) -> str:
    code = w.exitcode
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"worker {worker_id} (pid {w.pid}) was killed by signal {-code}"
        hint = _SIGNAL_HINTS.get(sig)
        return (f"worker {worker_id} (pid {w.pid}) was killed by {sig.name}"
                + (f": {hint}" if hint else ""))
    if code == 1:  # multiprocessing's exit status for an exception outside the worker loop
        return (f"worker {worker_id} (pid {w.pid}) exited with code 1: an exception it could "
                "not report (its traceback is on stderr); under spawn or forkserver most often "
                "a dataset class the worker cannot import, e.g. one defined in a notebook cell "
                "(move it into a module)")
    return (f"worker {worker_id} (pid {w.pid}) exited with code {code} (the dataset code, or "
            "a library it calls, ended the process)")


class _WorkerIter(_tp.WorkerIterator):
    """torch's multi-worker iterator; its errors say which worker failed and how.

    One party reports a dead worker: this iterator. Its workers are off torch's SIGCHLD
    watch before they get any work (see ``_torch_private``), so torch's handler, which raises
    asynchronously wherever the main thread is (even in pytest's reporting, long after the
    error), never fires for them; the :data:`POLL_S` health check in :meth:`wait_for_batch`
    is the only detector, and any worker-death error, in either of torch's forms, that
    names one of these workers is rewritten into the kit's and stops the others.
    """

    def __init__(self, loader):
        self._owner = weakref.ref(loader)
        try:
            super().__init__(loader)
        except BaseException as e:  # incl. KeyboardInterrupt while spawn workers start
            # A worker death torch's handler raised in the instant between registering the
            # workers and _reset taking them off its watch gets the kit's message. Either
            # way this iterator is never returned: its workers stop now, not at collection.
            if isinstance(e, RuntimeError):
                self._raise_if_death(e)
            _tp.stop_workers(self)
            raise

    def wait_for_batch(self):
        timeout = _tp.timeout(self)
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            left = POLL_S if deadline is None else max(deadline - time.monotonic(), 0)
            try:
                # short waits: torch checks the workers' health after each one
                ok, data = _tp.try_get(self, min(POLL_S, left))
            except RuntimeError as e:
                self._raise_if_death(e)
                raise
            except (OSError, EOFError) as e:
                # A batch's tensors are fetched from the worker that sent it as the batch is
                # read (torch's file-descriptor sharing): a worker dying in between fails the
                # fetch while it may still count as alive, so torch's check let this through
                self._raise_if_death(e, wait_s=_HANDOVER_S)
                raise
            if ok:
                return data
            if deadline is not None and time.monotonic() >= deadline:
                break
        owes, batch = _tp.owed(self)
        who = (f"worker {owes} (pid {_tp.workers(self)[owes].pid}) has not delivered batch "
               f"{batch}" if owes is not None else "no worker delivered a batch")
        self._stop(stuck=owes)
        raise RuntimeError(
            f"DataLoader timed out after {timeout} seconds: {who} (a read or "
            "__getitem__ that never returns: a stalled server, a lock, an endless loop?). "
            "The workers were stopped; pass a larger timeout= if one batch really takes "
            "that long")

    def _raise_if_death(self, e: BaseException, wait_s: float = 0.0) -> None:
        """Raise the kit's error if ``e`` comes from a dead worker of this iterator: torch's
        worker-death error naming one, or another error while one has died (or dies within
        ``wait_s``); return (and let the caller re-raise ``e``) otherwise."""
        named = {int(p) for m in _DEATH_MSG.findall(str(e)) for p in m.split(",")}
        ws = _tp.workers(self)
        if named and not named & {w.pid for w in ws}:  # another iterator's worker
            return
        deadline = time.monotonic() + wait_s
        while not (dead := [(i, w) for i, w in enumerate(ws) if w.exitcode not in (None, 0)]):
            if named or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if not (named or dead):  # not a worker death
            return
        pids = ", ".join(str(w.pid) for _, w in dead) or ", ".join(map(str, sorted(named)))
        self._stop()
        raise RuntimeError(
            f"DataLoader worker (pid(s) {pids}) exited unexpectedly: "
            f"{'; '.join(_death(i, w) for i, w in dead) or 'no exit status'}. Its other "
            "workers were stopped; rerun with num_workers=0 to see the failure in this process"
        ) from e

    def _stop(self, stuck: int | None = None) -> None:
        """Stop every worker now; a stuck one is killed (torch would wait 5 s to join it)."""
        _tp.unwatch(self)
        if stuck is not None and _tp.workers(self)[stuck].is_alive():
            _tp.workers(self)[stuck].terminate()
        _tp.stop_workers(self)
        owner = self._owner()
        if owner is not None:  # persistent workers: the next epoch starts afresh
            _tp.drop_persistent_iter(owner, self)


class _Loader(_tp.Loader):
    """A ``DataLoader`` whose worker failures are reported clearly (see the module doc)."""

    iter_class = _WorkerIter


# It is a DataLoader, and is named one where a type name is shown (lk.measure's default name)
_Loader.__name__ = _Loader.__qualname__ = "DataLoader"


def worker_kwargs(num_workers: int, timeout: float = DEFAULT_TIMEOUT_S) -> dict:
    """The kit's one worker-timeout rule, for loaders it does not build itself (chapter 01).

    ``{"timeout": timeout}`` when there are workers (a stuck worker then fails instead of
    hanging), ``{}`` without (torch refuses ``timeout`` for ``num_workers=0``). Pass it to a
    library's loader (WebLoader, StatefulDataLoader, a plain DataLoader); :func:`make_loader`
    applies the same rule.
    """
    return {"timeout": timeout} if num_workers > 0 else {}


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
    Other keyword arguments go to the DataLoader unchanged. A worker that dies or hangs
    raises an error naming it (exit code, signal, the batch it owes), and the iterator's
    workers are stopped with it.
    """
    import torch

    if pin_memory and not torch.cuda.is_available():
        warnings.warn("pin_memory=True ignored: no CUDA device to pin for", stacklevel=2)
        pin_memory = False
    kwargs.update(worker_kwargs(num_workers, timeout))
    if num_workers > 0:
        kwargs["persistent_workers"] = persistent_workers
        if prefetch_factor is not None:
            kwargs["prefetch_factor"] = prefetch_factor
    return _Loader(dataset, batch_size=batch_size, num_workers=num_workers,
                   pin_memory=pin_memory, shuffle=shuffle, **kwargs)


def shutdown(it: Any) -> None:
    """Stop a loader iterator's worker processes now (and close a generator).

    Given a DataLoader itself, stops the iterator it keeps for ``persistent_workers``.
    """
    if it is None:
        return
    if isinstance(it, DataLoader):
        it, loader = _tp.persistent_iter(it), it
        _tp.drop_persistent_iter(loader)
        if it is None:
            return
    stop = _tp.worker_shutdown(it)  # torch's multiprocessing iterator
    if stop is not None:
        _tp.drain(it)  # spawn workers first hand over what they owe (why: _tp.drain)
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
    if _tp.has_persistent_workers(it):  # torch's iterator over persistent workers
        return
    shutdown(it)


#: multiprocessing's own long-lived helpers: started once per process, not leaks.
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def worker_processes(of: int | None = None) -> list:
    """Child processes of this one (or of pid ``of``) still alive: leftover DataLoader workers.

    multiprocessing's resource tracker and fork server (started once by the first spawn /
    forkserver worker, and kept for the life of the process) are not counted.
    """
    import psutil

    me = os.getpid() if of is None else of
    out = []
    for p in psutil.Process(me).children(recursive=True):
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
