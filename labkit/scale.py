"""Scale presets and the one table of per-scale knobs (every chapter).

``ci`` fits a 2-core CI runner in seconds, ``workshop`` (the default) makes effects
visible on a laptop in minutes, ``full`` is sized for page-cache, disk and network
effects to dominate (GBs). Introduced in chapter 00. Every other scale-dependent value a
chapter uses (timed passes, dashboard seconds, sweep sizes) is one row of :data:`KNOBS`,
read with :func:`knob`.
"""

from __future__ import annotations

import os

from .errors import ScaleError

SCALES = ("ci", "workshop", "full")
DEFAULT_SCALE = "workshop"

# Every knob whose value depends on the scale, in one table: knob -> {scale: value}.
# ci keeps a chapter under 40 s on 2 cores (its timings are never checked, so one timed
# pass is enough); workshop makes effects visible on a laptop; full is for a real machine.
# ci values also decide what nbval-checked cells print: change them with the outputs.
KNOBS: dict[str, dict[str, object]] = {
    # every measuring chapter
    "repeats": {"ci": 1, "workshop": 3, "full": 3},          # timed passes; median reported
    "warmup": {"ci": 0, "workshop": 1, "full": 1},           # untimed passes first
    "dashboard_s": {"ci": 1, "workshop": 8, "full": 10},     # seconds per dashboard run
    "worker_counts": {"ci": [0, 1, 2], "workshop": [0, 1, 2, 4], "full": [0, 1, 2, 4]},
    # `labkit run`'s per-cell guard (--cell-timeout raises it): it catches a hang, not a slow
    # machine; a workshop cell beside other work on 2 cores ran past 600 s (issue 46)
    "cell_timeout_s": {"ci": 600, "workshop": 1800, "full": 7200},
    # 00 and 16, `labkit roofline`: each ceiling's work per trial (labkit/ceilings.py)
    "ceiling_mib": {"ci": 32, "workshop": 256, "full": 1024},  # read, copied, sent to the GPU
    "ceiling_samples": {"ci": 5000, "workshop": 50_000, "full": 100_000},  # DataLoader fetch
    "ceiling_batches": {"ci": 200, "workshop": 2000, "full": 5000},  # handed over by a worker
    "ceiling_jpegs": {"ci": 64, "workshop": 128, "full": 256},  # decoded from the fixture
    # 01 measuring a loader: batches per timed pass (None: whole epochs). At ci a pass over
    # 2048 sample files plus warm-up passes put the chapter at 60+ s under load; 12 batches
    # of 64 are enough for a rate, and the exactly-once check still reads whole epochs
    "pass_batches": {"ci": 12, "workshop": None, "full": None},
    # 04 scaling out
    "pg_timeout_s": {"ci": 2, "workshop": 5, "full": 5},     # process-group timeout, hang demo
    # 06 WebDataset
    "shard_samples": {"ci": [16, 64, 256], "workshop": [64, 500, 2000],
                      "full": [64, 500, 2000]},              # ShardWriter maxcount sweep
    "http_bytes_per_s": {"ci": 8e6, "workshop": 20e6, "full": 20e6},  # per connection
    "max_batches": {"ci": None, "workshop": 60, "full": 60},  # cap per decoding pass
    # 07 HF datasets streaming
    "max_examples": {"ci": None, "workshop": 50_000, "full": 50_000},  # per measured pass
    # 08 shuffling and resume
    "shuffle_buffers": {"ci": [1, 16, 64, 256], "workshop": [1, 16, 100, 1000, 4000],
                        "full": [1, 16, 100, 1000, 4000]},  # 1 = no buffer
    # 09 prefetch
    "scaling_samples": {"ci": 60, "workshop": 480, "full": 1920},
    "startup_workers": {"ci": 1, "workshop": 2, "full": 2},  # each spawn start imports torch
    "sweep_batches": {"ci": 6, "workshop": 40, "full": 80},  # batches per timed pass
    "prefetch_factors": {"ci": [1, 2], "workshop": [1, 2, 4], "full": [1, 2, 4]},
    "tune_batches": {"ci": 4, "workshop": 30, "full": 60},
    # (method, persistent_workers) timed for worker start-up; each spawn/forkserver start
    # imports torch afresh (seconds), so ci runs fork both ways and only the persistent
    # spawn of the others (its epoch 1 is the fresh start)
    "start_methods": {"ci": [("fork", False), ("fork", True), ("spawn", True)],
                      "workshop": [("fork", False), ("fork", True), ("spawn", True),
                                   ("forkserver", True), ("spawn", False),
                                   ("forkserver", False)],
                      "full": [("fork", False), ("fork", True), ("spawn", True),
                               ("forkserver", True), ("spawn", False), ("forkserver", False)]},
    "decode_threads_images": {"ci": 64, "workshop": 400, "full": 2000},  # threads vs procs
    # 12 storage formats
    "format_rows": {"ci": 1024, "workshop": 10000, "full": 200000},  # rows per format
    # 10 decode and augment, 16 capstone (bake-off)
    "image_samples": {"ci": 256, "workshop": 2000, "full": 8000},  # images timed per pass
    # 16 capstone
    # images per tuning pass: each step now runs 2 x tuning_pairs passes, so workshop's 4000
    # became 2000 (the chapter took 10 min at 4000 x 5 pairs on a loaded 2-core machine)
    "tuning_samples": {"ci": 256, "workshop": 2000, "full": 20000},
    "big_batch_size": {"ci": 64, "workshop": 128, "full": 128},  # the "batching" step
    # interleaved (candidate, best so far) pairs of passes per tuning step: up to 8 pairs the
    # sign-test interval is the full range (6 pairs: 97 % coverage, 3 pairs: 75 %), so a
    # change is kept only if every pair was faster
    "tuning_pairs": {"ci": 3, "workshop": 6, "full": 7},
    # 15 video and audio
    "media_clips": {"ci": 12, "workshop": 48, "full": 128},      # random clips per pass
    "audio_windows": {"ci": 16, "workshop": 100, "full": 400},   # audio crops per pass
    # 14 object stores: rows of the array fixture put in the bucket (1.5 KiB of tar each),
    # the shard sizes swept, and the store's first-byte latency and per-connection bandwidth
    "s3_rows": {"ci": 1024, "workshop": 65536, "full": 262144},
    "s3_shard_kib": {"ci": [64, 256, 1024], "workshop": [1024, 4096, 16384, 65536],
                     "full": [1024, 16384, 65536, 262144]},
    "s3_latency_s": {"ci": 0.02, "workshop": 0.02, "full": 0.05},
    "s3_bytes_per_s": {"ci": 25e6, "workshop": 100e6, "full": 100e6},
}


