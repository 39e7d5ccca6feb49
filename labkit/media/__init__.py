"""The video and audio fixtures' writers, and which decoders run here (chapter 15).

Importing the folder registers the ``video`` and ``audio`` fixture kinds
(:mod:`.writers`) and the decoder checks ``lk.status("ffmpeg")``, ``"torchcodec"``,
``"pyav"``, ``"spdl"``, ``"media_gpu"`` (:mod:`.backends`). The chapter types its subject
(clip plans, decoders, datasets, audio windows) in its own cells.
"""

from __future__ import annotations

from . import (
    backends,  # noqa: F401 - registers the decoder checks
    writers,  # noqa: F401 - registers the video and audio fixture kinds
)

__all__: list[str] = []
