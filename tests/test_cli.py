"""The `labkit` command: help, bad arguments (exit 2, one clear line), run and report."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parent.parent


def labkit(*args, env=None, timeout=300):
    """``labkit ARGS`` run in this process: ``main()`` is the command, minus the interpreter.

    A subprocess per call re-imported torch each time (seconds apiece under load); the real
    entry point is still run as a subprocess once, by :func:`test_the_entry_point_runs`.
    """
    from labkit_tools import cli

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as e:  # argparse: --help (0), bad arguments (2)
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(["labkit", *args], code, out.getvalue(), err.getvalue())


def test_the_entry_point_runs():
    """``python -m labkit_tools.cli`` itself (the console script calls the same main())."""
    r = subprocess.run([sys.executable, "-m", "labkit_tools.cli", "bench", "--list"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0 and "meter-overhead" in r.stdout, r.stderr


def test_help_answers_before_torch_is_imported():
    """The console script is ``labkit_tools.cli:main``: its parser alone, no labkit
    (``import labkit`` imports torch: 3.6 s before ``labkit --help`` answered)."""
    code = ("import sys, labkit_tools.cli\n"
            "try:\n    labkit_tools.cli.main(['run', '--help'])\n"
            "except SystemExit as e:\n    assert e.code == 0\n"
            "print('torch imported:', 'torch' in sys.modules, 'labkit' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--scale" in r.stdout and r.stdout.strip().endswith("torch imported: False False")


def test_the_parser_offers_the_kits_scales():
    from labkit.scale import SCALES
    from labkit_tools import cli

    assert cli.SCALES == tuple(SCALES)


@pytest.mark.parametrize("cmd", ["fixtures", "env", "run", "report", "bench", "roofline",
                                 "diagnose", "doctor", "lab"])
def test_every_subcommand_has_help(cmd):
    r = labkit(cmd, "--help")
    assert r.returncode == 0 and "usage: labkit" in r.stdout


@pytest.mark.parametrize("args, says", [
    ([], "required"),
    (["nope"], "invalid choice"),
    (["fixtures", "--scale", "huge"], "invalid choice: 'huge'"),
    (["run", "99"], "no chapter notebook '99'"),
    (["bench", "nope"], "no benchmark named 'nope'"),
    (["report", "/nonexistent/records"], "/nonexistent/records"),
    (["report", "/nonexistent/records", "--out", "r.txt"], "cannot tell the report format"),
    (["report", "/nonexistent/records", "--baseline", "x", "--format", "pdf"], "invalid choice"),
    (["fixtures", "no_such_fixture", "--scale", "ci"], "no fixture named 'no_such_fixture'"),
])
def test_bad_arguments_exit_2_with_a_clear_message(args, says):
    r = labkit(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert says in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_scale_from_the_environment():
    r = labkit("fixtures", "array", env={"LABKIT_SCALE": "huge"})
    assert r.returncode == 2
    assert "LABKIT_SCALE='huge' is not a scale" in r.stderr


def test_env_json_is_a_record_of_this_machine():
    r = labkit("env", "--json")
    assert r.returncode == 0
    env = json.loads(r.stdout)
    assert {"cpu", "memory", "gpu", "versions", "data"} <= set(env)


def test_bench_list_names_meter_overhead():
    r = labkit("bench", "--list")
    assert r.returncode == 0 and "meter-overhead" in r.stdout


def test_corrupted_fixture_says_how_to_repair(tmp_path):
    env = {"LABKIT_DATA": str(tmp_path)}
    assert labkit("fixtures", "array", "--scale", "ci", "--no-progress", env=env).returncode == 0
    target = tmp_path / "ci" / "array" / "array.npy"
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    r = labkit("fixtures", "array", "--scale", "ci", env=env)
    assert r.returncode == 2
    assert "array.npy" in r.stderr and "--repair" in r.stderr
    r = labkit("fixtures", "array", "--scale", "ci", "--repair", "--no-progress", env=env)
    assert r.returncode == 0 and "repaired" in r.stdout


def test_run_into_an_unwritable_folder(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    r = labkit("run", "00", "--scale", "ci", "--out", str(blocker / "run"))
    assert r.returncode == 2
    assert "cannot create the run folder" in r.stderr and "--out" in r.stderr


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """`labkit run --scale ci` over one chapter, once for this module.

    One, not all: nbval already executes every chapter in this suite, and each chapter run
    here would be a second one (minutes at 17 chapters). That no names means every chapter
    is pinned by ``test_run_without_names_means_every_chapter``.
    """
    out = tmp_path_factory.mktemp("run")
    r = labkit("run", *RUN_CHAPTERS, "--scale", "ci", "--out", str(out), timeout=600)
    return r, out


RUN_CHAPTERS = ["05"]  # one of the quickest chapters that records figures and plots


def test_run_without_names_means_every_chapter():
    from labkit_tools.runner import resolve_notebooks

    nbs = REPO / "notebooks"
    every = sorted([*nbs.glob("[0-9][0-9]_*.ipynb"), *nbs.glob("further/*.ipynb")],
                   key=lambda p: p.stem)   # 03_..., then 03b_... (its "Going further")
    assert [p.resolve() for p in resolve_notebooks(None)] == [p.resolve() for p in every]
    assert len(every) >= 2


def test_run_writes_one_record_per_chapter(ci_run):
    r, out = ci_run
    assert r.returncode == 0, r.stdout + r.stderr
    chapters = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")
                      if p.stem[:2] in RUN_CHAPTERS)
    executed = sorted(p.stem for p in (out / "notebooks").glob("*.ipynb"))
    assert executed == chapters
    records = [json.loads(p.read_text()) for p in (out / "records").glob("*.json")]
    assert sorted(rec["chapter"] for rec in records) == chapters
    assert all(rec["scale"] == "ci" for rec in records)


def test_run_leaves_each_chapter_rendered_as_html(ci_run):
    """A finished run can be read without Jupyter: one HTML file per chapter, plots inside,
    while the committed notebooks keep outputs only on their checked cells."""
    r, out = ci_run
    assert "rendered notebooks (HTML, plots inside)" in r.stdout
    pages = sorted((out / "notebooks").glob("*.html"))
    assert [p.stem for p in pages] == sorted(p.stem for p in (out / "notebooks").glob("*.ipynb"))
    for page in pages:
        text = page.read_text()
        # the outputs, not just the code: the checkpoint cell's printout is in the page
        assert f"checkpoint {page.stem} (scale ci)" in text, page.name
    chapter05 = next(p for p in pages if p.stem.startswith("05"))
    assert 'src="data:image/png;base64,' in chapter05.read_text()  # its plots, embedded


def test_report_compares_two_record_folders(ci_run, tmp_path):
    _, out = ci_run
    other = tmp_path / "other"
    other.mkdir()
    for p in (out / "records").glob("*.json"):  # a second "machine": same records, renamed host
        rec = json.loads(p.read_text())
        rec["environment"]["hostname"] = "other-machine"
        (other / p.name).write_text(json.dumps(rec))
    md = tmp_path / "report.md"
    r = labkit("report", str(out / "records"), str(other), "--out", str(md))
    assert r.returncode == 0, r.stderr
    assert "other-machine" in r.stdout
    text = md.read_text()
    assert "other-machine" in text and "samples_per_s" in text
    assert md.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_report_html_from_two_record_folders(ci_run, tmp_path):
    """The issue's "done when": one HTML file from two record folders (two machines)."""
    _, out = ci_run
    other = tmp_path / "other"
    other.mkdir()
    for p in (out / "records").glob("*.json"):
        rec = json.loads(p.read_text())
        rec["environment"]["hostname"] = "other-machine"
        (other / p.name).write_text(json.dumps(rec))
    page = tmp_path / "report.html"
    r = labkit("report", str(out / "records"), str(other), "--out", str(page),
               "--baseline", "other-machine")
    assert r.returncode == 0, r.stderr
    assert "one file, plots inside" in r.stdout and not page.with_suffix(".png").exists()
    text = page.read_text()
    assert "other-machine" in text and "samples_per_s" in text and "÷ run" in text
    # a plot per chapter; 05 places nothing under the roofline (issue 45), so no roofline
    # figure: tests/test_roofline.py renders one from placements
    assert text.count('src="data:image/png;base64,') == len(RUN_CHAPTERS)
    assert 'alt="roofline per machine"' not in text
    assert "<script" not in text and 'src="http' not in text and 'href="http' not in text


