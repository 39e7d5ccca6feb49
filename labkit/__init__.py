"""labkit, the kit's helper package, ``import labkit as lk`` in every chapter.

Three layers; a module imports only from its own layer or the ones before it, at the top of
the file (tests/test_layout.py checks; every module's first docstring line names the chapters
that call it, tests/test_layout.py checks that too):

1. The spine, the concepts every chapter uses: ``errors``, ``paths``, ``scale``, ``optional``,
   ``facilities`` (the Linux-only ones, each read in one place: ``lk.facilities.has(name)``)
   (``lk.status(name)``: is an optional library here, and if not, why and what to install);
   ``data`` (fixtures, writers, faults, teaching datasets), ``images`` (decoders, folder and
   packed datasets, augmentation, GPU paths, stage costs), ``streams`` (one rank x worker
   split base, one shuffle buffer, one resume state; array, row-group and tar-shard streams),
   ``loading`` (worker processes, prefetchers, batches, processes), ``instruments`` (meter,
   measurement, timer, audits, memory, page cache, shuffle quality, resume trials, tuning),
   ``remote`` (HTTP server, torchrun), ``display`` (dashboard, plots, figures), ``records``
   (checkpoint, machine, decisions).
2. Chapter folders, one topic each: ``tokens`` (11), ``formats`` (12: LMDB, HDF5, TFRecord,
   tensors on disk, the open-before-fork trap, the break-even widget), ``profiling`` (13),
   ``objstore`` (14: the loopback S3 store, shards in a bucket, MosaicML/LitData/Ray Data),
   ``media`` (15: video and audio), ``capstone`` (16: the tuned pipeline, the bake-off).
3. The tools are not here: ``labkit_tools`` (the ``labkit`` command, ``labkit run``, the
   report, the named benchmarks, ``labkit doctor`` and ``labkit diagnose``) imports labkit,
   and labkit never imports it.

The public API: ``__all__``, the names three or more chapters use (sorted, at most 40,
checked by a test), and each folder's own ``__all__``, reached as ``lk.FOLDER.NAME``
(``lk.tokens.pack``); every public name is used by a notebook, the CLI or a contract test.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .data.datasets import MemmapRows, open_array
from .data.faults import damaged_copy
from .data.fixtures import fixture
from .display.plots import plot_scaling, plot_throughput
from .display.widget import Dashboard
from .errors import DataFormatError, LabkitError
from .facilities import usable_cores
from .images.folder import ImageFolderDataset
from .instruments.audits import audit, deliveries
from .instruments.measurement import compare
from .instruments.meter import measure, simulated_step
from .instruments.pagecache import evict_page_cache, measure_cold
from .instruments.resume import resume_trial
from .instruments.timer import best_of
from .loading.loaders import worker_processes
from .optional import status
from .records.checkpoint import Checkpoint
from .remote.server import Fault
from .scale import knob, resolve_scale
from .streams.split import shard_plan

try:
    __version__ = _version("labkit")
except PackageNotFoundError:  # a plain checkout on sys.path
    __version__ = "0+unknown"

__all__ = [
    "Checkpoint",
    "Dashboard",
    "DataFormatError",
    "Fault",
    "ImageFolderDataset",
    "LabkitError",
    "MemmapRows",
    "audit",
    "best_of",
    "compare",
    "damaged_copy",
    "deliveries",
    "evict_page_cache",
    "fixture",
    "knob",
    "measure",
    "measure_cold",
    "open_array",
    "plot_scaling",
    "plot_throughput",
    "resolve_scale",
    "resume_trial",
    "shard_plan",
    "simulated_step",
    "status",
    "usable_cores",
    "worker_processes",
]


def __getattr__(name: str):
    """``lk.FOLDER`` (``lk.tokens``, ``lk.records``, ...) imported on first use: ``import
    labkit`` loads only the modules the flat names above need (issue 46), not every
    chapter's folder."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module 'labkit' has no attribute {name!r}") from None
