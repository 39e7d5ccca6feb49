"""GPU decode and augmentation paths: nvJPEG via torchvision, kornia on CUDA, DALI (ch. 10, 15).

Every path here is guarded: ``lk.status("gpu_decode")``, ``lk.status("kornia_gpu")`` and
``lk.status("dali")`` say whether it can run and, if not, why (no CUDA, a CPU-only torch, a
torchvision that does not load against this torch, DALI not installed). Nothing here
imports torchvision or DALI at module import: a torchvision wheel built for another torch
can fail with any exception, not only ImportError, so every probe catches everything and
reports it.
"""

from __future__ import annotations

from ..errors import LabkitError
from ..instruments.timer import best_of
from ..optional import check, library_status, status
from .augment import torchvision_install

#: NVIDIA DALI is CUDA-only (the ``gpu`` extra), one wheel per CUDA major version.
DALI_INSTALL = ("pip install nvidia-dali-cuda120 (or -cuda130 for CUDA 13; see "
                "https://docs.nvidia.com/deeplearning/dali)")


def _requires(dist: str, modules: tuple[str, ...], install: str, device=None,
              label: str | None = None) -> tuple[bool, str]:
    """``(True, detail)`` if a CUDA device is usable and ``modules`` load; else the reason
    (:func:`~labkit.optional.library_status`: a wheel built for another torch fails with any
    exception, and the reason says so)."""
    ok, reason = status("cuda", device=device)
    if not ok:
        return False, reason
    ok, why = library_status(dist, *modules, install=install, label=label)
    return ok, f"{why}, {reason}" if ok else why


@check("gpu_decode")
def _gpu_decode_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if nvJPEG decode via ``torchvision.io.decode_jpeg`` can run."""
    return _requires("torchvision", ("torchvision", "torchvision.io"), torchvision_install(),
                     device)


@check("kornia_gpu")
def _kornia_gpu_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if kornia augmentation can run on a CUDA device."""
    return _requires("kornia", ("kornia",), "pip install kornia", device)


@check("dali")
def _dali_status(device=None) -> tuple[bool, str]:
    """``(True, detail)`` if NVIDIA DALI and a CUDA device are both here."""
    return _requires("nvidia-dali-cuda120", ("nvidia.dali",), DALI_INSTALL, device,
                     label="NVIDIA DALI")


def nvjpeg_decode(blobs: list[bytes], device="cuda"):
    """Decode a list of JPEG byte strings on the GPU in one batched call (nvJPEG).

    Returns a list of uint8 CHW CUDA tensors. Raises :class:`~labkit.LabkitError` with the
    reason when the path cannot run here.
    """
    ok, reason = _gpu_decode_status(device)
    if not ok:
        raise LabkitError(f"GPU JPEG decode cannot run here: {reason}")
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
    return decode_jpeg(data, mode=ImageReadMode.RGB, device=device)


def gpu_decode_rate(blobs: list[bytes], batch_size: int = 64, device="cuda",
                    repeats: int = 3) -> dict:
    """Images/s of batched nvJPEG decode over ``blobs`` (best of ``repeats``, synchronised)."""
    nvjpeg_decode(blobs[:batch_size], device)  # warm-up: CUDA context, nvJPEG handles

    def decode_all():
        for lo in range(0, len(blobs), batch_size):
            nvjpeg_decode(blobs[lo:lo + batch_size], device)

    best = best_of(decode_all, repeats=repeats, warmup=0, sync=str(device)).best_s
    return {"images": len(blobs), "batch_size": batch_size, "seconds": best,
            "samples_per_s": len(blobs) / best}


def dali_decode_rate(files: list, batch_size: int = 64, repeats: int = 3) -> dict:
    """Images/s of a DALI pipeline (file reader + mixed CPU/GPU decoder) over ``files``."""
    ok, reason = _dali_status()
    if not ok:
        raise LabkitError(f"DALI decode cannot run here: {reason}")
    from nvidia.dali import fn, pipeline_def

    files = [str(f) for f in files]

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0)
    def pipe():
        jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))),
                                        name="reader")
        return fn.decoders.image(jpegs, device="mixed"), labels

    p = pipe()
    p.build()
    steps = -(-len(files) // batch_size)
    # the first run (warm-up) builds the decoder's state; the mixed decoder's output is on
    # the GPU, so the clock waits for the device
    best = best_of(lambda: [p.run() for _ in range(steps)], repeats=repeats,
                   sync="cuda").best_s
    n = steps * batch_size
    return {"images": n, "batch_size": batch_size, "seconds": best, "samples_per_s": n / best}
