"""labkit, the instrument panel, ``import labkit as lk`` in every chapter.

The chapters type their subject (readers, streams, packers, pipelines) in their cells with
the libraries' own API; labkit holds what they read off: fixtures and their writers, the
meter and the timer, audits, worker memory and processes, the dashboard and plots, the
checkpoint and the machine's facts, the loopback servers, the ceilings. Two layers, each
module importing only its own layer or the one before, at the top of the file
(tests/test_layout.py; every module's first docstring line names the chapters that call it):

1. The spine: ``errors``, ``lazy`` (a folder's names imported on first use), ``paths``,
   ``scale`` (the one table of per-scale knobs), ``optional`` (``lk.status(name)``, the one
   registry of optional libraries and devices),
   ``facilities`` (the Linux-only ones), ``ceilings`` (the machine's data-loading ceilings,
   chapters 00 and 16), ``data`` (fixtures, writers, damaged copies, datasets several
   chapters reuse under spawn), ``images`` (decoders, the image-folder dataset),
   ``streams`` (the rank x worker split, shard streams), ``loading`` (batches, worker
   processes), ``instruments`` (meter, measurement, timer, audits, memory, page cache,
   resume trials), ``remote`` (the loopback HTTP server, torchrun from a notebook),
   ``display`` (dashboard, plots), ``records`` (checkpoint, machine).
2. What is left of a chapter's own topic, where it is an instrument: ``tokens`` (11: the
   corpus fixture), ``formats`` (12: the bake-off's LMDB/HDF5 rows), ``profiling`` (13b: the
   per-batch timeline ``labkit diagnose`` draws), ``objstore`` (14: the loopback S3 store),
   ``media`` (15: the video and audio fixtures, the decoder checks).

The tools are not here: ``labkit_tools`` (the ``labkit`` command, ``labkit run``, the report,
the named benchmarks, ``labkit doctor``, ``labkit diagnose``) imports labkit, never the other
way round. ``import labkit`` loads only what the flat names need; ``lk.FOLDER`` is imported
on first use. The public API: ``__all__`` (sorted; tests/test_api.py) and a folder's own
``__all__`` (``lk.objstore.s3_store``); tests/test_size.py keeps their count.
"""

from __future__ import annotations

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
from .lazy import submodule
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
    labkit`` loads only the modules the flat names above need (issue 46)."""
    return submodule(__name__, name)
