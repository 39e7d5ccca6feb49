"""The code a chapter types, for the tests: a ``%%writefile {WORK}/NAME.py`` cell, importable.

A chapter's subject (a reader, a stream, a packer) is typed in its cells, and what spawn
workers import is written to a module by a ``%%writefile`` cell (issue 46). The bad-input
and contract tests run on that very code: :func:`chapter_module` reads the cell out of the
committed notebook, writes it to a folder on ``sys.path`` and imports it, so a test pins
what the learner types, not a copy kept in labkit.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def cell_source(notebook: str, filename: str) -> str:
    """The body of notebook ``notebook``'s (a stem or a prefix: ``"05"``, ``"11c"``) cell that
    begins ``%%writefile {WORK}/<filename>``."""
    hits = sorted(p for p in [*NOTEBOOKS.glob("*.ipynb"), *NOTEBOOKS.glob("further/*.ipynb")]
                  if p.stem == notebook or p.stem.split("_", 1)[0] == notebook)
    if len(hits) != 1:
        raise LookupError(f"no single notebook {notebook!r} in {NOTEBOOKS}: {hits}")
    for cell in json.loads(hits[0].read_text())["cells"]:
        src = "".join(cell["source"])
        first, _, body = src.partition("\n")
        if cell["cell_type"] == "code" and re.fullmatch(
                rf"%%writefile\s+\S*/{re.escape(filename)}\s*", first):
            return body
    raise LookupError(f"{hits[0].name}: no cell '%%writefile {{WORK}}/{filename}'")


def chapter_module(notebook: str, filename: str, folder: Path):
    """Import the module chapter ``notebook`` writes as ``filename`` (``"rowgroups.py"``),
    written into ``folder`` (a module-scoped ``tmp_path_factory.mktemp(...)``), which joins
    ``sys.path`` as the chapter's ``WORK`` does: spawn workers of a test import it too.

    ``rg = chapter_module("05", "rowgroups.py", tmp_path_factory.mktemp("ch05"))``
    """
    path = Path(folder) / filename
    path.write_text(cell_source(notebook, filename))
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    name = path.stem
    if name in sys.modules:
        return importlib.reload(sys.modules[name])
    return importlib.import_module(name)
