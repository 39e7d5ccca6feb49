"""Which torchcodec goes with the torch this Python has, CPU or CUDA build (ch. 15; `make setup`).

Read off the wheels (2026-12, `nm -D`, `readelf -d`): every torchcodec from 0.13 calls torch
through its stable C ABI, so one wheel loads beside every torch from 2.11; 0.13.0 is PyPI's
newest CPU build; 0.14-0.17 are CUDA 13 builds, which fail to import beside a CPU torch.

`make setup` and `.ci/run` run this file (it imports nothing of labkit's) and install what it
prints before the kit; chapter 15's torchcodec check quotes the same choice.
"""

from __future__ import annotations

#: The newest torchcodec on PyPI built for a CPU torch (0.14 and newer are CUDA 13 builds).
CPU_TORCHCODEC = "0.13.0"


def torchcodec_requirement(cuda: str | None) -> tuple[str, str]:
    """``(pip requirement, why)`` for a torch built for CUDA ``cuda`` (``torch.version.cuda``;
    ``None`` for a CPU build)."""
    major = (cuda or "").split(".")[0]
    if major == "13":
        return ("torchcodec>=0.14",
                f"torch is a CUDA {cuda} build: PyPI's torchcodec from 0.14 is built for CUDA "
                "13 (NVDEC decode, and CPU decode too)")
    if cuda:
        return (f"torchcodec=={CPU_TORCHCODEC}",
                f"torch is a CUDA {cuda} build, and PyPI's CUDA torchcodec is for CUDA 13: "
                f"the CPU build {CPU_TORCHCODEC} decodes on the CPU; for NVDEC install "
                "torchcodec from the same PyTorch index as this torch")
    return (f"torchcodec=={CPU_TORCHCODEC}",
            f"torch is a CPU build: {CPU_TORCHCODEC} is the newest CPU torchcodec on PyPI "
            "(0.14 and newer are CUDA 13 builds, which fail to load beside a CPU torch)")


if __name__ == "__main__":
    import sys
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # before numpy is in
    import torch

    requirement, why = torchcodec_requirement(torch.version.cuda)
    print(f"torchcodec for torch {torch.__version__}: {requirement} ({why})", file=sys.stderr)
    print(requirement)
