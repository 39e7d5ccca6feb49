"""Installing the kit beside a torch keeps that torch, and torchcodec fits the torch build
(issue 44; `make setup`, `make lab SYSTEM_TORCH=1`, `.ci/setup-latest`)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
import torch
from packaging.requirements import Requirement

import labkit as lk
from labkit.media.pairing import CPU_TORCHCODEC, torchcodec_requirement


@pytest.mark.parametrize(("cuda", "wanted"), [
    (None, f"torchcodec=={CPU_TORCHCODEC}"),     # 2.13.0+cpu, PyTorch's CPU index
    ("13.0", "torchcodec>=0.14"),                # PyPI's 2.11.0+cu130, 2.14.1+cu130
    ("13.2", "torchcodec>=0.14"),                # PyPI's 2.15.0+cu132
    ("12.8", f"torchcodec=={CPU_TORCHCODEC}"),   # a cu128 index build: PyPI has no CUDA 12 one
])
def test_torchcodec_follows_the_torch_build(cuda, wanted):
    requirement, why = torchcodec_requirement(cuda)
    assert requirement == wanted and why


def test_the_installed_torchcodec_is_the_one_paired_with_this_torch():
    requirement = Requirement(torchcodec_requirement(torch.version.cuda)[0])
    installed = importlib.metadata.version("torchcodec")
    assert requirement.specifier.contains(installed.split("+")[0]), (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) wants {requirement}; "
        f"torchcodec {installed} is installed")
    assert lk.status("torchcodec")[0] or os.environ.get("CI") != "true", lk.status("torchcodec")


def test_pairing_runs_before_the_kit_is_installed():
    """`make setup` runs the file with the venv's Python before labkit's dependencies are in:
    it imports torch and nothing of labkit's (``import labkit`` fails here), and prints one
    requirement on stdout."""
    path = lk.paths.REPO_ROOT / "labkit" / "media" / "pairing.py"
    code = ("import runpy, sys; sys.modules['labkit'] = None; "
            f"runpy.run_path({str(path)!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == torchcodec_requirement(torch.version.cuda)[0]


@pytest.mark.slow
def test_installing_the_kit_beside_this_torch_keeps_it(tmp_path):
    """pip's dry run of `pip install -e ".[dev]"`, what `make setup` and `make lab
    SYSTEM_TORCH=1` run, into this environment: neither torch nor torchcodec is in what it
    would install. The machine's pip cap on torch (PIP_CONSTRAINT) is cleared: a learner's pip
    has none, and with it pip would move a newer torch back under the cap."""
    report = tmp_path / "report.json"
    env = {**os.environ, "PIP_CONSTRAINT": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                    "--report", str(report), "-e", f"{lk.paths.REPO_ROOT}[dev]"],
                   env=env, capture_output=True, text=True, timeout=600, check=True)
    would = {i["metadata"]["name"].lower(): i["metadata"]["version"]
             for i in json.loads(report.read_text())["install"]}
    assert "torch" not in would and "torchcodec" not in would, (
        f"installing the kit beside torch {torch.__version__} would install {would}")


def test_a_torchcodec_that_does_not_load_and_does_not_fit_says_which_fits(monkeypatch):
    """PyPI's torchcodec 0.17 (a CUDA 13 build) beside a CPU torch fails at import with an
    OSError about its own library: the reason names the release that fits, not FFmpeg."""
    from labkit.media import backends

    wrong = "torchcodec==0.0.1"  # a release the pairing never picks, for whichever torch
    monkeypatch.setattr(backends, "library_version", lambda dist: "0.0.1")
    monkeypatch.setattr(backends, "library_status", lambda dist, *mods, **kw: (
        (True, "found") if kw.get("load") is False else (False, "OSError: libtorch_cuda.so")))
    ok, reason = backends._torchcodec_status.__wrapped__()
    wanted = torchcodec_requirement(torch.version.cuda)[0]
    assert not ok and f"pip install '{wanted}'" in reason and "OSError" in reason, reason
    assert wrong not in reason
