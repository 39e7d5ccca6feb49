"""labkit.loading._torch_private: every private torch name the kit relies on still exists and
still behaves as the kit assumes. A torch release that changes one fails here, naming it,
instead of as a puzzling loader error in a chapter (chapter 01)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from labkit.loading import _torch_private as tp


def _missing(obj, names) -> list[str]:
    return [n for n in names if not hasattr(obj, n)]


def test_private_modules_and_functions_exist():
    import torch.utils.data.dataloader as dl

    assert hasattr(dl, "_MultiProcessingDataLoaderIter"), \
        f"torch {torch.__version__}: torch.utils.data.dataloader._MultiProcessingDataLoaderIter"
    from torch.utils.data import _utils

    gone = _missing(_utils.signal_handling, tp.SIGNAL_HANDLING)
    assert not gone, f"torch {torch.__version__}: no _utils.signal_handling.{', .'.join(gone)}"


def test_private_methods_exist():
    from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

    gone = _missing(_MultiProcessingDataLoaderIter, tp.ITERATOR_METHODS)
    assert not gone, f"torch {torch.__version__}: _MultiProcessingDataLoaderIter lacks {gone}"
    gone = _missing(DataLoader, tp.LOADER_METHODS)
    assert not gone, f"torch {torch.__version__}: DataLoader lacks {gone}"
    # the kit's own hook must not shadow a name torch gives a meaning to
    assert not hasattr(_MultiProcessingDataLoaderIter, "wait_for_batch")
    assert not hasattr(DataLoader, "iter_class")


class _Loader(tp.Loader):
    class iter_class(tp.WorkerIterator):  # noqa: N801 (a class attribute)
        def wait_for_batch(self):
            while True:
                ok, data = tp.try_get(self, 0.5)
                if ok:
                    return data


def test_private_attributes_exist_on_a_live_iterator(live_workers):
    loader = _Loader(TensorDataset(torch.arange(8)), batch_size=2, num_workers=2, timeout=30,
                     persistent_workers=True)
    gone = _missing(loader, tp.LOADER_ATTRS)
    assert not gone, f"torch {torch.__version__}: a DataLoader has no {gone}"
    it = iter(loader)
    try:
        gone = _missing(it, tp.ITERATOR_ATTRS)
        assert not gone, f"torch {torch.__version__}: its iterator has no {gone}"
        assert isinstance(it, tp.WorkerIterator)  # DataLoader._get_iterator still builds it
        assert tp.persistent_iter(loader) is it and tp.has_persistent_workers(it)
        assert tp.timeout(it) == 30
        ws = tp.workers(it)
        assert len(ws) == 2 and all(w.is_alive() for w in ws)
        assert tp.owed(it) == (0, 0)  # batch 0 is worker 0's, before any arrived
        assert sorted(int(x) for b in it for x in b[0]) == list(range(8))
        # off torch's SIGCHLD watch from the start: torch registered the workers before its
        # first _reset (where the kit unwatches them), not after
        assert not it._worker_pids_set
        from torch.utils.data import _utils

        with pytest.raises(ValueError, match="Cannot find worker information"):
            _utils.signal_handling._remove_worker_pids(id(it))
    finally:
        tp.stop_workers(it)
        tp.drop_persistent_iter(loader)
    assert tp.persistent_iter(loader) is None and live_workers() == []


def test_unwatched_workers_never_trigger_torchs_sigchld_error(live_workers):
    """A worker killed while it is off the watch: torch's handler stays silent; the health
    check in try_get reports it."""
    loader = _Loader(TensorDataset(torch.arange(8)), batch_size=2, num_workers=1, timeout=30)
    it = iter(loader)
    try:
        w = tp.workers(it)[0]
        os.kill(w.pid, signal.SIGKILL)
        time.sleep(0.5)  # SIGCHLD arrives and torch's handler runs during this sleep
        with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid\(s\) {w.pid}\) "
                                               "exited unexpectedly"):
            for _ in range(5):
                tp.try_get(it, 0.2)
    finally:
        tp.stop_workers(it)
    assert live_workers() == []
