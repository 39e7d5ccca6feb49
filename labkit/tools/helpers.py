"""``labkit helpers NN``: each helper a chapter calls, with its file and line (chapter 00).

Read from the sources with ``ast``, nothing executed: the ``lk.NAME`` and
``lk.FOLDER.NAME`` attributes in a notebook's code cells, and where ``labkit/__init__.py`` or
the folder's ``__init__.py`` imports each from. The
same reading checks that every module's first docstring line names the chapters that call
it (tests/test_layout.py).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

from ..errors import LabkitError
from ..paths import notebooks_dir
from ..records.table import text_table
from .runner import chapters

PACKAGE = Path(__file__).resolve().parents[1]
CHAPTERS = tuple(f"{n:02d}" for n in range(17))


def _code(line: str) -> str:
    """A notebook line as Python: IPython magics and shell escapes become blank lines."""
    return "" if line.lstrip().startswith(("%", "!")) else line


def notebook_names(path: Path, alias: str = "lk") -> Counter:
    """How often each ``lk.NAME`` and ``lk.FOLDER.NAME`` (as ``"FOLDER.NAME"``) appears in a
    notebook's code cells."""
    folders = _folders()
    names: Counter = Counter()
    for cell in json.loads(Path(path).read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        try:
            tree = ast.parse("\n".join(_code(x) for x in src.splitlines()))
        except SyntaxError as e:
            raise LabkitError(f"{path}: a code cell does not parse ({e})") from None
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            inner = node.value
            if isinstance(inner, ast.Name) and inner.id == alias and node.attr not in folders:
                names[node.attr] += 1
            elif (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                  and inner.value.id == alias and inner.attr in folders):
                names[f"{inner.attr}.{node.attr}"] += 1
    return names


def _folders() -> set[str]:
    """The names ``lk.FOLDER`` can take: labkit's subpackages and top-level modules."""
    return {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_dir() and (p / "__init__.py").is_file())
            or (p.suffix == ".py" and not p.name.startswith("_"))}


def public_sites() -> dict[str, tuple[str, Path, int]]:
    """``{NAME: (module, file, line)}`` for every name ``labkit/__init__.py`` imports, and
    ``{"FOLDER.NAME": ...}`` for every name a folder's ``__init__.py`` imports."""
    sites = {}
    inits = [("", PACKAGE / "__init__.py")] + [
        (f"{p.parent.name}.", p) for p in sorted(PACKAGE.glob("*/__init__.py"))]
    for prefix, init in inits:
        base = init.parent
        for node in ast.parse(init.read_text()).body:
            if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
                continue
            path = base.joinpath(*node.module.split(".")).with_suffix(".py")
            if not path.is_file():  # `from .media import writers`: a module, not a helper
                continue
            module = "labkit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
            defs = _definitions(path)
            for a in node.names:
                sites[prefix + (a.asname or a.name)] = (module, path, defs.get(a.name, 1))
    return sites


def _definitions(path: Path) -> dict[str, int]:
    """Top-level names of a module and the line each is defined on."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node.lineno
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.setdefault(n.id, node.lineno)
    return out


def chapter_notebook(chapter: str) -> Path:
    """The notebook of chapter ``NN`` (``"3"``, ``"03"`` or ``"03_map_style..."``)."""
    nn = str(chapter).split("_")[0].zfill(2)
    found = sorted(notebooks_dir().glob(f"{nn}_*.ipynb"))
    if not found:
        raise LabkitError(f"no chapter {nn} in {notebooks_dir()}")
    return found[0]


def chapter_helpers(chapter: str) -> list[dict]:
    """The labkit helpers one chapter calls: name, uses, module, file, line (sorted by file)."""
    sites = public_sites()
    rows = []
    for name, uses in notebook_names(chapter_notebook(chapter)).items():
        module, path, line = sites.get(name, ("?", None, 0))
        where = str(path.relative_to(PACKAGE.parent)) if path else "(not public)"
        rows.append({"name": name, "uses": uses, "module": module, "file": where,
                     "line": line})
    return sorted(rows, key=lambda r: (r["file"], r["line"], r["name"]))


def format_helpers(rows: list[dict]) -> str:
    lines = [text_table({"helper": "<", "uses": ">", "defined at": "<"},
                        [[f"lk.{r['name']}", f"{r['uses']}x", f"{r['file']}:{r['line']}"]
                         for r in rows], header=False)]
    lines.append(f"{len(rows)} helpers from {len({r['file'] for r in rows})} modules")
    return "\n".join(lines)


def callers() -> dict[str, set[str]]:
    """``{module: chapters whose notebooks call one of its public names}``."""
    sites = public_sites()
    out: dict[str, set[str]] = {}
    for nb in chapters():   # "Going further" notebooks count as their chapter's
        for name in notebook_names(nb):
            if name in sites:
                out.setdefault(sites[name][0], set()).add(nb.name[:2])
    return out


_CHAPTER_LIST = re.compile(
    r"\b(?:chapters?|ch\.)\s+(\d\d(?:\s*(?:-|,|and|&)\s*\d\d)*)(\s+on\b)?")


def named_chapters(line: str) -> set[str]:
    """The chapters a docstring line names: ``chapter 03``, ``ch. 01-14``, ``chapters 06,
    07``, ``chapter 01 on``, ``every chapter``."""
    if re.search(r"\bevery chapter\b", line):
        return set(CHAPTERS)
    found: set[str] = set()
    for m in _CHAPTER_LIST.finditer(line):
        parts = re.split(r"\s*(?:,|and|&)\s*", m.group(1))
        for k, part in enumerate(parts):
            lo, _, hi = part.partition("-")
            if m.group(2) and k == len(parts) - 1:  # "chapter 01 on"
                hi = CHAPTERS[-1]
            found |= {f"{n:02d}" for n in range(int(lo), int(hi or lo) + 1)}
    return found
