"""Every private torch name the kit uses, and why no public one does the job (chapter 01).

torch's DataLoader has no public hook for how its iterator waits for a batch or for its
worker processes, and the kit's loader (``loaders.py``) needs both to fail clearly. Each use:

* ``DataLoader._get_iterator``: where a DataLoader builds its iterator (``__iter__`` calls
  it, also for persistent workers); :class:`Loader` builds a :class:`WorkerIterator` there.
* ``_MultiProcessingDataLoaderIter``: the only multi-worker iterator; :class:`WorkerIterator`
  subclasses it, overriding ``_get_data`` (the one place the iterator waits for a batch, so
  the wait can poll worker health every ``POLL_S``; ``timeout=`` alone waits it out, 60 s)
  and ``_reset`` (the first point after torch registered the workers with its SIGCHLD watch
  and before it sends them any work; see :func:`unwatch`).
* ``_workers``: the worker ``Process`` objects. Only they know a worker's exit code or signal
  under every start method (a forkserver worker is the fork server's child, not ours).
* ``_try_get_data``: one bounded wait on the data queue that also checks each worker is alive
  (torch's own worker-death check, "DataLoader worker (pid(s) N) exited unexpectedly").
* ``_timeout``: the DataLoader's ``timeout=`` as the iterator holds it.
* ``_task_info``, ``_rcvd_idx``: which worker owes the batch a timed-out wait was for.
* ``_utils.signal_handling._remove_worker_pids``, ``_worker_pids_set``: torch's SIGCHLD
  handler raises "DataLoader worker (pid N) exited unexpectedly ..." asynchronously, in the
  main thread, wherever it is (pytest's reporting included), for every registered worker
  pid. No public switch turns it off, so the kit takes its workers off that watch.
* ``_shutdown_workers``: stop an iterator's workers now (``del it`` waits for the last
  reference, which a traceback may hold); also torchdata's StatefulDataLoader iterator's.
* ``_workers_status``: set by ``_reset``; ``_shutdown_workers`` needs it even when torch
  failed before its first ``_reset``.
* ``_iterator`` (DataLoader), ``_persistent_workers`` (iterator): the iterator a
  DataLoader keeps for ``persistent_workers=True``, to stop it or to start afresh.
* ``_task_info`` again, with ``_try_get_data`` (and Python's ``Process._start_method``):
  :func:`drain` collects the batches the workers
  still owe before a spawn worker is stopped (why: its docstring).

``tests/test_torch_private.py`` fails naming the attribute when a torch release changes any
of these. Nothing else in labkit names private torch API.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from torch.utils.data import DataLoader, _utils
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

#: The private names above, by owner (what tests/test_torch_private.py checks).
ITERATOR_METHODS = ("_get_data", "_reset", "_try_get_data", "_shutdown_workers")
ITERATOR_ATTRS = ("_workers", "_timeout", "_task_info", "_rcvd_idx", "_worker_pids_set",
                  "_workers_status", "_persistent_workers")
LOADER_METHODS = ("_get_iterator",)
LOADER_ATTRS = ("_iterator",)
SIGNAL_HANDLING = ("_remove_worker_pids", "_set_worker_pids", "_set_SIGCHLD_handler")


class Loader(DataLoader):
    """A DataLoader whose multi-worker iterator is ``self.iter_class(self)``."""

    iter_class: type  # a WorkerIterator subclass, set by the subclass

    def _get_iterator(self):
        if self.num_workers == 0:
            return super()._get_iterator()
        self.check_worker_number_rationality()
        return self.iter_class(self)


class WorkerIterator(_MultiProcessingDataLoaderIter):
    """torch's multi-worker iterator, off torch's SIGCHLD watch, waiting through
    :meth:`wait_for_batch` (which a subclass defines)."""

    def _reset(self, loader, first_iter: bool = False) -> None:
        if first_iter:  # torch registered the workers just now; no index was sent yet
            unwatch(self)
        super()._reset(loader, first_iter)

    def _get_data(self):
        return self.wait_for_batch()

    def wait_for_batch(self):
        raise NotImplementedError


def unwatch(it) -> None:
    """Take ``it``'s workers off torch's SIGCHLD watch (a no-op if they are not on it)."""
    try:
        _utils.signal_handling._remove_worker_pids(id(it))
    except ValueError:  # "Cannot find worker information": not registered (any more)
        pass
    it._worker_pids_set = False


def workers(it) -> list:
    """The iterator's worker ``multiprocessing.Process`` objects, in worker-id order (none
    before torch has started any)."""
    return list(getattr(it, "_workers", ()))


def timeout(it) -> float:
    return it._timeout


def try_get(it, seconds: float) -> tuple[bool, Any]:
    """Wait up to ``seconds`` for the next item from the workers: ``(True, item)`` or
    ``(False, None)``; raises torch's RuntimeError if a worker is found dead."""
    return it._try_get_data(seconds)


