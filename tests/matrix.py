"""The tested matrix, written from what a test session ran (issue 44): torch x Python x OS x
start method, with each cell's counts.

tests/conftest.py takes these hooks. The session's header names the torch, its CUDA build,
torchcodec, Python and the default start method, so every log says what it ran on. With
``LABKIT_EXPECT_TORCH`` set (``make test-latest``) the session refuses to start on another
torch: a leg that silently fell back to the machine's torch fails. With ``LABKIT_MATRIX``
set to a file, the controller writes there, at the end, one JSON record of the session:
the versions and, per start method, the chapters and tests that passed, failed and skipped.
``python tests/matrix.py RECORD...`` prints the records as the table docs/tested-matrix.md
holds (``.ci/run`` prints it at the end of its log).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import sys
from collections import Counter
from pathlib import Path

_COUNTS: dict[str, Counter] = {}
_CHAPTERS: dict[str, set[str]] = {}
# A ``--start-methods`` entry as the table names it.
METHOD_NAMES = {"macos": "spawn (as on macOS)"}


def versions() -> dict:
    import torch

    try:
        import torchcodec
        codec = torchcodec.__version__
    except Exception as e:  # noqa: BLE001 - a wheel for another torch fails in many ways
        codec = f"not loadable ({type(e).__name__})"
    return {"torch": torch.__version__, "cuda": torch.version.cuda or "cpu",
            "torchcodec": codec, "python": platform.python_version(),
            "os": f"{platform.system()} {platform.machine()}",
            "start_method": multiprocessing.get_start_method()}


def header() -> str:
    v = versions()
    return (f"labkit: torch {v['torch']} (CUDA: {v['cuda']}), torchcodec {v['torchcodec']}, "
            f"Python {v['python']}, {v['os']}, default start method {v['start_method']}")


def check_expected_torch() -> None:
    """Stop the session before it starts if it runs on another torch than the one asked for."""
    import pytest
    import torch

    want = os.environ.get("LABKIT_EXPECT_TORCH")
    if want and torch.__version__.split("+")[0] != want:
        raise pytest.UsageError(f"LABKIT_EXPECT_TORCH={want}, but these tests import torch "
                                f"{torch.__version__} from {torch.__file__}")


def count(report) -> None:
    """One report into its cell: a chapter's start method from its node id (``[spawn]``)."""
    if report.when != "call" and not (report.failed or report.skipped):
        return
    path, _, rest = report.nodeid.partition("::")
    method = multiprocessing.get_start_method()
    if path.endswith("]"):
        path, _, method = path[:-1].partition("[")
    kind = "chapters" if path.startswith("notebooks/") else "unit tests"
    key = f"{kind}|{METHOD_NAMES.get(method, method)}"
    _COUNTS.setdefault(key, Counter())[report.outcome] += 1
    if kind == "chapters":
        _CHAPTERS.setdefault(key, set()).add(Path(path).stem)


def write(exitstatus: int) -> None:
    out = os.environ.get("LABKIT_MATRIX")
    if not out:
        return
    cells = [{"kind": key.split("|")[0], "start_method": key.split("|")[1],
              "chapters": sorted(_CHAPTERS.get(key, ())), **dict(c)}
             for key, c in sorted(_COUNTS.items())]
    record = {"leg": os.environ.get("LABKIT_MATRIX_LEG", ""), **versions(),
              "exit_status": int(exitstatus), "cells": cells}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(record, indent=1))


def table(records: list[dict]) -> str:
    rows = ["| leg | torch | CUDA build | torchcodec | Python | OS | start method | what ran "
            "| passed | failed | skipped |", "|" + "---|" * 11]
    for r in records:
        for c in r["cells"]:
            ran = "unit tests"
            if c["kind"] == "chapters":  # a few by name (chapter 15), many by count
                # "15_video_and_audio" -> 15; "15b_spdl_..." -> 15b (a Going-further notebook:
                # labkit.paths.notebook_path's rule; this file runs on the system Python,
                # without labkit, at the end of .ci/run)
                names = [stem.split("_")[0] for stem in c["chapters"]]
                further = sum(not n.isdigit() for n in names)
                ran = (f"{len(names) - further} chapters"
                       + (f" + {further} going further" if further else "")
                       if len(names) > 3 else
                       ("chapter " if len(names) == 1 else "chapters ") + ", ".join(names))
            rows.append(f"| {r['leg']} | {r['torch']} | {r['cuda']} | {r['torchcodec']} | "
                        f"{r['python']} | {r['os']} | {c['start_method']} | {ran} | "
                        f"{c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table([json.loads(Path(p).read_text()) for p in sys.argv[1:]]))