def test_run_of_an_unknown_notebook_lists_the_chapters():
    r = labkit("run", "02_nothing")
    assert r.returncode == 2
    assert "00_start_here" in r.stderr and "01_measuring_a_loader" in r.stderr


def test_lab_starts_this_interpreters_jupyterlab_with_fixtures_ready(monkeypatch, capsys):
    """`make lab` runs .venv/bin/labkit without activating the venv: no PATH lookups."""
    from labkit_tools import cli, commands

    calls = []
    monkeypatch.setattr(commands.os, "execv", lambda exe, argv: calls.append((exe, argv)))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("LABKIT_SCALE", "workshop")  # restored after the test
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    assert cli.main(["lab", "--scale", "ci", "--", "--no-browser"]) == 0
    exe, argv = calls[0]
    assert exe == sys.executable and argv[1:3] == ["-m", "jupyterlab"]
    assert argv[3].endswith("notebooks") and argv[4] == "--no-browser"
    assert ("--allow-root" in argv) == (os.geteuid() == 0)
    assert os.environ["LABKIT_SCALE"] == "ci"
    assert "array" in capsys.readouterr().out  # the fixture table: data ready before Lab
    # no "notified about official Jupyter news?" prompt: Lab reads these defaults from
    # <JUPYTER_CONFIG_PATH>/labconfig (checked against a running Lab 4.6's settings API)
    overrides = Path(os.environ["JUPYTER_CONFIG_PATH"], "labconfig",
                     "default_setting_overrides.json")
    news = json.loads(overrides.read_text())["@jupyterlab/apputils-extension:notification"]
    assert news == {"fetchNews": "false", "checkForUpdates": False}