def owed(it) -> tuple[int | None, int]:
    """``(worker id or None, batch index)``: who owes the batch the iterator waits for."""
    return it._task_info.get(it._rcvd_idx, (None,))[0], it._rcvd_idx


def stop_workers(it) -> None:
    """torch's own shutdown of ``it``'s workers (signal, join, kill what is left), now."""
    unwatch(it)
    if not workers(it):  # torch failed before starting any
        return
    if not hasattr(it, "_workers_status"):  # torch failed before its first _reset
        it._workers_status = [True] * len(it._workers)
    it._shutdown_workers()


def owed_batches(it) -> int:
    """Batches sent to ``it``'s workers and not yet received (``_task_info`` entries without
    data; a received out-of-order batch carries its data)."""
    return sum(1 for info in getattr(it, "_task_info", {}).values() if len(info) == 1)


def drain(it, seconds: float = 5.0) -> int:
    """Collect (and drop) the batches ``it``'s spawn workers still owe; return how many.

    Why: a worker hands a batch over in its queue's feeder thread, which pickles the tensors
    (``THPStorage_shareFd``, C++) with the GIL released. A spawn worker ends through
    ``sys.exit``, so Python finalizes; a daemon thread that then takes the GIL back is ended
    with ``pthread_exit``, whose unwinding through those C++ frames calls ``std::terminate``:
    "terminate called without an active exception", SIGABRT, "DataLoader worker ... killed by
    signal: Aborted" (a core dump of chapter 08's stopped resume trials showed exactly this,
    Python 3.11, torch 2.13). fork and forkserver workers end with ``os._exit`` and never
    finalize; Python 3.14 no longer ends such threads. Once every owed batch has arrived no
    feeder is pickling, and the stop is clean. Bounded by ``seconds`` (a hung worker owes
    forever); only workers of the spawn start method are drained.
    """
    procs = workers(it)
    # a context's Process names its method; the default context's defers to the default
    method = procs and (type(procs[0])._start_method or multiprocessing.get_start_method())
    if method != "spawn":
        return 0
    owed_now = owed_batches(it)
    got, deadline = 0, time.monotonic() + seconds
    while got < owed_now and (left := deadline - time.monotonic()) > 0:
        try:
            ok, _ = it._try_get_data(min(left, 1.0))
        except Exception:  # noqa: BLE001 - a dead worker, an interrupted wait: stop draining
            break  # draining is for a clean exit only; the stop below must happen regardless
        got += ok
    return got


def worker_shutdown(it):
    """``it``'s stop-the-workers method if it is a torch multi-worker iterator, else None."""
    return getattr(it, "_shutdown_workers", None)


def persistent_iter(loader):
    """The iterator a DataLoader keeps for ``persistent_workers`` (None if none)."""
    return getattr(loader, "_iterator", None)


def drop_persistent_iter(loader, it=None) -> None:
    """Make ``loader``'s next ``iter()`` start new workers (only if it keeps ``it``, if given)."""
    if it is None or loader._iterator is it:
        loader._iterator = None


def has_persistent_workers(it) -> bool:
    return bool(getattr(it, "_persistent_workers", False))
