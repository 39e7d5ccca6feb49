"""Notebooks stay reviewable: outputs only on checked cells, the same anatomy everywhere.

``python tests/test_notebook_hygiene.py --fix`` strips what the checks below reject
(outputs and execution counts of unchecked cells) in place.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import nbformat
import pytest

from labkit_tools.runner import chapters

# the chapters and their "Going further" notebooks (further/NNb_topic.ipynb), labkit run's list
NOTEBOOKS = chapters(Path(__file__).parent.parent / "notebooks")
CHECK = "# NBVAL_CHECK_OUTPUT"


def checked(cell) -> bool:
    return cell.cell_type == "code" and CHECK in cell.source


REFERENCE = "prints-a-committed-record"


def prints_the_reference(cell) -> bool:
    """A checked cell tagged ``prints-a-committed-record`` prints ``reference/``'s GPU
    record: its figures come from a file in the repository, not from this run's clock, so
    they may carry units. The tag must sit on a cell that reads that record."""
    if REFERENCE not in cell.metadata.get("tags", ()):
        return False
    assert "lk.records.reference_figures(" in cell.source, (
        f"a cell tagged {REFERENCE} must print lk.records.reference_figures(...)")
    return True


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
    # nbval fails a cell with outputs and no execution count ("Unrun reference cell has
    # outputs"), so a checked cell's committed output needs one
    unrun = [i for i, c in enumerate(nb.cells) if checked(c) and c.execution_count is None]
    assert not unrun, f"{path.name}: checked cells {unrun} have outputs but no execution_count"
    for c in nb.cells:  # a timing in a checked cell would make the suite flaky
        if checked(c) and not prints_the_reference(c):
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
    """Notebooks use lk's public API (flat names and folder names, each in its ``__all__``)
    plus the libraries they teach, never labkit internals."""
    import labkit

    nb = nbformat.read(path, as_version=4)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"from labkit|import labkit\.", src), f"{path.name}: use `lk.`"
    missing = set()
    for name, attr in re.findall(r"\blk\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?", src):
        if name == "__version__":
            continue
        folder = getattr(labkit, name, None)
        if inspect.ismodule(folder):
            if attr and attr not in getattr(folder, "__all__", ()):
                missing.add(f"{name}.{attr}")
        elif name not in labkit.__all__:
            missing.add(name)
    assert not missing, f"{path.name}: lk.{sorted(missing)} not public"


def _loader_calls(source: str):
    """Every call of a loader class in a cell's code (``DataLoader(``, ``StatefulDataLoader(``,
    ``wds.WebLoader(``): its line and keyword names, and whether ``**kwargs`` is passed."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name.endswith("DataLoader") or name == "WebLoader":
                yield node, {k.arg: k.value for k in node.keywords}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_loader_with_workers_sets_a_timeout(path):
    """Each DataLoader call that may start workers passes ``timeout=`` in that call (a stuck
    worker then fails the cell instead of hanging a workshop); ``num_workers`` absent or a
    literal 0 needs none, a ``**kwargs`` splat is trusted to carry it."""
    nb = nbformat.read(path, as_version=4)
    bad = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for node, kw in _loader_calls(cell.source):
            if None in kw or "timeout" in kw:  # None: a **kwargs splat
                continue
            nw = kw.get("num_workers")
            if nw is None or (isinstance(nw, ast.Constant) and nw.value == 0):
                continue
            bad.append(f"cell {i} line {node.lineno}")
    assert not bad, f"{path.name}: a DataLoader with workers and no timeout= at {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_chapter_with_workers_types_its_loader(path):
    """The learner writes the loader: a chapter that turns ``num_workers`` calls a loader
    class itself (torch's DataLoader, or the library's own: StatefulDataLoader, WebLoader)."""
    nb = nbformat.read(path, as_version=4)
    src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "lk.make_loader" not in src, f"{path.name}: labkit builds no loader"
    if "num_workers" in src:
        assert any(True for c in nb.cells if c.cell_type == "code"
                   for _ in _loader_calls(c.source)), f"{path.name}: no DataLoader( in a cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_cell_the_start_method_copies_skip_names_its_start_method(path):
    """notebooks/conftest.py skips a cell tagged ``same-under-every-start-method`` in the
    spawn and forkserver copies: fair only if no loader in it takes the kernel's default
    start method (each names ``multiprocessing_context=``; a script run in a process of its
    own is a string here, not a call)."""
    nb = nbformat.read(path, as_version=4)
    bad = []
    for i, cell in enumerate(nb.cells):
        if "same-under-every-start-method" not in cell.metadata.get("tags", ()):
            continue
        for node, kw in _loader_calls(cell.source):
            if "multiprocessing_context" not in kw:
                bad.append(f"cell {i} line {node.lineno}")
    assert not bad, f"{path.name}: a loader on the default start method in a skipped cell {bad}"


if __name__ == "__main__":
    if "--fix" in sys.argv:
        for p in NOTEBOOKS:
            nb = nbformat.read(p, as_version=4)
            if strip(nb):
                nbformat.write(nb, p)
                print("stripped", p.name)
