"""labkit: the helper package of the just-in-time data loading kit (``import labkit as lk``).

Each name below is introduced in a chapter; the modules are one concept each:
fixtures, faults, audits, meter, pagecache, memcap, memory, datasets, copyonread, streams,
sharding, rowgroups, launch, server, tarshards, resume, shuffling, loaders, prefetchers,
tuning, images, stages, gpu, capstone, decisions, bakeoff, dashboard, plots, checkpoint, report,
machine, bench, runner.
The public API is exactly ``__all__`` (sorted, checked by a test).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .audits import Audit, audit, worker_tag
from .bakeoff import (
    BakeoffData,
    BakeoffResult,
    LoaderAdapter,
    build_loader,
    cleanup_bakeoff,
    format_bakeoff,
    loader_names,
    prepare_bakeoff,
    probe_loader,
    run_bakeoff,
)
from .bench import run_benchmark
from .capstone import (
    PackedImages,
    TuningResult,
    TuningStep,
    epoch_rate,
    fastest_decoder,
    format_tuning,
    image_pipeline,
    image_train_step,
    measure_audited,
    pack_images,
    run_tuning,
    tuned_result,
    tuning_steps,
)
from .checkpoint import Checkpoint, read_checkpoint
from .copyonread import ArrowRows, NumpyRows, PyObjectRows
from .dashboard import Dashboard, DashboardModel
from .datasets import MemmapBatches, MemmapRows, NpyFilesDataset, open_array
from .decisions import decision_table, format_decision_table
from .errors import DataFormatError, FixtureError, LabkitError, RecordError, ScaleError
from .faults import damaged_copy
from .fixtures import Fixture, ensure_fixtures, fixture, format_fixture_table, verify
from .gpu import (
    dali_decode_rate,
    dali_status,
    gpu_decode_rate,
    gpu_decode_status,
    kornia_gpu_status,
    nvjpeg_decode,
)
from .images import (
    ImageFolderDataset,
    available_decoders,
    decode_jpeg,
    file_bytes,
    make_augment,
    skip_collate,
)
from .launch import TorchrunResult, torchrun
from .loaders import make_loader, shutdown, worker_processes
from .machine import environment, format_environment, versions
from .memcap import CappedRun, run_capped
from .memory import WorkerMemory, worker_memory
from .meter import Measurement, compare, measure, simulated_step
from .pagecache import evict_page_cache, measure_cold, page_cache_residency
from .plots import (
    plot_bakeoff,
    plot_heatmap,
    plot_rates,
    plot_scaling,
    plot_shuffle_quality,
    plot_stages,
    plot_throughput,
    plot_tuning,
    plot_wait_compute,
    plot_worker_memory,
)
from .prefetchers import CudaStreamPrefetcher, ThreadPrefetcher, cuda_status, to_device
from .report import comparison_rows, format_table, load_records, write_report
from .resume import ResumeTrial, format_resume_table, resume_trial
from .rowgroups import ParquetRowGroups, open_parquet
from .runner import run_notebooks
from .scale import SCALES, resolve_scale
from .server import Fault, serve
from .sharding import ShardPlan, shard_plan
from .shuffling import shard_of_bounds, shuffle_quality
from .stages import StageBreakdown, stage_breakdown
from .streams import RowRange, ShardStream, deliveries, range_worker_init
from .tarshards import TarShardStream, split_by_rank
from .tuning import Suggestion, WorkDataset, suggest_loader, usable_cores

try:
    __version__ = _version("labkit")
except PackageNotFoundError:  # a plain checkout on sys.path
    __version__ = "0+unknown"

__all__ = [
    "ArrowRows",
    "Audit",
    "BakeoffData",
    "BakeoffResult",
    "CappedRun",
    "Checkpoint",
    "CudaStreamPrefetcher",
    "Dashboard",
    "DashboardModel",
    "DataFormatError",
    "Fault",
    "Fixture",
    "FixtureError",
    "ImageFolderDataset",
    "LabkitError",
    "LoaderAdapter",
    "Measurement",
    "MemmapBatches",
    "MemmapRows",
    "NpyFilesDataset",
    "NumpyRows",
    "PackedImages",
    "ParquetRowGroups",
    "PyObjectRows",
    "RecordError",
    "ResumeTrial",
    "RowRange",
    "SCALES",
    "ScaleError",
    "ShardPlan",
    "ShardStream",
    "StageBreakdown",
    "Suggestion",
    "TarShardStream",
    "ThreadPrefetcher",
    "TorchrunResult",
    "TuningResult",
    "TuningStep",
    "WorkDataset",
    "WorkerMemory",
    "audit",
    "available_decoders",
    "build_loader",
    "cleanup_bakeoff",
    "compare",
    "comparison_rows",
    "cuda_status",
    "dali_decode_rate",
    "dali_status",
    "damaged_copy",
    "decision_table",
    "decode_jpeg",
    "deliveries",
    "ensure_fixtures",
    "environment",
    "epoch_rate",
    "evict_page_cache",
    "fastest_decoder",
    "file_bytes",
    "fixture",
    "format_bakeoff",
    "format_decision_table",
    "format_environment",
    "format_fixture_table",
    "format_resume_table",
    "format_table",
    "format_tuning",
    "gpu_decode_rate",
    "gpu_decode_status",
    "image_pipeline",
    "image_train_step",
    "kornia_gpu_status",
    "load_records",
    "loader_names",
    "make_augment",
    "make_loader",
    "measure",
    "measure_audited",
    "measure_cold",
    "nvjpeg_decode",
    "open_array",
    "open_parquet",
    "pack_images",
    "page_cache_residency",
    "plot_bakeoff",
    "plot_heatmap",
    "plot_rates",
    "plot_scaling",
    "plot_shuffle_quality",
    "plot_stages",
    "plot_throughput",
    "plot_tuning",
    "plot_wait_compute",
    "plot_worker_memory",
    "prepare_bakeoff",
    "probe_loader",
    "range_worker_init",
    "read_checkpoint",
    "resolve_scale",
    "resume_trial",
    "run_bakeoff",
    "run_benchmark",
    "run_capped",
    "run_notebooks",
    "run_tuning",
    "serve",
    "shard_of_bounds",
    "shard_plan",
    "shuffle_quality",
    "shutdown",
    "simulated_step",
    "skip_collate",
    "split_by_rank",
    "stage_breakdown",
    "suggest_loader",
    "to_device",
    "torchrun",
    "tuned_result",
    "tuning_steps",
    "usable_cores",
    "verify",
    "versions",
    "worker_memory",
    "worker_processes",
    "worker_tag",
    "write_report",
]
