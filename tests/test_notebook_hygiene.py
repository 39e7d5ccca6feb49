"""Notebooks stay reviewable: outputs only on checked cells, the same anatomy everywhere.

``python tests/test_notebook_hygiene.py --fix`` strips what the checks below reject
(outputs and execution counts of unchecked cells) in place.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK = "# NBVAL_CHECK_OUTPUT"


def checked(cell) -> bool:
    return cell.cell_type == "code" and CHECK in cell.source


def strip(nb) -> bool:
    """Remove outputs/execution counts from unchecked cells; True if anything changed."""
    changed = nb.metadata.pop("widgets", None) is not None  # saved widget state: noise
    for cell in nb.cells:
        for key in ("execution", "collapsed", "scrolled"):  # run timestamps: diff noise
            if cell.metadata.pop(key, None) is not None:
                changed = True
        if cell.cell_type != "code" or checked(cell):
            continue
        if cell.outputs or cell.execution_count is not None:
            cell.outputs, cell.execution_count = [], None
            changed = True
    return changed


def test_there_are_chapters():
    assert [p.name[:2] for p in NOTEBOOKS][:2] == ["00", "01"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_outputs_only_on_checked_cells(path):
    nb = nbformat.read(path, as_version=4)
    offenders = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                 and not checked(c) and (c.outputs or c.execution_count is not None)]
    assert not offenders, (f"{path.name}: cells {offenders} carry outputs but are not checked; "
                           "run: python tests/test_notebook_hygiene.py --fix")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_saved_widget_state_or_run_timestamps(path):
    nb = nbformat.read(path, as_version=4)
    assert "widgets" not in nb.metadata, f"{path.name}: run the --fix to drop widget state"
    stamped = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not stamped, f"{path.name}: cells {stamped} carry run timestamps; run the --fix"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_checked_cells_have_expected_output(path):
    nb = nbformat.read(path, as_version=4)
    empty = [i for i, c in enumerate(nb.cells) if checked(c) and not c.outputs]
    assert not empty, f"{path.name}: checked cells {empty} have no expected output committed"
    for c in nb.cells:  # a timing in a checked cell would make the suite flaky
        if checked(c):
            text = "".join(o.get("text", "") for o in c.outputs)
            assert not re.search(r"samples/s|MB/s|\bms\b", text), (path.name, text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_anatomy(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), \
        f"{path.name}: starts with a title"
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{path.name}: exactly one cell tagged 'parameters'"
    assert "lk.resolve_scale()" in params[0].source, f"{path.name}: scale from LABKIT_SCALE"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    heads = [h for h in ("## Summary", "## Exercises", "## Checkpoint") if h in text]
    assert heads == ["## Summary", "## Exercises", "## Checkpoint"], \
        f"{path.name}: ends with Summary, Exercises, Checkpoint (has {heads})"
    tail = [c for c in nb.cells if c.cell_type == "code"][-3:]
    assert any(".write()" in c.source for c in tail), f"{path.name}: writes its checkpoint"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_only_labkit_and_taught_libraries(path):
    """Notebooks use lk's public API plus the libraries they teach, never labkit internals."""
    import labkit

    nb = nbformat.read(path, as_version=4)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"from labkit|import labkit\.", src), f"{path.name}: use `lk.`"
    used = set(re.findall(r"\blk\.([A-Za-z_]\w*)", src)) - {"__version__"}
    missing = used - set(labkit.__all__)
    assert not missing, f"{path.name}: lk.{sorted(missing)} not in labkit.__all__"
    assert "DataLoader(" not in src or "timeout=" in src, \
        f"{path.name}: a DataLoader with workers must set timeout= (or use lk.make_loader)"


if __name__ == "__main__":
    if "--fix" in sys.argv:
        for p in NOTEBOOKS:
            nb = nbformat.read(p, as_version=4)
            if strip(nb):
                nbformat.write(nb, p)
                print("stripped", p.name)
