"""The video and audio fixtures' writers, and which decoders run here (chapter 15).

``writers`` holds the ``video`` and ``audio`` fixture kinds; ``backends`` the decoder checks
``lk.status("ffmpeg")``, ``"torchcodec"``, ``"pyav"``, ``"spdl"`` and ``"media_gpu"``.
"""

__all__: list[str] = []
