"""``labkit run``: every chapter executed headless, notebooks and records kept (chapter 00).

Each notebook's record lands in the run's folder (``labkit report`` compares folders), and
it is rendered as one HTML file, plots inside, so a workshop can share what a machine showed.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

from labkit import paths
from labkit.errors import LabkitError
from labkit.scale import knob, resolve_scale


@dataclass
class NotebookRun:
    name: str
    ok: bool
    seconds: float
    output: Path
    error: str | None = None
    html: Path | None = None
    load: float | None = None   # the 1-minute load average when it ended (busy: slower)


def chapters(folder: Path | None = None) -> list[Path]:
    """The chapter notebooks, in order (``NN_topic.ipynb``), then the "Going further" ones
    (``further/NNb_topic.ipynb``: depth a workshop skips, after the chapter it extends)."""
    folder = folder or paths.notebooks_dir()
    return sorted([*folder.glob("[0-9][0-9]_*.ipynb"),
                   *(folder / "further").glob("[0-9][0-9][a-z]_*.ipynb")], key=lambda p: p.stem)


def resolve_notebooks(names: list[str] | None) -> list[Path]:
    """Map ``01``, ``01_measuring_a_loader``, a file name or a path to chapter notebooks."""
    available = chapters()
    if not names:
        return available
    out = []
    for name in names:
        p = Path(name)
        if p.suffix == ".ipynb" and p.exists():
            out.append(p.resolve())
            continue
        stem = p.stem if p.suffix == ".ipynb" else name
        hits = [c for c in available if c.stem == stem or c.stem.split("_", 1)[0] == stem]
        if len(hits) != 1:
            listing = ", ".join(c.stem for c in available) or "(none found)"
            raise LabkitError(f"no chapter notebook {name!r}; available: {listing}")
        out.append(hits[0])
    return out


def run_notebooks(names: list[str] | None = None, scale: str | None = None,
                  out: str | Path | None = None, timeout: int | None = None,
                  echo=print) -> list[NotebookRun]:
    """Execute chapters in fresh kernels, a failing one not stopping the others: notebooks
    (HTML, kernel stderr) to ``out/notebooks``, records to ``out/records``. ``timeout``:
    seconds a cell may run (default: the scale's ``cell_timeout_s``), a guard against a hang."""
    import nbformat
    from jupyter_core.paths import jupyter_runtime_dir
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    scale = resolve_scale(scale)
    timeout = int(timeout or knob("cell_timeout_s", scale))
    notebooks = resolve_notebooks(names)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(out) if out else paths.runs_dir() / f"{stamp}-{socket.gethostname()}-{scale}"
    try:
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabkitError(f"cannot create the run folder {out}: {e.strerror or e}; "
                          "pass --out with a writable folder") from None
    records = out / "records"
    results = []
    echo(f"running {len(notebooks)} chapter(s) at scale {scale!r} into {out}")
    with mock.patch.dict(os.environ, LABKIT_SCALE=scale, LABKIT_RECORDS=str(records.resolve())):
        for nb_path in notebooks:
            nb = nbformat.read(nb_path, as_version=4)
            # IPC, not TCP (no "Kernel is running over TCP without encryption"): an absolute
            # path (a relative one misses the kernel started in the chapter's folder), in a
            # runtime folder made first (a fresh machine has none: ZMQError: No such file)
            runtime = Path(jupyter_runtime_dir())
            runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
            ipc = Config(KernelManager=dict(
                transport="ipc", ip=str(runtime / f"labkit-{uuid.uuid4().hex[:12]}")))
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    config=ipc if os.name == "posix" else Config(),
                                    resources={"metadata": {"path": str(nb_path.parent)}})
            current = {}   # the cell running now, for a failure line that names it
            client.on_cell_start = lambda cell, cell_index, c=current: c.update(i=cell_index)
            target = out / "notebooks" / nb_path.name
            log = target.with_suffix(".kernel.log")
            t0 = time.perf_counter()
            error = None
            # to a file: a kernel stopped after a timeout printed a ZMQ traceback
            with open(log, "w") as kernel_err:
                try:
                    client.execute(stderr=kernel_err)
                except CellTimeoutError:
                    error = (f"cell {current.get('i', '?')} ran past its {timeout} s limit "
                             f"(scale {scale!r}); a slow or busy machine: raise it with "
                             f"labkit run --cell-timeout SECONDS")
                except (CellExecutionError, DeadKernelError) as e:
                    error = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
                    error = f"cell {current.get('i', '?')}: {error}"
            if log.stat().st_size == 0:
                log.unlink()
            elif error:
                error += f" (the kernel's stderr: {log})"
            seconds = time.perf_counter() - t0
            nbformat.write(nb, target)
            html, html_error = target.with_suffix(".html"), None
            try:  # the whole chapter as this machine ran it, plots embedded
                body, _ = HTMLExporter(embed_images=True).from_notebook_node(nb)
                html.write_text(body, encoding="utf-8")
            except Exception as e:  # noqa: BLE001 - a rendering problem keeps the .ipynb
                html, html_error = None, f"{type(e).__name__}: {e}"
            load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
            results.append(NotebookRun(nb_path.stem, error is None, seconds, target, error,
                                       html, load))
            status = "ok" if error is None else f"FAILED: {error}"
            if html_error:
                status += f" (no HTML: nbconvert failed: {html_error})"
            echo(f"  {nb_path.stem:<32} {seconds:7.1f} s  {status}")
            # each notebook's wall time, for the course's minutes (CONTRIBUTING), written
            # after each notebook: a run stopped midway keeps what it ran
            (out / "run.json").write_text(json.dumps({
                "scale": scale, "host": socket.gethostname(), "cpus": os.cpu_count(),
                "platform": platform.platform(), "python": platform.python_version(),
                "notebooks": {r.name: {"ok": r.ok, "seconds": round(r.seconds, 1),
                                       "load_1min": r.load} for r in results},
            }, indent=1) + "\n", encoding="utf-8")
    n_rec = len(list(records.glob("*.json"))) if records.exists() else 0
    echo(f"{sum(r.ok for r in results)}/{len(results)} chapters ok; {n_rec} record(s) in "
         f"{records}\nrendered notebooks (HTML, plots inside): {out / 'notebooks'}"
         f"\ncompare runs with: labkit report {records}")
    return results
