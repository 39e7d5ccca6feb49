"""labkit, the kit's helper package, ``import labkit as lk`` in every chapter.

Three layers; a module imports only from its own layer or the ones before it, at the top of
the file (tests/test_layout.py checks; every module's first docstring line names the chapters
that call it, tests/test_layout.py checks that too, ``labkit helpers NN`` lists them):

1. The spine, the concepts every chapter uses: ``errors``, ``paths``, ``scale``, ``optional``
   (is an optional library here, and if not, why and what to install); ``data``
   (fixtures, writers, faults, teaching datasets), ``images`` (decoders, folder and packed
   datasets, augmentation, GPU paths, stage costs), ``streams`` (one rank x worker split
   base, one shuffle buffer, one resume state; array, row-group and tar-shard streams),
   ``loading`` (worker processes, prefetchers, batches, processes), ``instruments`` (meter,
   measurement, timer, audits, memory, page cache, shuffle quality, resume trials, tuning),
   ``remote`` (HTTP server, torchrun), ``display`` (dashboard, plots, figures), ``records``
   (checkpoint, machine, decisions).
2. Chapter folders, one topic each: ``tokens`` (11), ``formats`` (12: LMDB, HDF5, TFRecord,
   tensors on disk, the open-before-fork trap, the break-even widget), ``profiling`` (13),
   ``objstore`` (14: the loopback S3 store, shards in a bucket, MosaicML/LitData/Ray Data),
   ``media`` (15: video and audio), ``capstone`` (16: the tuned pipeline, the bake-off).
3. ``tools``, which no chapter imports: the ``labkit`` CLI (``labkit.cli`` forwards to it),
   ``labkit run``, reports, named benchmarks, ``labkit doctor``, ``labkit diagnose``'s command
   line.

The public API is exactly ``__all__`` (sorted, checked by a test); notebooks use only it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .capstone.bakeoff.adapters import LoaderAdapter, build_loader, loader_names, probe_loader
from .capstone.bakeoff.data import BakeoffData, cleanup_bakeoff, prepare_bakeoff
from .capstone.bakeoff.runner import BakeoffResult, format_bakeoff, run_bakeoff
from .capstone.pipeline import (
    TuningResult,
    TuningStep,
    epoch_rate,
    format_tuning,
    image_train_step,
    load_tuning,
    measure_audited,
    run_tuning,
    save_tuning,
    tuned_result,
    tuning_steps,
)
from .data.copyonread import ArrowRows, NumpyRows, PyObjectRows
from .data.datasets import MemmapBatches, MemmapRows, NpyFilesDataset, open_array
from .data.faults import damaged_copy
from .data.fixtures import Fixture, ensure_fixtures, fixture, format_fixture_table, verify
from .display.dashboard import DashboardModel
from .display.plots import (
    plot_bakeoff,
    plot_doc_lengths,
    plot_heatmap,
    plot_packing,
    plot_rates,
    plot_scaling,
    plot_shuffle_quality,
    plot_stages,
    plot_throughput,
    plot_token_rates,
    plot_tuning,
    plot_wait_compute,
    plot_worker_memory,
)
from .display.widget import Dashboard
from .errors import DataFormatError, FixtureError, LabkitError, RecordError, ScaleError
from .formats.ahead import (
    ResizeTo,
    break_even,
    plot_break_even,
    raw_ahead,
    read_decode_rate,
    resize_ahead,
)
from .formats.breakeven import BreakEven
from .formats.hdf5rows import Hdf5Rows, write_hdf5
from .formats.lazy import LazyFile
from .formats.lmdbrows import LmdbRows, write_lmdb
from .formats.moreformats import (
    ArrayRecordRows,
    LanceRows,
    array_record_status,
    lance_status,
    write_array_record,
    write_lance,
)
from .formats.onetensor import SafetensorsRows, TorchMmapRows
from .formats.table import (
    FormatRow,
    StoredFormat,
    format_formats,
    measure_formats,
    read_back,
    write_formats,
    write_more_formats,
    write_tensor_formats,
)
from .formats.tensorfiles import TensorFiles, write_tensor_files
from .formats.tfdata import TfDataResult, tfdata_measure, tfdata_status
from .formats.tfrecords import TFRecordRows, masked_crc, read_record, write_tfrecord
from .formats.trap import EagerHdf5Rows, EagerLmdbRows, TrapOutcome, trap_trial
from .formats.widget import BreakEvenWidget
from .images.augment import make_augment, torchvision_status
from .images.decode import available_decoders, decode_jpeg, fastest_decoder, file_bytes
from .images.folder import ImageFolderDataset, skip_collate
from .images.gpu import (
    dali_decode_rate,
    dali_status,
    gpu_decode_rate,
    gpu_decode_status,
    kornia_gpu_status,
    nvjpeg_decode,
)
from .images.packed import PackedImages, pack_images
from .images.stages import StageBreakdown, stage_breakdown
from .instruments.audits import Audit, audit, deliveries, key_id, tag_example, worker_tag
from .instruments.measurement import Measurement, compare
from .instruments.memcap import CappedRun, run_capped
from .instruments.memory import WorkerMemory, worker_memory
from .instruments.meter import measure, simulated_step
from .instruments.pagecache import evict_page_cache, measure_cold, page_cache_residency
from .instruments.resume import ResumeTrial, format_resume_table, resume_trial
from .instruments.shuffling import shard_of_bounds, shuffle_quality
from .instruments.timer import Timing, best_of
from .instruments.tuning import (
    Suggestion,
    WorkDataset,
    suggest_loader,
    thread_pools,
    usable_cores,
)
from .loading.loaders import worker_processes
from .loading.prefetchers import CudaStreamPrefetcher, ThreadPrefetcher, cuda_status, to_device
from .media import writers as _media_writers  # noqa: F401 - registers the video and audio kinds
from .media.audio import audio_info, audio_starts, audio_window
from .media.backends import (
    ffmpeg_status,
    media_gpu_status,
    pyav_status,
    spdl_status,
    torchcodec_status,
)
from .media.clips import check_clip, clip_indices, random_clips
from .media.datasets import AudioWindows, ClipDataset, ClipShardStream
from .media.decoders import MediaError, decode_all, decode_clip, video_info
from .media.frames import read_counter
from .media.plots import plot_clip_costs
from .media.spdlpipe import spdl_clips
from .objstore.s3shards import (
    S3ShardStream,
    ShardCache,
    ShardSet,
    shard_bytes_for,
    shard_efficiency,
    timed_gets,
    write_s3_shards,
)
from .objstore.shardplot import plot_shard_sizes
from .objstore.store import ObjectStore, s3_store
from .objstore.systems import objectstore_systems, run_objectstore_system
from .paths import runs_dir
from .profiling.diagnose import diagnose
from .profiling.diagnosis import DiagnoseError, Diagnosis
from .profiling.hotspots import Hotspot, profile_in_process
from .profiling.lanes import plot_timelines
from .profiling.rebuild import rebuild_loader
from .profiling.sampling import WorkerSample, pyspy_status, sample_workers
from .profiling.timeline import Timeline, record_timeline
from .profiling.torchprof import (
    TraceSummary,
    profile_loop,
    profiler_device_note,
    profiler_overhead,
    read_trace,
)
from .records.checkpoint import Checkpoint, load_records, read_checkpoint
from .records.decisions import decision_table, format_decision_table
from .records.machine import environment, format_environment, versions
from .remote.launch import TorchrunResult, torchrun
from .remote.server import Fault, serve
from .scale import SCALES, knob, resolve_scale
from .streams.arrays import RowRange, ShardStream, range_worker_init
from .streams.rowgroups import ParquetRowGroups, open_parquet
from .streams.split import ShardPlan, shard_plan
from .streams.tarshards import TarShardStream, split_by_rank
from .tokens.batching import batch_padding, budget_batches
from .tokens.corpus import TokenCorpus, open_tokens, token_dtype
from .tokens.epoch import DocumentEpoch, TokenBatches
from .tokens.masking import TinyLM, cu_seqlens, document_mask, packed_vs_alone, position_ids
from .tokens.mixing import blended_index, prefix_error, random_mix
from .tokens.packing import PACKERS, Packing, format_packing, pack
from .tokens.windows import random_windows, tokens_needed
from .tools.bench import run_benchmark
from .tools.doctor import Check, doctor, format_doctor
from .tools.render import write_report
from .tools.report import comparison_rows, format_table
from .tools.runner import run_notebooks

try:
    __version__ = _version("labkit")
except PackageNotFoundError:  # a plain checkout on sys.path
    __version__ = "0+unknown"

__all__ = [  # sorted; several names a line keep this file short
    "ArrayRecordRows", "ArrowRows", "AudioWindows", "Audit", "BakeoffData", "BakeoffResult",
    "BreakEven",
    "BreakEvenWidget", "CappedRun", "Check", "Checkpoint", "ClipDataset", "ClipShardStream",
    "CudaStreamPrefetcher", "Dashboard", "DashboardModel", "DataFormatError", "DiagnoseError",
    "Diagnosis", "DocumentEpoch", "EagerHdf5Rows", "EagerLmdbRows", "Fault", "Fixture",
    "FixtureError", "FormatRow", "Hdf5Rows", "Hotspot", "ImageFolderDataset", "LabkitError",
    "LanceRows", "LazyFile", "LmdbRows", "LoaderAdapter", "Measurement", "MediaError",
    "MemmapBatches",
    "MemmapRows", "NpyFilesDataset", "NumpyRows", "ObjectStore", "PACKERS", "PackedImages",
    "Packing", "ParquetRowGroups", "PyObjectRows", "RecordError", "ResizeTo", "ResumeTrial",
    "RowRange", "S3ShardStream", "SCALES", "SafetensorsRows", "ScaleError", "ShardCache",
    "ShardPlan", "ShardSet", "ShardStream", "StageBreakdown", "StoredFormat", "Suggestion",
    "TFRecordRows", "TarShardStream", "TensorFiles", "TfDataResult", "ThreadPrefetcher",
    "Timeline", "Timing", "TinyLM", "TokenBatches", "TokenCorpus", "TorchMmapRows",
    "TorchrunResult", "TraceSummary", "TrapOutcome", "TuningResult", "TuningStep",
    "WorkDataset", "WorkerMemory", "WorkerSample", "array_record_status", "audio_info",
    "audio_starts", "audio_window",
    "audit", "available_decoders", "batch_padding", "best_of", "blended_index", "break_even",
    "budget_batches", "build_loader",
    "check_clip", "cleanup_bakeoff", "clip_indices", "compare", "comparison_rows", "cu_seqlens",
    "cuda_status", "dali_decode_rate", "dali_status", "damaged_copy", "decision_table",
    "decode_all", "decode_clip", "decode_jpeg", "deliveries", "diagnose", "doctor",
    "document_mask", "ensure_fixtures", "environment", "epoch_rate", "evict_page_cache",
    "fastest_decoder", "ffmpeg_status", "file_bytes", "fixture", "format_bakeoff",
    "format_decision_table", "format_doctor", "format_environment", "format_fixture_table",
    "format_formats", "format_packing", "format_resume_table", "format_table", "format_tuning",
    "gpu_decode_rate", "gpu_decode_status", "image_train_step", "key_id",
    "knob", "kornia_gpu_status", "lance_status", "load_records", "load_tuning",
    "loader_names", "make_augment",
    "masked_crc", "measure", "measure_audited", "measure_cold",
    "measure_formats", "media_gpu_status", "nvjpeg_decode", "objectstore_systems", "open_array",
    "open_parquet", "open_tokens", "pack", "pack_images", "packed_vs_alone",
    "page_cache_residency", "plot_bakeoff", "plot_break_even", "plot_clip_costs",
    "plot_doc_lengths", "plot_heatmap", "plot_packing", "plot_rates", "plot_scaling",
    "plot_shard_sizes", "plot_shuffle_quality", "plot_stages", "plot_throughput",
    "plot_timelines", "plot_token_rates", "plot_tuning", "plot_wait_compute",
    "plot_worker_memory", "position_ids", "prefix_error", "prepare_bakeoff", "probe_loader",
    "profile_in_process", "profile_loop", "profiler_device_note", "profiler_overhead",
    "pyav_status", "pyspy_status", "random_clips", "random_mix", "random_windows",
    "range_worker_init", "raw_ahead", "read_back", "read_checkpoint", "read_counter",
    "read_decode_rate", "read_record", "read_trace", "rebuild_loader", "record_timeline",
    "resize_ahead", "resolve_scale", "resume_trial", "run_bakeoff", "run_benchmark",
    "run_capped", "run_notebooks", "run_objectstore_system", "run_tuning", "runs_dir", "s3_store",
    "sample_workers", "save_tuning", "serve", "shard_bytes_for", "shard_efficiency",
    "shard_of_bounds", "shard_plan", "shuffle_quality", "simulated_step",
    "skip_collate", "spdl_clips", "spdl_status", "split_by_rank", "stage_breakdown",
    "suggest_loader", "tag_example", "tfdata_measure", "tfdata_status", "thread_pools",
    "timed_gets", "to_device", "token_dtype", "tokens_needed", "torchcodec_status", "torchrun",
    "torchvision_status", "trap_trial", "tuned_result", "tuning_steps", "usable_cores",
    "verify", "versions", "video_info", "worker_memory", "worker_processes", "worker_tag",
    "write_array_record", "write_formats", "write_hdf5", "write_lance", "write_lmdb",
    "write_more_formats", "write_report", "write_s3_shards",
    "write_tensor_files", "write_tensor_formats", "write_tfrecord",
]
