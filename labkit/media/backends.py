"""Which media decoders can run here, and why not: FFmpeg, torchcodec, PyAV, SPDL, GPU (ch. 15).

torchcodec and SPDL load the system's FFmpeg libraries; PyAV's wheels carry their own. Each
check (``lk.status("ffmpeg")``, ...) returns ``(ok, reason)`` and never raises.
"""

from __future__ import annotations

import functools
import shutil

from packaging.requirements import Requirement

from ..optional import check, library_status, library_version, status
from .pairing import torchcodec_requirement

#: What to install when torchcodec cannot find FFmpeg's libraries (printed by ``make lab``);
#: the majors are read off the wheels' per-major libraries (``libtorchcodec_core4.so`` ...).
FFMPEG_VERSIONS = "FFmpeg 4-8 for torchcodec 0.13, 4-9 for torchcodec 0.16+ and SPDL 0.8"
FFMPEG_INSTALL = (
    f"install FFmpeg's shared libraries (torchcodec and SPDL load them; {FFMPEG_VERSIONS}): "
    "`sudo apt-get install ffmpeg` (Debian/Ubuntu), `brew install ffmpeg` (macOS) or "
    "`conda install -c conda-forge \"ffmpeg<9\"`")


@check("torchcodec")
@functools.cache
def _torchcodec_status() -> tuple[bool, str]:
    """``(True, version)`` if torchcodec is installed and its FFmpeg libraries load
    (importing ``torchcodec.decoders`` loads libav*: without them it raises RuntimeError)."""
    import torch

    requirement, pairing = torchcodec_requirement(torch.version.cuda)
    ok, why = library_status("torchcodec", load=False, install=f"pip install '{requirement}'")
    if not ok:
        return ok, why
    ok, why = library_status("torchcodec", "torchcodec", "torchcodec.decoders",
                             install=FFMPEG_INSTALL)
    installed = library_version("torchcodec").split("+")[0]
    if ok or Requirement(requirement).specifier.contains(installed):
        return ok, why
    # it does not load, and it is not the release `make setup` pairs with this torch build
    # (PyPI's 0.17 beside a CPU torch): that, not FFmpeg, is the likely cause
    return False, (f"torchcodec {installed} does not load beside torch {torch.__version__}, and "
                   f"it is not the build for it: pip install '{requirement}' ({pairing}; "
                   f"`make setup` pairs them). {why}")


@check("ffmpeg")
def _ffmpeg_status() -> tuple[bool, str]:
    """Whether torchcodec can use FFmpeg's libraries (the ``ffmpeg`` command: a hint only)."""
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


@functools.cache
def _cuda_decode_probe(device: str) -> str | None:
    """Decode a tiny H.264 clip on ``device``; ``None`` if that worked, else what went wrong.

    torchcodec has no public "built with CUDA" flag, so the probe decodes 4 frames it encoded
    as H.264 (by name: LGPL FFmpegs fall back to MPEG-4 Part 2). The CPU build refuses the
    device; a CUDA build without NVDEC decodes on the CPU into a CUDA tensor, which only the
    decoder's ``cpu_fallback`` tells (review 15-F1; pytorch/torchcodec PR #996).
    """
    try:
        import torch
        from torchcodec.decoders import VideoDecoder
        from torchcodec.encoders import VideoEncoder

        clip = VideoEncoder(torch.zeros(4, 3, 128, 128, dtype=torch.uint8),
                            frame_rate=10).to_tensor(format="mp4", codec="h264")
    except Exception as e:  # noqa: BLE001 - an FFmpeg without an H.264 encoder, ...
        return f"cannot make the probe's H.264 test clip ({type(e).__name__}: {_short(e)})"
    try:
        decoder = VideoDecoder(clip, device=device)
        frame = decoder[0]
    except Exception as e:  # noqa: BLE001 - torchcodec raises RuntimeError for a CPU build
        return f"{type(e).__name__}: {_short(e)}"
    if not frame.is_cuda:
        return f"the decoded frame came back on {frame.device}, not {device}"
    if decoder.cpu_fallback:  # a CUDA tensor, decoded on the CPU; its str says why
        return ("torchcodec fell back to CPU decoding (a CUDA tensor, no NVDEC): "
                f"{decoder.cpu_fallback}")
    return None


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text.rsplit(".cpp:", 1)[-1].lstrip("0123456789, ")[:160] or type(e).__name__


@check("media_gpu")
def _media_gpu_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if a test decode ran on a CUDA device (NVDEC), else why not."""
    ok, reason = status("cuda", device=device)
    if not ok:
        return False, f"NVDEC decode needs a CUDA GPU: {reason}"
    ok, why = _torchcodec_status()
    if not ok:
        return False, why
    import torch

    if not torch.version.cuda:
        return False, "this torch is a CPU build: torchcodec's CUDA decode needs a CUDA torch"
    failed = _cuda_decode_probe(str(device or "cuda"))
    if failed:  # pip's default torchcodec is the CPU build: name the CUDA one for this torch
        cu = "cu" + torch.version.cuda.replace(".", "")[:3]
        return False, (
            f"{why}, but a test decode on the GPU failed ({failed}): install torchcodec's CUDA "
            f"build for torch {torch.__version__} (CUDA {torch.version.cuda}): `pip install "
            f"torchcodec --index-url https://download.pytorch.org/whl/{cu}` (beside a CPU or "
            "CUDA 12 torch the kit installs 0.13.0, PyPI's CPU build; PyPI's 0.14 and newer "
            "are CUDA 13 builds; pytorch/torchcodec README, 'Installing CUDA-enabled "
            "TorchCodec')")
    return True, f"{why}, {reason}; a test decode on the GPU ran"