def test_bench_without_a_name_lists_them_and_says_what_to_do():
    r = labkit("bench")
    assert r.returncode == 2
    assert "meter-overhead" in r.stdout and "name a benchmark" in r.stderr


def test_bench_mmap_json_prints_the_ratio():
    import json

    r = labkit("bench", "mmap", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"ratio", "goal_met", "plain_read_gb_per_s", "mmap_read_gb_per_s"} <= set(out)


def test_bench_mmap_runs_tiny():
    from labkit_tools.bench import run_benchmark

    out = run_benchmark("mmap", mib=2, batch_kib=64, pairs=3)
    assert out["ratio"] > 0 and isinstance(out["goal_met"], bool)


def test_run_talks_to_its_kernels_over_ipc_and_leaves_no_socket(tmp_path, capfd):
    """``labkit run``'s kernels: no "running over TCP without encryption" warning per
    chapter, and their Unix sockets (absolute paths in Jupyter's runtime folder) removed."""
    import nbformat
    from jupyter_core.paths import jupyter_runtime_dir

    from labkit_tools.runner import run_notebooks

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, tmp_path / "tiny.ipynb")
    runtime = Path(jupyter_runtime_dir())
    before = set(runtime.glob("labkit-*"))
    [r] = run_notebooks([str(tmp_path / "tiny.ipynb")], "ci", tmp_path / "out", 120,
                        echo=lambda *a: None)
    assert r.ok, r.error
    assert "without encryption" not in capfd.readouterr().err
    # none of this run's left (another labkit run's may come and go meanwhile)
    assert set(runtime.glob("labkit-*")) - before == set()


def test_run_on_a_machine_where_jupyter_never_ran(monkeypatch):
    """A fresh machine has no Jupyter runtime folder: ``labkit run`` makes it (the kernel
    died binding its first socket there, ZMQError: No such file or directory)."""
    import tempfile

    import nbformat

    from labkit_tools.runner import run_notebooks

    with tempfile.TemporaryDirectory(prefix="lk-rt-") as tmp:   # short: a socket path < 104
        runtime = Path(tmp) / "never" / "runtime"
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nbformat.write(nb, Path(tmp) / "tiny.ipynb")
        [r] = run_notebooks([str(Path(tmp) / "tiny.ipynb")], "ci", Path(tmp) / "out", 120,
                            echo=lambda *a: None)
        assert r.ok, r.error
        assert runtime.is_dir() and not list(runtime.glob("labkit-*"))


def test_run_names_the_cell_its_limit_and_the_flag_when_a_cell_runs_too_long(tmp_path):
    """``labkit run``'s guard catches a hang, not a slow machine: its default follows the
    scale (the ``cell_timeout_s`` knob), ``--cell-timeout`` raises it, and a cell that runs
    past it fails its chapter with a line naming the cell, the limit and the flag."""
    import nbformat

    from labkit.scale import knob
    from labkit_tools.runner import run_notebooks

    assert knob("cell_timeout_s", "ci") < knob("cell_timeout_s", "workshop")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("import time\ntime.sleep(60)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, tmp_path / "slow.ipynb")
    [r] = run_notebooks([str(tmp_path / "slow.ipynb")], "ci", tmp_path / "out", 3,
                        echo=lambda *a: None)
    assert not r.ok
    assert "cell 1 ran past its 3 s limit" in r.error and "--cell-timeout" in r.error, r.error
    assert labkit("run", "--help").stdout.count("--cell-timeout") >= 1
