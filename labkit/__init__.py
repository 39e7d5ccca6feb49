"""labkit, the instrument panel, ``import labkit as lk`` in every chapter.

The chapters type their subject (readers, streams, packers, pipelines) in their cells with
the libraries' own API; labkit holds what they read off: fixtures and their writers, the
meter and the timer, audits, worker memory and processes, the dashboard and plots, the
checkpoint and the machine's facts, the loopback servers, the ceilings. Two layers, each
module importing only its own layer or the one before, at the top of the file
(tests/test_layout.py; every module's first docstring line names the chapters that call it):

1. The spine: ``errors``, ``lazy`` (names imported on first use), ``paths``,
   ``scale`` (the one table of per-scale knobs), ``optional`` (``lk.status(name)``, the one
   registry of optional libraries and devices),
   ``facilities`` (the Linux-only ones), ``ceilings`` (the machine's data-loading ceilings,
   chapters 00 and 16), ``data`` (fixtures, writers, damaged copies, datasets several
   chapters reuse under spawn), ``images`` (decoders, the image-folder dataset),
   ``streams`` (the rank x worker split, shard streams), ``loading`` (batches, worker
   processes), ``instruments`` (meter, measurement, timer, audits, memory, page cache,
   resume trials), ``remote`` (the loopback HTTP and S3 servers, torchrun from a notebook),
   ``display`` (dashboard, plots), ``records`` (checkpoint, machine).
2. What is left of a chapter's own topic, where it is an instrument: ``tokens`` (11: the
   corpus fixture), ``formats`` (12: the bake-off's LMDB/HDF5 rows), ``objstore`` (14: the
   object-store systems' checks), ``media`` (15: the video and audio fixtures, the decoder
   checks).

The tools are not here: ``labkit_tools`` (the ``labkit`` command, ``labkit run``, the report,
the named benchmarks, ``labkit doctor``, ``labkit diagnose`` and its per-batch timeline)
imports labkit, never the other way round. ``import labkit`` loads labkit and labkit.lazy
only: a flat name and ``lk.FOLDER`` are imported on first use. The public API: ``__all__``
(sorted; tests/test_api.py) and a folder's own ``__all__`` (``lk.remote.serve``);
tests/test_size.py keeps their count.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .lazy import lazy_names

try:
    __version__ = _version("labkit")
except PackageNotFoundError:  # a plain checkout on sys.path
    __version__ = "0+unknown"

# each flat name and the module that defines it (PEP 562, issue 46)
__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "Checkpoint": "records.checkpoint",
    "Dashboard": "display.widget",
    "DataFormatError": "errors",
    "Fault": "remote.server",
    "ImageFolderDataset": "images.folder",
    "LabkitError": "errors",
    "MemmapRows": "data.datasets",
    "audit": "instruments.audits",
    "best_of": "instruments.timer",
    "compare": "instruments.measurement",
    "damaged_copy": "data.faults",
    "deliveries": "instruments.audits",
    "evict_page_cache": "instruments.pagecache",
    "fixture": "data.fixtures",
    "knob": "scale",
    "measure": "instruments.meter",
    "measure_cold": "instruments.pagecache",
    "open_array": "data.datasets",
    "plot_scaling": "display.plots",
    "plot_throughput": "display.plots",
    "resolve_scale": "scale",
    "resume_trial": "instruments.resume",
    "shard_plan": "streams.split",
    "simulated_step": "instruments.meter",
    "status": "optional",
    "usable_cores": "facilities",
    "worker_processes": "loading.loaders",
})
