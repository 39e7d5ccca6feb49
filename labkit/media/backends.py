"""Which media decoders can run here, and why not: FFmpeg, torchcodec, PyAV, SPDL, GPU (ch. 15).

torchcodec loads the system's FFmpeg shared libraries (libavcodec, libavformat, ...) when it
is first used; without them every decoder call fails. PyAV's wheels carry their own FFmpeg,
so PyAV runs anywhere and is the baseline. Each check (``lk.status("ffmpeg")``,
``"torchcodec"``, ``"pyav"``, ``"spdl"``, ``"media_gpu"``) returns ``(ok, reason)`` and never
raises: a wheel built for another torch or a missing library can fail with any exception.
A missing FFmpeg is a skip on a learner's machine and a failure under ``CI=true``
(tests/conftest.py: CI installs FFmpeg, so there its absence is a bug).
"""

from __future__ import annotations

import functools
import shutil

from ..optional import check, library_status, status

#: What to install when torchcodec cannot find FFmpeg's libraries (printed by ``make lab``).
FFMPEG_INSTALL = (
    "install FFmpeg's shared libraries (torchcodec loads them; FFmpeg 4-7): "
    "`sudo apt-get install ffmpeg` (Debian/Ubuntu), `brew install ffmpeg` (macOS) or "
    "`conda install -c conda-forge \"ffmpeg<8\"`")


@check("torchcodec")
@functools.cache
def _torchcodec_status() -> tuple[bool, str]:
    """``(True, version)`` if torchcodec is installed and its FFmpeg libraries load
    (importing ``torchcodec.decoders`` loads libav*: without them it raises RuntimeError)."""
    ok, why = library_status("torchcodec", load=False, install="pip install torchcodec")
    if not ok:
        return ok, why
    return library_status("torchcodec", "torchcodec", "torchcodec.decoders",
                          install=FFMPEG_INSTALL)


@check("ffmpeg")
def _ffmpeg_status() -> tuple[bool, str]:
    """Whether FFmpeg's libraries are usable by torchcodec (the chapter's main decoder).

    The ``ffmpeg`` command itself is not needed; its presence is reported as a hint.
    """
    ok, reason = _torchcodec_status()
    cli = shutil.which("ffmpeg")
    return ok, reason + (f"; ffmpeg command: {cli}" if cli else "; no ffmpeg command on PATH")


@check("pyav")
def _pyav_status() -> tuple[bool, str]:
    """``(True, detail)`` if PyAV imports (its wheel brings its own FFmpeg)."""
    ok, why = library_status("av", label="PyAV", install="pip install av")
    if not ok:
        return ok, why
    import av  # loaded above

    codec = ".".join(map(str, av.library_versions["libavcodec"]))
    return True, f"{why} (its own FFmpeg: libavcodec {codec})"


@check("spdl")
@functools.cache
def _spdl_status() -> tuple[bool, str]:
    """``(True, version)`` if SPDL's pipeline and its FFmpeg-backed I/O both load."""
    return library_status("spdl", "spdl.io", "spdl.pipeline", label="SPDL",
                          install="pip install spdl (it loads the system's FFmpeg, as "
                                  f"torchcodec does: {FFMPEG_INSTALL})")


@check("media_gpu")
def _media_gpu_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if torchcodec can decode on a CUDA device (NVDEC)."""
    ok, reason = status("cuda", device=device)
    if not ok:
        return False, f"NVDEC decode needs a CUDA GPU: {reason}"
    ok, why = _torchcodec_status()
    if not ok:
        return False, why
    import torch

    if not torch.version.cuda:
        return False, "this torch is a CPU build: torchcodec's CUDA decode needs a CUDA torch"
    return True, f"{why}, {reason}"

