"""tests/startmethod/sitecustomize.py forces the start method in every process it reaches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).parent / "startmethod"
PROBE = ("import multiprocessing as mp, torch.multiprocessing as tmp\n"
         "print(mp.get_start_method(), tmp.get_start_method())")


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_folder_forces_the_default_start_method(method):
    env = {**os.environ, "LABKIT_START_METHOD": method, "PYTHONPATH": str(FOLDER)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == [method, method]


def test_nothing_changes_without_the_variable():
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_START_METHOD", "PYTHONPATH")}
    plain = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                           text=True, timeout=120, check=True).stdout
    env["PYTHONPATH"] = str(FOLDER)
    with_folder = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                                 text=True, timeout=120, check=True).stdout
    assert with_folder == plain


# a forkserver child: is torch imported before its target runs? (exec: picklable by name)
CHILD = ("import multiprocessing as mp\n"
         "p = mp.Process(target=exec, args=(\"import sys; print('torch' in sys.modules)\",))\n"
         "p.start(); p.join()")


@pytest.mark.parametrize("preload, imported", [("torch", "True"), ("", "False")])
def test_the_forkserver_pass_preloads_torch_only_when_asked(preload, imported):
    env = {**os.environ, "LABKIT_START_METHOD": "forkserver", "PYTHONPATH": str(FOLDER),
           "LABKIT_FORKSERVER_PRELOAD": preload}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == [imported]
