"""Clip sampling, the training pattern for video, and checking what came back (chapter 15).

A clip is ``frames`` frames at a ``stride`` from a start frame. Training draws clips at
random starts; :func:`random_clips` makes the draw a pure function of the seed, so the
clips every worker owes are known before any byte is read and an audit can count them.
:func:`check_clip` reads the frame counter each fixture frame carries and says whether the
frames returned are the frames asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frames import read_counters


def clip_indices(start: int, frames: int, stride: int = 1) -> list[int]:
    """``[start, start + stride, ...]``: the ``frames`` frame indices of one clip."""
    if frames < 1 or stride < 1 or start < 0:
        raise ValueError(f"a clip needs frames >= 1, stride >= 1, start >= 0 (got {frames}, "
                         f"{stride}, {start})")
    return list(range(start, start + frames * stride, stride))


@dataclass(frozen=True)
class Clip:
    """One clip to decode: its id (for the audit), the video and the frame indices."""

    id: int
    video: int
    indices: tuple[int, ...]


def random_clips(videos: list[dict], clips_per_video: int, frames: int, stride: int = 1,
                 seed: int = 0) -> list[Clip]:
    """``clips_per_video`` clips per video at random starts; clip ids ``0..n-1`` in order.

    ``videos`` are the fixture's entries (``fx.meta["videos"]``: ``id`` and ``frames``).
    The starts depend only on ``seed`` and the video's id.
    """
    span = (frames - 1) * stride + 1
    out = []
    for v in videos:
        if v["frames"] < span:
            raise ValueError(f"video {v['id']} has {v['frames']} frames, a clip needs {span}")
        rng = np.random.default_rng([seed, v["id"]])
        for s in rng.integers(0, v["frames"] - span + 1, clips_per_video):
            out.append(Clip(len(out), v["id"], tuple(clip_indices(int(s), frames, stride))))
    return out


@dataclass(frozen=True)
class ClipCheck:
    """What the frame counters say about a decoded clip."""

    asked: tuple[int, ...]
    got: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return self.asked == self.got

    @property
    def off_by(self) -> int:
        """The largest distance between a frame asked for and the frame returned."""
        return max(abs(a - g) for a, g in zip(self.asked, self.got, strict=True))

    def __str__(self) -> str:
        return ("frames as asked" if self.ok else
                f"WRONG FRAMES: asked {list(self.asked)}, got {list(self.got)} "
                f"(off by up to {self.off_by})")


def check_clip(frames, indices) -> ClipCheck:
    """Read the counters of decoded ``frames`` and compare them with ``indices``."""
    return ClipCheck(tuple(int(i) for i in indices), tuple(read_counters(frames)))
