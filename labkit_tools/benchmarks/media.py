"""``labkit bench media``: random 16-frame clips over workers against one core (chapter 15)."""

from __future__ import annotations

import functools
import os

import numpy as np
from torch.utils.data import Dataset

from labkit.data.fixtures import fixture, source_folder
from labkit.instruments.stats import median_interval, paired_trials
from labkit.scale import resolve_scale

from .ceiling import worker_scaling
from .registry import benchmark

GOAL = 0.8


@functools.cache
def _decoder(pid: int, path: str):
    """One ``VideoDecoder`` per file and process (one opened before a fork is not reused)."""
    from torchcodec.decoders import VideoDecoder

    return VideoDecoder(path, seek_mode="exact", num_ffmpeg_threads=1)


class _Clips(Dataset):
    """Clip ``i`` (``(file, frame indices)``) decoded by torchcodec."""

    def __init__(self, plan):
        self.plan = plan

    def __len__(self):
        return len(self.plan)

    def __getitem__(self, i):
        path, indices = self.plan[i]
        return _decoder(os.getpid(), path).get_frames_at(indices).data


def _plan(fx, gop: int, clips: int, frames: int, seed: int) -> _Clips:
    """``clips`` clips of ``frames`` consecutive frames at random starts, over the videos of
    keyframe interval ``gop`` (the starts a pure function of the seed and the video)."""
    folder, plan = source_folder(fx), []
    videos = [v for v in fx.meta["videos"] if v["gop"] == gop]
    for v in videos:
        rng = np.random.default_rng([seed, v["id"]])
        for s in rng.integers(0, v["frames"] - frames + 1, -(-clips // len(videos))):
            plan.append((str(folder / v["file"]), list(range(int(s), int(s) + frames))))
    return _Clips(plan[:clips])


@benchmark("media", goal=f"N workers decode random 16-frame clips at >= {GOAL} x (single-core "
                         "rate x min(N, cores)) (median of paired ratios, 95% interval; "
                         "inconclusive when the machine's measured parallelism is below the "
                         "goal); also prints a random clip's cost at a 10 s keyframe interval "
                         "over a 1-frame one")
def media(scale: str | None = None, backend: str = "torchcodec", num_workers: int | None = None,
          clips: int = 192, frames: int = 16, batch_size: int = 16, rounds: int = 7) -> dict:
    """Random clips by :func:`.ceiling.worker_scaling`. Batches of 16: at ci's 64 px a clip
    decodes in ~2 ms, and batches of 4 time the per-batch hand-over instead."""
    scale = resolve_scale(scale)
    fx = fixture("videos", scale, progress=False)
    gops = sorted(fx.meta["gops"])
    if backend != "torchcodec":
        raise ValueError(f"backend={backend!r}: this benchmark decodes with torchcodec")
    ds = _plan(fx, 25 if 25 in gops else gops[len(gops) // 2], clips, frames, seed=1)
    result = {"scale": scale, "backend": backend, "video_size": fx.meta["sizes"][0],
              "clip_frames": frames, "clips": len(ds),
              **worker_scaling(ds, GOAL, num_workers, batch_size, rounds, unit="clips")}

    far, near = (_plan(fx, g, 12, frames, seed=2) for g in (gops[-1], gops[0]))
    for d in (far, near):  # open the decoders (scanning the file) outside the clock
        d[0]

    def decode(d):
        return lambda: [d[i] for i in range(len(d))]

    pairs = paired_trials(decode(far), decode(near), pairs=rounds)
    med, lo, hi, level = median_interval([a / b for a, b in pairs])
    return result | {"keyframe_interval_far": gops[-1], "keyframe_interval_near": gops[0],
                     "clip_cost_ratio_far_over_near": med, "clip_cost_ratio_ci": [lo, hi],
                     "clip_cost_ratio_ci_level": round(level, 4),
                     "clip_ms_far": 1e3 * min(a for a, _ in pairs) / len(far),
                     "clip_ms_near": 1e3 * min(b for _, b in pairs) / len(near)}
