"""Cleaning up after MosaicML Streaming, LitData and Ray (chapter 14b, ``ObjectStore.cleanup``).

Each library is used as its docs say; what it leaves behind or changes is undone here."""

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
    """``mapping`` (``os.environ``, ``sys.modules``) with ``values`` set inside the block."""
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
    """The shared memory and lock files of the Mosaic datasets given to :meth:`track`, removed
    by :meth:`release`: Mosaic unlinks its blocks only at exit and never its lock files
    (``000003_cache_filelock`` in the temp folder), so /dev/shm and /tmp grew every run. Only
    prefixes whose ``_locals`` block names a tracked folder: another process keeps its own."""

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
    """``litdata.optimize`` inside the block leaves nothing else changed: its progress log is
    kept quiet, the start method (it sets spawn for good) and SIGINT handler (a later
    interrupt would end the kernel with status 0) put back, its staging folders (left behind
    in ``<temp>``) made in a temporary folder."""
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
    """``ray.init`` for one local node, tried again if it timed out (Ray waits a fixed 30 s for
    its raylet, too short on a loaded 2-core machine); a failed start's processes are
    stopped (``ray.shutdown`` forgets them), the last failure raised."""
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
