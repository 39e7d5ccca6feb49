"""labkit's size, kept by a test (issue 46): lines, public names, single-chapter names, what
``import labkit`` loads, and no cross-module import of a ``_private`` name.

``python tests/test_size.py`` prints the census. ``LIMITS`` are what this checkout holds
and may only go down, unless an issue adds a feature the budget counts (and its note says
by how much); ``GOALS`` are issue 46's numbers, which the limits move towards.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("labkit", "labkit_tools")

GOALS = {"lines": 9000, "public_names": 40, "one_chapter_names": 10, "modules_on_import": 30,
         "private_imports": 0}
# issue 46's first step (2026-12-02) took these from 20,027 / 193 / 121 / 141 / 21;
# 2026-12-04 from 11,135 / 47 / 5 / 39 / 0; the same day issue 47's workshop room added 531
# lines (labkit_tools/room.py, labkit/records/room.py, the CLI) and cuts elsewhere took 377
LIMITS = {"lines": 9571, "public_names": 40, "one_chapter_names": 5,
          "modules_on_import": 2, "private_imports": 0}


def source_files() -> list[Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
             if "__pycache__" not in p.parts]
    return sorted(files)


def lines() -> int:
    return sum(len(p.read_text().splitlines()) for p in source_files())


def namespaces() -> dict[str, object]:
    """``{prefix: module}``: ``lk``, each labkit folder or module with an ``__all__``, and the
    tools package if it exports names."""
    import labkit as lk

    out = {"": lk}
    for info in pkgutil.iter_modules(lk.__path__):
        if info.name == "cli":
            continue
        mod = importlib.import_module(f"labkit.{info.name}")
        if hasattr(mod, "__all__"):
            out[f"{info.name}."] = mod
    try:
        tools = importlib.import_module("labkit_tools")
    except ModuleNotFoundError:
        tools = None
    if getattr(tools, "__all__", None):
        out["labkit_tools:"] = tools
    return out


def public_names() -> list[str]:
    return [prefix + n for prefix, mod in namespaces().items() for n in mod.__all__]


def chapter_code() -> dict[str, str]:
    """``{chapter number: its notebooks' code}`` ("03" holds 03 and further/03b)."""
    out: dict[str, str] = defaultdict(str)
    nbs = ROOT / "notebooks"
    for nb in [*nbs.glob("[0-9][0-9]_*.ipynb"), *nbs.glob("further/[0-9][0-9]*.ipynb")]:
        cells = json.loads(nb.read_text())["cells"]
        out[nb.name[:2]] += "\n".join("".join(c["source"]) for c in cells
                                      if c["cell_type"] == "code") + "\n"
    return out


def users() -> dict[str, set[str]]:
    """``{public name: the chapters whose code calls it}``."""
    code = chapter_code()
    out = {}
    for dotted in public_names():
        if dotted.startswith("labkit_tools:"):
            name = dotted.split(":", 1)[1]
            pat = rf"\b(labkit_tools|lt)\b[\w.]*\b{re.escape(name)}\b"
        else:
            pat = rf"\blk\.{re.escape(dotted)}\b"
        out[dotted] = {ch for ch, text in code.items() if re.search(pat, text)}
    return out


def modules_on_import() -> list[str]:
    code = "import sys, labkit; print('\\n'.join(m for m in sys.modules if m.startswith('labkit')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    return sorted(out.split())


def private_imports() -> list[str]:
    """``file:line: from X import _name`` across modules of labkit and its tools."""
    found = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").split(".")[0] in PACKAGES):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: from "
                          f"{'.' * node.level}{node.module or ''} import {a.name}"
                          for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def census() -> dict[str, object]:
    use = users()
    return {"lines": lines(), "files": len(source_files()),
            "public_names": len(use),
            "one_chapter_names": sum(len(ch) == 1 for ch in use.values()),
            "unused_by_chapter_code": sum(not ch for ch in use.values()),
            "modules_on_import": len(modules_on_import()),
            "private_imports": len(private_imports())}


def test_lines():
    assert lines() <= LIMITS["lines"], f"{lines()} lines (limit {LIMITS['lines']})"


def test_public_names():
    names = public_names()
    assert len(names) <= LIMITS["public_names"], (len(names), LIMITS["public_names"])


def test_names_used_by_one_chapter_only():
    one = sorted(n for n, ch in users().items() if len(ch) == 1)
    assert len(one) <= LIMITS["one_chapter_names"], (len(one), one)


def test_import_labkit_loads_only_the_panel():
    mods = modules_on_import()
    assert len(mods) <= LIMITS["modules_on_import"], (len(mods), mods)
    assert not [m for m in mods if m.startswith("labkit_tools")]


def test_no_module_imports_another_modules_private_name():
    """A ``_name`` is its module's own (CONTRIBUTING): a second module that needs it makes it
    public in its module (no ``_``), or the two merge."""
    assert not private_imports(), "\n".join(private_imports())


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    c = census()
    for k, v in c.items():
        goal = GOALS.get(k)
        print(f"{k:<24}{v:>7}" + (f"   (limit {LIMITS[k]}, goal {goal})" if goal else ""))
