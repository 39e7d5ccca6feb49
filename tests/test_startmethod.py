"""tests/startmethod/sitecustomize.py forces the start method in every process it reaches."""

from __future__ import annotations

import multiprocessing
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


# notebooks/conftest.py: --start-methods collects each notebook once more per method
PROBE_CELL = ("import multiprocessing as mp, os, pathlib\n"
              "pathlib.Path(os.environ['PROBE_OUT'], '%s-%s' % (\n"
              "    os.environ.get('LABKIT_START_METHOD', 'default'),\n"
              "    mp.get_start_method())).touch()")
# a cell tagged same-under-every-start-method: the plain run only
ONCE_CELL = ("import os, pathlib\n"
             "pathlib.Path(os.environ['PROBE_OUT'], 'once-under-%s' % (\n"
             "    os.environ.get('LABKIT_START_METHOD', 'default'))).touch()")


def _run_probe(tmp_path, cells, start_methods: str):
    """``cells`` as a notebook, run by pytest with notebooks/conftest.py as a plugin, in a
    folder of its own, with ``--start-methods``; the probes write their files to ``out/``."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, tmp_path / "probe.ipynb")
    (tmp_path / "out").mkdir()
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    env = {**os.environ, "PROBE_OUT": str(tmp_path / "out"), "PYTHONPATH": str(notebooks),
           "LABKIT_RUNS": str(tmp_path / "runs")}
    for k in ("LABKIT_START_METHOD", "LABKIT_FORKSERVER_PRELOAD", "LABKIT_HIDE_LINUX"):
        env.pop(k, None)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(tmp_path),
         "-p", "conftest", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
         f"--start-methods={start_methods}", "-q", str(tmp_path / "probe.ipynb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    return r, sorted(p.name for p in (tmp_path / "out").iterdir())


def test_start_methods_collects_each_notebook_once_more_under_each_method(tmp_path):
    """Each copy runs its cells under its method, except a cell tagged
    same-under-every-start-method: the copies report it skipped, the plain run runs it."""
    import nbformat

    once = nbformat.v4.new_code_cell(ONCE_CELL)
    once.metadata["tags"] = ["same-under-every-start-method"]
    r, out = _run_probe(tmp_path, [nbformat.v4.new_code_cell(PROBE_CELL), once],
                        "spawn,forkserver")
    assert "4 passed, 2 skipped" in r.stdout
    default = multiprocessing.get_start_method()
    assert out == sorted(
        [f"default-{default}", "spawn-spawn", "forkserver-forkserver", "once-under-default"])


# the [macos] copy: spawn, with the Linux-only facilities hidden (labkit/facilities.py)
FACILITY_CELL = ("# NBVAL_CHECK_OUTPUT\n"
                 "import os\n"
                 "import labkit as lk\n"
                 "print(hasattr(os, 'posix_fadvise'), lk.status('pss')[0])")
HIDDEN_PROBE = ("import multiprocessing as mp, os, pathlib\n"
                "import labkit as lk\n"
                "pathlib.Path(os.environ['PROBE_OUT'], '%s-%s-%s' % (\n"
                "    os.environ.get('LABKIT_START_METHOD', 'default'), mp.get_start_method(),\n"
                "    'hidden' if lk.facilities.hidden() else 'linux')).touch()")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hides what Linux has")
def test_the_macos_copy_runs_spawn_without_linux_facilities(tmp_path):
    """The plain run compares the tagged checked cell ("True True"); the [macos] copy runs
    it under spawn with posix_fadvise and PSS gone (it prints "False False") uncompared."""
    import nbformat

    checked = nbformat.v4.new_code_cell(FACILITY_CELL, execution_count=1, outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="True True\n")])
    checked.metadata["tags"] = ["checked-on-linux"]
    r, out = _run_probe(tmp_path, [checked, nbformat.v4.new_code_cell(HIDDEN_PROBE)], "macos")
    assert "4 passed" in r.stdout
    default = multiprocessing.get_start_method()
    assert out == sorted([f"default-{default}-linux", "spawn-spawn-hidden"])
