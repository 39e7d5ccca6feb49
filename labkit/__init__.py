"""labkit: the helper package of the just-in-time data loading kit (``import labkit as lk``).

Each name below is introduced in a chapter; the modules are one concept each:
fixtures, faults, audits, server, streaming, shuffling, resume, meter, datasets, loaders,
dashboard, plots, checkpoint, report, machine, bench, runner. The public API is exactly
``__all__`` (sorted, checked by a test).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .audits import Audit, audit, worker_tag
from .bench import run_benchmark
from .checkpoint import Checkpoint, read_checkpoint
from .dashboard import Dashboard, DashboardModel
from .datasets import MemmapBatches, MemmapRows, NpyFilesDataset, open_array
from .errors import DataFormatError, FixtureError, LabkitError, RecordError, ScaleError
from .faults import damaged_copy
from .fixtures import Fixture, ensure_fixtures, fixture, format_fixture_table, verify
from .loaders import make_loader, shutdown, worker_processes
from .machine import environment, format_environment, versions
from .meter import Measurement, compare, measure, simulated_step
from .plots import plot_shuffle_quality, plot_throughput, plot_wait_compute
from .report import comparison_rows, format_table, load_records, write_report
from .resume import ResumeTrial, format_resume_table, resume_trial
from .runner import run_notebooks
from .scale import SCALES, resolve_scale
from .server import Fault, serve
from .shuffling import shard_of_bounds, shuffle_quality
from .streaming import ShardStream, split_by_rank

try:
    __version__ = _version("labkit")
except PackageNotFoundError:  # a plain checkout on sys.path
    __version__ = "0+unknown"

__all__ = [
    "Audit",
    "Checkpoint",
    "Dashboard",
    "DashboardModel",
    "DataFormatError",
    "Fault",
    "Fixture",
    "FixtureError",
    "LabkitError",
    "Measurement",
    "MemmapBatches",
    "MemmapRows",
    "NpyFilesDataset",
    "RecordError",
    "ResumeTrial",
    "SCALES",
    "ScaleError",
    "ShardStream",
    "audit",
    "compare",
    "comparison_rows",
    "damaged_copy",
    "ensure_fixtures",
    "environment",
    "fixture",
    "format_environment",
    "format_fixture_table",
    "format_resume_table",
    "format_table",
    "load_records",
    "make_loader",
    "measure",
    "open_array",
    "plot_shuffle_quality",
    "plot_throughput",
    "plot_wait_compute",
    "read_checkpoint",
    "resolve_scale",
    "resume_trial",
    "run_benchmark",
    "run_notebooks",
    "serve",
    "shard_of_bounds",
    "shuffle_quality",
    "shutdown",
    "simulated_step",
    "split_by_rank",
    "verify",
    "versions",
    "worker_processes",
    "worker_tag",
    "write_report",
]
