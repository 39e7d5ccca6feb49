"""Whether torchvision's transforms.v2 loads beside this torch, and what to do if not (ch. 10, 16).

Chapter 10 types its augmentation pipelines (albumentations, plain torch, kornia) in its
cells; this module holds only the ``lk.status("torchvision")`` check its missing row reads.
"""

from __future__ import annotations

import torch

from ..optional import check, library_status


@check("torchvision")
def _torchvision_status() -> tuple[bool, str]:
    """``(True, version)`` if ``torchvision.transforms.v2`` imports here, else why not (beside
    a CPU torch, PyPI's torchvision does not: :func:`torchvision_install`)."""
    return library_status("torchvision", "torchvision", "torchvision.transforms.v2",
                          label="torchvision.transforms.v2", install=torchvision_install())


def torchvision_install() -> str:
    """What to do when torchvision does not load next to this torch (chapters 10, 16)."""
    build = "CPU" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    return (f"torch is {torch.__version__} ({build} build); PyPI's torchvision for it links "
            "libtorch_cuda.so and libc10_cuda.so, so next to a CPU torch its import fails "
            "('operator torchvision::nms does not exist'): install torchvision from the index "
            "your torch came from (e.g. https://download.pytorch.org/whl/cpu)")
