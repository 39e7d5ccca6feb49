"""Clip datasets for DataLoader workers: over video files and over tar shards (chapter 15).

:class:`ClipDataset` is map-style: item ``i`` is clip ``i`` of a plan made by
:func:`~labkit.random_clips`, decoded in whichever worker asks for it. Each worker opens a
file's torchcodec decoder once, lazily (never before the fork), and keeps it.
:class:`ClipShardStream` reads the same videos from WebDataset-style tar shards (one mp4
per sample), split over rank x worker by the kit's one split base, and decodes the clips
from the bytes in memory. Both deliver ``{"id", "video", "worker", "indices", "frames"}``;
the ids feed :func:`~labkit.audit` (every planned clip delivered once).
:class:`AudioWindows` does the same for audio crops.
"""

from __future__ import annotations

import json
import os

import torch
from torch.utils.data import Dataset

from ..data.fixtures import source_folder
from ..instruments.audits import worker_tag
from ..streams.split import SplitStream
from ..streams.tarshards import index_shard, shard_files
from .audio import audio_window
from .clips import Clip, random_clips
from .decoders import MediaError, decode_clip, video_decoder


def _sample(clip: Clip, frames: torch.Tensor) -> dict:
    return {"id": clip.id, "video": clip.video, "worker": worker_tag(),
            "indices": torch.tensor(clip.indices), "frames": frames}


class ClipDataset(Dataset):
    """Clips of a ``video`` fixture's files, decoded on demand.

    Args:
        fx: the ``videos`` Fixture (its ``meta["videos"]`` lists files, ids, frame counts).
        clips: the plan, a list of :class:`~labkit.media.clips.Clip` (ids ``0..n-1``).
        backend, seek, size: as :func:`~labkit.decode_clip`.
    """

    def __init__(self, fx, clips: list[Clip], backend: str = "torchcodec",
                 seek: str = "exact", size: tuple[int, int] | None = None):
        self.folder = source_folder(fx)
        self.files = {v["id"]: str(self.folder / v["file"]) for v in fx.meta["videos"]}
        self.clips, self.backend, self.seek, self.size = list(clips), backend, seek, size
        self._decoders: dict = {}  # per process, filled lazily after the fork
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, i: int) -> dict:
        clip = self.clips[i]
        path = self.files[clip.video]
        dec = None
        if self.backend == "torchcodec":
            if self._pid != os.getpid():
                # a decoder opened before a fork shares its file offset with the parent's:
                # the two processes' reads interleave and FFmpeg sees garbage (chapter 12's
                # open-before-fork trap), so each process opens its own
                self._decoders, self._pid = {}, os.getpid()
            dec = self._decoders.get(path)
            if dec is None:
                dec = self._decoders[path] = video_decoder(path, seek=self.seek)
        return _sample(clip, decode_clip(path, clip.indices, self.backend, seek=self.seek,
                                         size=self.size, decoder=dec))

    def __getstate__(self):  # open decoders stay in the process that opened them (spawn)
        return {**self.__dict__, "_decoders": {}, "_pid": None}


class ClipShardStream(SplitStream):
    """Clips from tar shards of mp4 files, split over rank x worker, decoded from memory.

    Clip ``j`` of video ``v`` has id ``v * clips_per_video + j``; its start is drawn as in
    :func:`~labkit.random_clips` (same seed: the same clips as :class:`ClipDataset`).

    Args:
        source: the ``videos`` Fixture (its ``shards/`` folder), a folder or shard paths.
        clips_per_video, frames, stride, seed: the plan, as :func:`~labkit.random_clips`.
        skip_errors: count a video that cannot be decoded in :attr:`errors` and go on
            (default: raise, naming the shard and sample).
    """

    splits = ("rank_worker",)

    def __init__(self, source, *, clips_per_video: int, frames: int, stride: int = 1,
                 seed: int = 0, backend: str = "torchcodec", skip_errors: bool = False):
        super().__init__(seed=None)
        folder = source_folder(source)
        self.shards = shard_files(folder / "shards" if (folder / "shards").is_dir() else source)
        self.plan = {"clips_per_video": clips_per_video, "frames": frames, "stride": stride,
                     "seed": seed}
        self.backend, self.skip_errors = backend, skip_errors
        self.errors: list[str] = []

    def __iter__(self):
        for s in self.share(len(self.shards)):
            path = self.shards[s]
            with open(path, "rb") as fh:
                for key, members in index_shard(path):
                    try:
                        yield from self._clips(path, key, members, fh)
                    except MediaError as e:
                        if not self.skip_errors:
                            raise
                        self.errors.append(str(e))

    def _clips(self, path, key: str, members: dict, fh):
        def member(ext):
            if ext not in members:
                raise MediaError(f"{path}: sample {key} has no .{ext} member")
            offset, size = members[ext]
            fh.seek(offset)
            return fh.read(size)

        meta = json.loads(member("json"))
        data = member("mp4")
        p = self.plan
        plan = random_clips([meta], p["clips_per_video"], p["frames"], p["stride"], p["seed"])
        dec = None
        for j, clip in enumerate(plan):
            clip = Clip(meta["id"] * p["clips_per_video"] + j, meta["id"], clip.indices)
            try:
                if self.backend == "torchcodec" and dec is None:
                    dec = video_decoder(data)
                frames = decode_clip(data, clip.indices, self.backend, decoder=dec)
            except MediaError as e:
                raise MediaError(f"{path}: sample {key}: {e}") from None
            yield _sample(clip, frames)


class AudioWindows(Dataset):
    """Fixed-length audio windows: item ``i`` is ``(file, start_s)`` number ``i`` of a plan.

    Args:
        files: audio file paths; windows: ``(file index, start_s)`` pairs.
        seconds: window length; sample_rate: resample to it (None: the files' own, which
            must then be the same for every file, so windows collate into one batch).
        backend: as :func:`~labkit.audio_window`.
    """

    def __init__(self, files, windows, seconds: float, sample_rate: int | None = None,
                 backend: str = "torchcodec"):
        self.files = [str(f) for f in files]
        self.windows = [(int(f), float(s)) for f, s in windows]
        self.seconds, self.sample_rate, self.backend = seconds, sample_rate, backend

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict:
        f, start = self.windows[i]
        x = audio_window(self.files[f], start, self.seconds, sample_rate=self.sample_rate,
                         backend=self.backend)
        return {"id": i, "worker": worker_tag(), "audio": x}
