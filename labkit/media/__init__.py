"""Video and audio decoded just in time: fixtures, backends, clips, audio windows (ch. 15).
"""

from __future__ import annotations

from . import (
    backends,  # noqa: F401 - registers the decoder checks (lk.status("ffmpeg"), ...)
    writers,  # noqa: F401 - registers the video and audio fixture kinds
)
from .audio import audio_starts, audio_window
from .clips import check_clip, clip_indices, random_clips
from .datasets import AudioWindows, ClipDataset, ClipShardStream
from .decoders import MediaError, decode_all, decode_clip, video_info
from .frames import read_counter
from .plots import plot_clip_costs
from .spdlpipe import spdl_clips

__all__ = [
    "AudioWindows",
    "ClipDataset",
    "ClipShardStream",
    "MediaError",
    "audio_starts",
    "audio_window",
    "check_clip",
    "clip_indices",
    "decode_all",
    "decode_clip",
    "plot_clip_costs",
    "random_clips",
    "read_counter",
    "spdl_clips",
    "video_info",
]
