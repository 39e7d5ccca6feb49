"""labkit's layout: three layers, imports at the top, no circles (issue 24; chapter 00).

Read from the source with ``ast`` (nothing is imported), so a failure names the file and line.
The layers are the ones ``labkit/__init__.py``'s docstring describes: the spine every chapter
uses, one folder per chapter-specific topic, and the tools no chapter imports. A module may
import its own layer and the layers before it; ``labkit/__init__.py`` (the public API) and
``labkit/cli.py`` (the console script's old address) sit above all three.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import labkit

ROOT = Path(labkit.__file__).parent

SPINE = ("errors", "lazy", "paths", "scale", "optional", "facilities", "ceilings", "data", "images",
         "streams", "loading", "instruments", "remote", "display", "records")
CHAPTERS = ("tokens", "formats", "objstore", "media")
TOOLS = ()   # the tools are a package of their own, labkit_tools (imports labkit, never back)
TOP = ("labkit",)


def layer(module: str) -> int:
    """0 spine, 1 chapter folder, 2 tools, 3 the package's face (``__init__``, ``cli``)."""
    if module in TOP:
        return 3
    first = module.split(".")[1]
    for rank, names in enumerate((SPINE, CHAPTERS, TOOLS)):
        if first in names:
            return rank
    raise AssertionError(f"{module}: in no layer; add its folder to tests/test_layout.py "
                         "and to labkit/__init__.py's docstring")


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = modules()


def labkit_imports(name: str, path: Path):
    """``(target module, line, inside a function)`` for every labkit import in one module;
    imports under ``if TYPE_CHECKING:`` are left out (they never run)."""
    tree = ast.parse(path.read_text())
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            # `from .x import y`: y is a module when labkit has one by that name
            found = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        elif isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        else:
            continue
        found = [t for t in found if t.split(".")[0] == "labkit"]
        inside, checking, up = False, False, node
        while up in parents:
            up = parents[up]
            inside |= isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef)
            checking |= isinstance(up, ast.If) and "TYPE_CHECKING" in ast.unparse(up.test)
        if checking:
            continue
        for target in found:
            while target not in MODULES:
                target = target.rpartition(".")[0]
            yield target, node.lineno, inside


EDGES = {name: list(labkit_imports(name, path)) for name, path in MODULES.items()}


def test_labkit_imports_sit_at_the_top_of_each_module():
    """An import inside a function hides a dependency until the function runs (and hid both
    circles this test now forbids). Optional third-party libraries (PyAV, boto3, ray, ...)
    may still be imported where they are used: they are not labkit imports."""
    inside = [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: imports {t}"
              for m, edges in EDGES.items() for t, line, fn in edges if fn]
    assert not inside, "\n".join(inside)


def test_no_import_circles_between_labkit_modules():
    graph = {m: {t for t, _, _ in edges if t != m} for m, edges in EDGES.items()}
    done: set[str] = set()
    circles = []

    def visit(m, stack):
        if m in stack:
            circles.append(" -> ".join(stack[stack.index(m):] + [m]))
            return
        if m in done:
            return
        for t in sorted(graph[m]):
            if t not in TOP and not MODULES[t].name == "__init__.py":
                visit(t, stack + [m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])
    assert not circles, "\n".join(circles)


def test_imports_never_point_up_a_layer():
    """The spine imports no chapter folder and no tool; a chapter folder imports no tool."""
    names = ("spine", "chapter folder", "tools", "labkit")
    upward = [f"{MODULES[m].relative_to(ROOT.parent)}:{line}: {names[layer(m)]} {m} imports "
              f"{names[layer(t)]} {t}"
              for m, edges in EDGES.items() for t, line, _ in edges if layer(t) > layer(m)]
    assert not upward, "\n".join(upward)


def test_labkit_never_imports_its_tools():
    """``labkit_tools`` (the CLI, run, report, benchmarks) imports the panel; the panel never
    imports the tools, at its top or inside a function."""
    found = [f"{path.relative_to(ROOT.parent)}:{node.lineno}"
             for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text()))
             if (isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith("labkit_tools"))
             or (isinstance(node, ast.Import)
                 and any(a.name.startswith("labkit_tools") for a in node.names))]
    assert not found, found


def test_every_folder_is_in_a_layer():
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert folders == set(SPINE + CHAPTERS + TOOLS) - {"errors", "lazy", "paths", "scale",
                                                       "optional", "facilities", "ceilings"}


_CHAPTER_LIST = re.compile(
    r"\b(?:chapters?|ch\.)\s+(\d\d(?:\s*(?:-|,|and|&)\s*\d\d)*)(\s+on\b)?")
ALL_CHAPTERS = tuple(f"{n:02d}" for n in range(17))


def named_chapters(line: str) -> set[str]:
    """The chapters a docstring line names: ``chapter 03``, ``ch. 01-14``, ``chapters 06,
    07``, ``chapter 01 on``, ``every chapter``."""
    if re.search(r"\bevery chapter\b", line):
        return set(ALL_CHAPTERS)
    found: set[str] = set()
    for m in _CHAPTER_LIST.finditer(line):
        parts = re.split(r"\s*(?:,|and|&)\s*", m.group(1))
        for k, part in enumerate(parts):
            lo, _, hi = part.partition("-")
            if m.group(2) and k == len(parts) - 1:  # "chapter 01 on"
                hi = ALL_CHAPTERS[-1]
            found |= {f"{n:02d}" for n in range(int(lo), int(hi or lo) + 1)}
    return found


def test_every_module_names_the_chapters_that_call_it():
    """STYLE 14 checked against use: a module whose public names a chapter's code cells call
    (``lk.NAME``) names that chapter in its first docstring line."""
    import test_size

    callers: dict[str, set[str]] = {}
    for dotted, chapters in test_size.users().items():
        if dotted.startswith("labkit_tools:"):   # the tools: not a labkit module
            continue
        prefix, _, name = dotted.rpartition(".")
        ns = test_size.namespaces()[f"{prefix}." if prefix else ""]
        module = getattr(getattr(ns, name), "__module__", None)
        if module in MODULES:
            callers.setdefault(module, set()).update(chapters)
    silent = []
    for module, chapters in sorted(callers.items()):
        doc = ast.get_docstring(ast.parse(MODULES[module].read_text())) or ""
        missing = chapters - named_chapters(doc.splitlines()[0] if doc else "")
        if missing:
            silent.append(f"{MODULES[module].relative_to(ROOT.parent)}: called by chapter(s) "
                          f"{', '.join(sorted(missing))}, not named in {doc.splitlines()[0]!r}")
    assert not silent, "\n".join(silent)


def test_named_chapters_reads_a_docstring_line():
    assert named_chapters("x (ch. 01-03, 08)") == {"01", "02", "03", "08"}
    assert named_chapters("x (chapter 15 on)") == {"15", "16"}
    assert len(named_chapters("x (every chapter)")) == 17


def test_no_import_circles_between_subpackages():
    """Folders too: ``data`` may use ``streams`` or the other way round, not both."""
    def folder(m):
        return m.split(".")[1] if m.count(".") >= 1 and m not in TOP else None

    graph: dict[str, set[str]] = {}
    for m, edges in EDGES.items():
        for t, _, _ in edges:
            if folder(m) and folder(t) and folder(m) != folder(t):
                graph.setdefault(folder(m), set()).add(folder(t))

    def reaches(a, b, seen=()):
        return any(n == b or (n not in seen and reaches(n, b, (*seen, n)))
                   for n in graph.get(a, ()))

    both = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert not both, "\n".join(both)
