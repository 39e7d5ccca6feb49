"""Which torchcodec goes with the torch this Python has, CPU or CUDA build (ch. 15; `make setup`).

Read off the wheels themselves (2026-12, `nm -D` and `readelf -d` of each release's
libraries against torch 2.11.0, 2.13.0+cpu, 2.14.1 and 2.15.0):

- every torchcodec from 0.13 calls torch through its stable C ABI (``aoti_torch_*``), not
  C++ symbols, so one wheel loads beside every torch from 2.11 on;
- 0.13.0 is the newest CPU build on PyPI: it links libtorch_cpu only;
- 0.14.0-0.17.0 on PyPI are CUDA 13.0 builds (``+cu130``): they link libtorch_cuda,
  libcudart.so.13 and libnvrtc.so.13 and call ``aoti_torch_get_current_cuda_stream``, which a
  CPU torch lacks, so beside a CPU torch they fail at import; beside PyPI's CUDA 13 torch
  (2.11.0+cu130, 2.14.1+cu130, 2.15.0+cu132) they load, on a machine with or without a GPU.

`make setup` and `.ci/run` run this file with the virtual environment's Python (it imports
nothing of labkit's, so it runs before labkit's dependencies are installed) and install what
it prints before the kit, so pip's resolver keeps it. Chapter 15's torchcodec check quotes
the same choice when the installed one is the wrong build.
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
