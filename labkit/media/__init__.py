"""The video and audio fixtures' writers, and which decoders run here (chapter 15).

Importing it registers the ``video`` and ``audio`` fixture kinds and the decoder checks
``lk.status("ffmpeg")``, ``"torchcodec"``, ``"pyav"``, ``"spdl"`` and ``"media_gpu"``.
"""

from __future__ import annotations

from . import (
    backends,  # noqa: F401 - registers the decoder checks
    writers,  # noqa: F401 - registers the video and audio fixture kinds
)

__all__: list[str] = []
