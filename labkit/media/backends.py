"""Which media decoders can run here, and why not: FFmpeg, torchcodec, PyAV, SPDL, GPU (ch. 15).

torchcodec loads the system's FFmpeg shared libraries (libavcodec, libavformat, ...) when it
is first used; without them every decoder call fails. PyAV's wheels carry their own FFmpeg,
so PyAV runs anywhere and is the baseline. Each probe returns ``(ok, reason)`` and never
raises: a wheel built for another torch or a missing library can fail with any exception.
A missing FFmpeg is a skip on a learner's machine and a failure under ``CI=true``
(tests/conftest.py: CI installs FFmpeg, so there its absence is a bug).
"""

from __future__ import annotations

import functools
import shutil

from ..loading.prefetchers import cuda_status

#: What to install when torchcodec cannot find FFmpeg's libraries (printed by ``make lab``).
FFMPEG_INSTALL = (
    "install FFmpeg's shared libraries (torchcodec loads them; FFmpeg 4-7): "
    "`sudo apt-get install ffmpeg` (Debian/Ubuntu), `brew install ffmpeg` (macOS) or "
    "`conda install -c conda-forge \"ffmpeg<8\"`")


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"


@functools.cache
def torchcodec_status() -> tuple[bool, str]:
    """``(True, version)`` if torchcodec imports and its FFmpeg libraries load."""
    try:
        import torchcodec
        from torchcodec.decoders import VideoDecoder  # noqa: F401 - loads libav*
    except Exception as e:  # noqa: BLE001 - a missing libavutil.so raises RuntimeError/OSError
        return False, f"torchcodec cannot load FFmpeg here ({_short(e)}); {FFMPEG_INSTALL}"
    return True, f"torchcodec {torchcodec.__version__}"


def ffmpeg_status() -> tuple[bool, str]:
    """Whether FFmpeg's libraries are usable by torchcodec (the chapter's main decoder).

    The ``ffmpeg`` command itself is not needed; its presence is reported as a hint.
    """
    ok, reason = torchcodec_status()
    cli = shutil.which("ffmpeg")
    return ok, reason + (f"; ffmpeg command: {cli}" if cli else "; no ffmpeg command on PATH")


def pyav_status() -> tuple[bool, str]:
    """``(True, detail)`` if PyAV imports (its wheel brings its own FFmpeg)."""
    try:
        import av
    except Exception as e:  # noqa: BLE001
        return False, f"PyAV does not import ({_short(e)}); pip install av"
    codec = ".".join(map(str, av.library_versions["libavcodec"]))
    return True, f"PyAV {av.__version__} (its own FFmpeg: libavcodec {codec})"


@functools.cache
def spdl_status() -> tuple[bool, str]:
    """``(True, version)`` if SPDL's pipeline and its FFmpeg-backed I/O both load."""
    try:
        from importlib.metadata import version

        import spdl.io  # noqa: F401
        import spdl.pipeline  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return False, f"SPDL does not load here ({_short(e)})"
    return True, f"SPDL {version('spdl')}"


def media_gpu_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if torchcodec can decode on a CUDA device (NVDEC)."""
    ok, reason = cuda_status(device)
    if not ok:
        return False, f"NVDEC decode needs a CUDA GPU: {reason}"
    ok, why = torchcodec_status()
    if not ok:
        return False, why
    import torch

    if not torch.version.cuda:
        return False, "this torch is a CPU build: torchcodec's CUDA decode needs a CUDA torch"
    return True, f"{why}, {reason}"

