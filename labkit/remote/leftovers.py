"""Cleaning up after MosaicML Streaming, LitData and Ray (chapter 14b).

Each library is used as its docs say; what it leaves behind or changes is removed or put
back here, for 14b's runs (``ObjectStore.cleanup``, :mod:`.stores`), so a kernel or a test
session ends as it began: Mosaic's shared memory and lock files (:class:`MosaicShm`), LitData's
staging folders, start method and SIGINT handler (:func:`litdata_contained`), the processes
of a Ray start that failed (:func:`start_ray`).
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import signal
import tempfile
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

from ..loading.processes import stop_processes


@contextmanager
def scoped(mapping, values: dict):
    """``mapping`` (``os.environ``, ``sys.modules``) with ``values`` set inside the block,
    as it was after it."""
    old = {k: mapping.get(k) for k in values}
    mapping.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                mapping.pop(k, None)
            else:
                mapping[k] = v


class MosaicShm:
    """The shared-memory blocks and lock files of the MosaicML Streaming datasets passed to
    :meth:`track`, removed by :meth:`release`.

    Mosaic unlinks its blocks only at interpreter exit and never removes its two lock files
    per prefix (``000003_barrier_filelock``, ``000003_cache_filelock`` in the temp folder),
    and the next run skips a prefix whose lock file exists: /dev/shm and /tmp would grow with
    every run. A dataset's prefix is the one whose ``_locals`` block names its folder, so
    another process's Mosaic run at the same moment keeps its own.
    """

    _SHM = Path("/dev/shm")
    _LOCKS = ("barrier_filelock", "cache_filelock")

    def __init__(self):
        self.prefixes: set[str] = set()

    def track(self, ds):
        """``ds`` (a live ``StreamingDataset``), its prefix noted for :meth:`release`."""
        folders = {os.path.abspath(os.path.join(s.local, s.split or "")) for s in ds.streams}
        for block in self._SHM.glob("[0-9]" * 6 + "_locals") if self._SHM.is_dir() else ():
            # Mosaic's packing: int32 size, then the folders joined by NUL, NUL, the prefix
            data = block.read_bytes()
            size = int.from_bytes(data[:4], "little")
            if folders & set(data[4:size].decode("utf-8", "replace").split("\0")[:-1]):
                self.prefixes.add(block.name[:6])
        return ds

    def release(self) -> None:
        from multiprocessing import resource_tracker

        gc.collect()   # Mosaic's own handles on them close with their dataset
        for prefix in self.prefixes:
            for block in self._SHM.glob(f"{prefix}_*"):
                block.unlink(missing_ok=True)
                # it was registered when Mosaic made it; unregistered, the tracker does not
                # unlink it again at exit and warn that it is gone
                resource_tracker.unregister(f"/{block.name}", "shared_memory")
            for lock in self._LOCKS:
                Path(tempfile.gettempdir(), f"{prefix}_{lock}").unlink(missing_ok=True)
        self.prefixes.clear()


@contextmanager
def litdata_contained():
    """``litdata.optimize`` inside the block leaves nothing else changed.

    Left to itself, optimize() prints a progress log, sets the process-wide start method to
    spawn for good (every later DataLoader in the kernel would spawn its workers), installs a
    SIGINT handler for good (a later Ctrl-C or Jupyter interrupt then ends the whole process
    with exit status 0 instead of raising KeyboardInterrupt), and stages its work in
    ``<temp>/chunks`` and ``<temp>/data``, two folders it leaves behind; here the log is kept
    quiet, the start method and the SIGINT handler put back and the staging folders (its
    ``DATA_OPTIMIZER_CACHE_FOLDER`` and ``DATA_OPTIMIZER_DATA_CACHE_FOLDER``) made in a
    temporary folder that goes after the block.
    """
    method = multiprocessing.get_start_method(allow_none=True)
    on_interrupt = signal.getsignal(signal.SIGINT)
    with tempfile.TemporaryDirectory(prefix="labkit-litdata-") as stage, \
            scoped(os.environ, {"DATA_OPTIMIZER_CACHE_FOLDER": os.path.join(stage, "chunks"),
                                "DATA_OPTIMIZER_DATA_CACHE_FOLDER": os.path.join(stage, "data")}), \
            redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            multiprocessing.set_start_method(method, force=True)
            signal.signal(signal.SIGINT, on_interrupt)


def start_ray(ray, num_cpus: int, tries: int = 2) -> None:
    """``ray.init`` for one local node, tried again once if the node is slow to register
    (``ObjectStore.cleanup("ray")`` starts Ray this way).

    Ray waits a fixed 30 s for its raylet to register with its GCS; on a 2-core machine
    under load that start-up alone can take longer. A failed start is shut down (its
    processes stopped: Ray forgets a node whose start failed, so ``ray.shutdown`` would not)
    before the next try, and the last failure is raised.
    """
    import psutil

    me = psutil.Process()
    for attempt in range(1, tries + 1):
        before = {p.pid for p in me.children(recursive=True)}
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, _temp_dir=None)
            return
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for this
            ray.shutdown()
            stop_processes([p for p in me.children(recursive=True) if p.pid not in before])
            if attempt == tries or "timed out during startup" not in str(e):
                raise
