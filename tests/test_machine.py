"""labkit.records.machine: versions and hardware as a JSON-ready dict (chapter 00)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import stat
import subprocess
import sys

import pytest

from labkit.records import machine as envmod

ENV_KEYS = {"hostname", "python", "os", "cpu", "memory", "threadpools", "torch", "data",
            "gpu", "versions"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return envmod.environment(data_path=tmp_path_factory.mktemp("data") / "not" / "yet")


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def test_keys_present_and_json_serialisable(env):
    assert ENV_KEYS <= set(env)
    assert json.loads(json.dumps(env, allow_nan=False)) == env
    assert env["cpu"]["logical_cores"] >= 1
    assert env["memory"]["total_bytes"] >= env["memory"]["available_bytes"] > 0
    assert set(env["python"]) == {"version", "implementation"}


def test_versions_absent_are_none_present_match_metadata():
    got = envmod.versions(["numpy", "psutil", "no-such-package-labkit-test", "python"])
    assert got["numpy"] == importlib.metadata.version("numpy")
    assert got["psutil"] == importlib.metadata.version("psutil")
    assert got["no-such-package-labkit-test"] is None
    assert got["python"] == platform.python_version()


def test_default_versions_cover_the_kit():
    got = envmod.versions()
    assert list(got) == list(envmod.DEFAULT_NAMES)
    assert got["torch"] is not None and got["labkit"] is not None


def test_versions_imports_nothing_it_reports():
    # A fresh interpreter, so packages other tests imported cannot hide an import.
    code = (
        "import sys, labkit.records.machine as e; before = set(sys.modules); e.versions(); "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    heavy = {"torch", "numpy", "pyarrow", "datasets", "webdataset", "albumentations", "cv2",
             "PIL", "matplotlib", "ipywidgets", "jupyterlab", "nbval", "tqdm", "threadpoolctl"}
    assert not [m for m in out if m.split(".")[0] in heavy]


def test_data_path_reports_nearest_existing_parent(env, tmp_path):
    data = env["data"]
    assert data["path"].endswith(os.path.join("not", "yet"))
    assert os.path.isdir(data["existing"])
    assert data["free_bytes"] > 0 and data["total_bytes"] >= data["free_bytes"]
    assert data["mount_point"] and data["existing"].startswith(data["mount_point"])
    assert data["filesystem"]


def test_threadpools_reduced_to_four_keys(env):
    for pool in env["threadpools"]:
        assert set(pool) == {"user_api", "internal_api", "num_threads", "version"}


def test_no_gpu_reports_a_reason(env):
    if env["gpu"]["available"] or _has_cuda():
        pytest.skip("this machine has a GPU")
    assert env["gpu"]["available"] is False
    assert "torch" in env["gpu"]["reason"] or "nvidia-smi" in env["gpu"]["reason"]


def test_nvidia_smi_is_parsed(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 550.54.15, 81559, 9.0'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    devices, driver, _ = envmod._nvidia_smi()
    assert devices == [{"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 81559 * 2**20,
                        "capability": "9.0"}]
    assert driver == "550.54.15"
    if not _has_cuda():  # the card is seen but this torch cannot use it: said so
        gpu = envmod._gpu()
        assert gpu["available"] is True and "torch.cuda" in gpu["note"]


def test_format_environment_is_short_and_human(env):
    text = envmod.format_environment(env)
    assert 10 <= len(text.splitlines()) <= 15
    assert env["hostname"] in text and "free" in text
    if not env["gpu"]["available"]:
        assert "no GPU:" in text


def test_human_bytes():
    assert envmod.human_bytes(512) == "512 B"
    assert envmod.human_bytes(1536) == "1.5 KiB"
    assert envmod.human_bytes(None) == "?"


def test_old_nvidia_smi_without_compute_cap(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\ncase "$1" in *compute_cap*) exit 6;; esac\n'
                    "echo 'Tesla T4, 470.82.01, 15109'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    devices, driver, _ = envmod._nvidia_smi()
    assert devices == [{"name": "Tesla T4", "memory_bytes": 15109 * 2**20, "capability": None}]
    assert driver == "470.82.01"


def test_broken_nvidia_smi_gives_reason(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert envmod._nvidia_smi()[2] == "nvidia-smi failed: NVIDIA-SMI has failed"