def resolve_scale(scale: str | None = None) -> str:
    """A valid scale name: the argument, else ``LABKIT_SCALE``, else ``workshop``; a
    :class:`ScaleError` names the three otherwise."""
    env = os.environ.get("LABKIT_SCALE")
    name = str(scale if scale is not None else env or DEFAULT_SCALE).strip().lower()
    if name not in SCALES:
        what = f"scale {scale!r}" if scale is not None else f"LABKIT_SCALE={env!r}"
        raise ScaleError(f"{what} is not a scale; choose one of {', '.join(SCALES)} "
                         "(e.g. LABKIT_SCALE=ci for a quick run)")
    return name


def knob(name: str, scale: str | None = None):
    """One row of :data:`KNOBS` at ``scale`` (default: ``LABKIT_SCALE``), as a chapter's
    parameters cell reads it: ``REPEATS = lk.knob("repeats", SCALE)`` (a number in its place
    changes it). An unknown knob is a ``KeyError`` listing them; a bad scale a ScaleError."""
    scale = resolve_scale(scale)
    try:
        row = KNOBS[name]
    except KeyError:
        raise KeyError(f"no scale knob {name!r}; knobs: {', '.join(sorted(KNOBS))}") from None
    value = row[scale]
    return list(value) if isinstance(value, list) else value  # a learner's edit stays local
