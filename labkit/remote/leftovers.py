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
    by :meth:`release` (Mosaic unlinks its blocks only at exit, its lock files never), only
    those of a prefix whose ``_locals`` block names a tracked folder."""

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
                # registered by Mosaic: else the tracker unlinks it again at exit, and warns
                resource_tracker.unregister(f"/{block.name}", "shared_memory")
            for lock in self._LOCKS:
                Path(tempfile.gettempdir(), f"{prefix}_{lock}").unlink(missing_ok=True)
        self.prefixes.clear()


@contextmanager
def litdata_contained():
    """``litdata.optimize`` in the block changes nothing else: its log quiet, the start method
    (spawn for good) and SIGINT handler put back, its staging folders in a temporary one."""
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
    """``ray.init`` for one node, tried again if its fixed 30 s start-up timed out (a loaded
    2-core machine); a failed start's processes stopped (``ray.shutdown`` forgets them)."""
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
