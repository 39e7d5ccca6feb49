"""GPU decode and augmentation checks: nvJPEG via torchcodec, kornia on CUDA, DALI (ch. 10, 15).

``lk.status("gpu_decode")``, ``"kornia_gpu"`` and ``"dali"`` say whether each path can run
and, if not, why; every probe catches every exception (a wheel built for another torch can
fail with any). nvJPEG goes through torchcodec's ``decode_jpeg`` (0.16+, a CUDA build), else
torchvision's, both asked for RGB.
"""

from __future__ import annotations

import functools
import io

from ..errors import LabkitError
from ..instruments.timer import best_of
from ..optional import check, library_status, status
from .augment import torchvision_install

#: NVIDIA DALI is CUDA-only, one wheel per CUDA major version: the one for this torch's.
DALI_INSTALL = ("pip install nvidia-dali-cuda130 for a CUDA 13 torch (PyPI's 2.11-2.15), "
                "nvidia-dali-cuda120 for a CUDA 12 one (see docs/gpu.md)")


def dali_distribution() -> str:
    """The DALI wheel that goes with this torch's CUDA major (the ``gpu`` extras)."""
    import torch

    return "nvidia-dali-cuda120" if (torch.version.cuda or "").startswith("12.") else \
        "nvidia-dali-cuda130"


def _requires(dist: str, modules: tuple[str, ...], install: str, device=None,
              label: str | None = None) -> tuple[bool, str]:
    """``(True, detail)`` if a CUDA device is usable and ``modules`` load; else the reason."""
    ok, reason = status("cuda", device=device)
    if not ok:
        return False, reason
    ok, why = library_status(dist, *modules, install=install, label=label)
    return ok, f"{why}, {reason}" if ok else why


@functools.cache
def _nvjpeg(device: str):
    """``(library, decode)`` for nvJPEG on ``device``, or ``(None, why not)``: torchcodec's if
    it decodes a 16x16 JPEG there, else torchvision's."""
    try:
        import torch
        from PIL import Image
        from torchcodec.decoders import decode_jpeg

        buf = io.BytesIO()
        Image.new("RGB", (16, 16), (200, 30, 30)).save(buf, format="JPEG")
        decode = functools.partial(decode_jpeg, mode="RGB", device=device)
        out = decode([torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)])[0]
        if out.is_cuda:
            return "torchcodec", decode
        why_not = f"the decoded image came back on {out.device}"
    except Exception as e:  # noqa: BLE001 - an old or CPU torchcodec fails in many ways
        why_not = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
    ok, why = library_status("torchvision", "torchvision", "torchvision.io",
                             install=torchvision_install())
    if not ok:
        return None, f"torchcodec's decode_jpeg cannot ({why_not}); nor torchvision's: {why}"
    from torchvision.io import ImageReadMode, decode_jpeg

    return "torchvision", functools.partial(decode_jpeg, mode=ImageReadMode.RGB, device=device)


@check("gpu_decode")
def _gpu_decode_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if nvJPEG decode can run (torchcodec's, else torchvision's)."""
    ok, reason = status("cuda", device=device)
    if not ok:
        return False, reason
    library, how = _nvjpeg(str(device or "cuda"))
    if library is None:
        return False, how
    version = library_status(library, install="")[1]
    return True, f"nvJPEG through {library}'s decode_jpeg ({version}), {reason}"


@check("kornia_gpu")
def _kornia_gpu_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if kornia augmentation can run on a CUDA device."""
    return _requires("kornia", ("kornia",), "pip install kornia", device)


@check("dali")
def _dali_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if NVIDIA DALI and a CUDA device are both here."""
    return _requires(dali_distribution(), ("nvidia.dali",), DALI_INSTALL, device,
                     label="NVIDIA DALI")


def _decoder(device):
    """The decode function, with no package-metadata lookup (none inside the clock)."""
    ok, reason = status("cuda", device=device)
    library, how = _nvjpeg(str(device)) if ok else (None, reason)
    if library is None:
        raise LabkitError(f"GPU JPEG decode cannot run here: {how}")
    return how


def gpu_decode_rate(blobs: list[bytes], batch_size: int = 64, device="cuda",
                    repeats: int = 3) -> dict:
    """Images/s of batched nvJPEG decode over ``blobs`` (best of ``repeats``, synchronised);
    the clock holds the decode calls alone."""
    import torch

    decode = _decoder(device)
    batches = [[torch.frombuffer(bytearray(b), dtype=torch.uint8)
                for b in blobs[lo:lo + batch_size]] for lo in range(0, len(blobs), batch_size)]
    decode(batches[0])  # warm-up: CUDA context, nvJPEG handles

    def decode_all():
        for batch in batches:
            decode(batch)

    best = best_of(decode_all, repeats=repeats, warmup=0, sync=str(device)).best_s
    return {"images": len(blobs), "batch_size": batch_size, "seconds": best,
            "samples_per_s": len(blobs) / best}
