"""The public API: explicit, sorted, complete (STYLE 2)."""

import labkit as lk


def _namespaces():
    """``lk`` and every folder or top-level module with an ``__all__``: ``{prefix: module}``."""
    import importlib
    import pkgutil

    out = {"": lk}
    for info in pkgutil.iter_modules(lk.__path__):
        if info.name == "cli":  # the console script's entry point, not an API
            continue
        mod = importlib.import_module(f"labkit.{info.name}")
        if hasattr(mod, "__all__"):
            out[f"{info.name}."] = mod
    return out


def _public():
    """Every public name as it is written after ``lk.``: ``measure``, ``tokens.pack``."""
    return {prefix + n: getattr(mod, n) for prefix, mod in _namespaces().items()
            for n in mod.__all__}


def test_all_is_sorted_and_unique():
    for prefix, mod in _namespaces().items():
        assert mod.__all__ == sorted(mod.__all__), prefix or "lk"
        assert len(set(mod.__all__)) == len(mod.__all__), prefix or "lk"


def test_flat_lk_is_small():
    """Flat ``lk.`` holds what three or more chapters use (issue 32: at most 40 names);
    a folder's own names are reached through it (``lk.remote.serve``)."""
    assert len(lk.__all__) <= 40, len(lk.__all__)


def test_every_public_name_is_used():
    """A public name that no notebook (its code or its text), CLI command (``labkit_tools``)
    or contract test (``tests/contracts.py``) uses is not public: delete it, or import it
    from its module."""
    import json
    import re
    from pathlib import Path

    root = Path(lk.__file__).resolve().parents[1]
    cells = []  # code and prose: a name a chapter's text teaches is used too
    nbs = root / "notebooks"   # the chapters and their "Going further" notebooks
    for nb in [*sorted(nbs.glob("[0-9][0-9]_*.ipynb")), *sorted(nbs.glob("further/*.ipynb"))]:
        cells += ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"]]
    text = "\n".join(cells)
    tools = "\n".join(p.read_text() for p in (root / "labkit_tools").rglob("*.py"))
    contracts = (root / "tests" / "contracts.py").read_text()
    unused = []
    for dotted in _public():
        name = dotted.rsplit(".", 1)[-1]
        use = rf"(?<!def )(?<!class )\b{name}\b(?!\s*=[^=])"  # its definition is no use
        if not (re.search(rf"\blk\.{re.escape(dotted)}\b", text)
                or re.search(use, tools) or re.search(use, contracts)):
            unused.append(dotted)
    assert not unused, f"public but used by no notebook, CLI or contract test: {unused}"


def test_every_exported_name_exists():
    missing = [prefix + n for prefix, mod in _namespaces().items() for n in mod.__all__
               if not hasattr(mod, n)]
    assert not missing


def test_public_callables_are_documented():
    undocumented = [n for n, obj in _public().items()
                    if callable(obj) and not (obj.__doc__ or "").strip()]
    assert not undocumented, undocumented


def test_no_public_name_shadows_a_submodule():
    """In ``lk`` and in every folder (``lk.tokens``, ``labkit_tools``, ...), a name the
    package exports must not hide its module of the same name: ``from labkit_tools import
    doctor`` gave the function, not the module ``tools/doctor.py``, until that became
    ``tools/checkup.py``."""
    import importlib
    import pkgutil
    import types

    packages = [lk] + [importlib.import_module(info.name)
                       for info in pkgutil.walk_packages(lk.__path__, "labkit.") if info.ispkg]
    shadowed = []
    for pkg in packages:
        for info in pkgutil.iter_modules(pkg.__path__):
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            attr = getattr(pkg, info.name)
            if info.name in getattr(pkg, "__all__", ()) or not (
                    isinstance(attr, types.ModuleType) and attr is mod):
                shadowed.append(mod.__name__)
    assert not shadowed, f"a public name hides its module: {shadowed}"


def _modules():
    from pathlib import Path

    root = Path(lk.__file__).parent
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_names_its_chapters_in_its_first_docstring_line():
    """STYLE 14: each definition says where it is taught ("chapter 03", "ch. 10-11", ...)."""
    import ast
    import re

    silent = []
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        first = doc.splitlines()[0] if doc else ""
        if not re.search(r"\b(chapters? \d\d|ch\. \d\d|every chapter)", first):
            silent.append(f"{path.name}: {first!r}")
    assert not silent, "\n".join(silent)


def test_no_module_holds_two_concepts():
    """A module far past ~350 lines is two concepts: split it (the layout by concept)."""
    long = [f"{p.relative_to(p.parents[1])}: {n} lines" for p in _modules()
            if (n := len(p.read_text().splitlines())) > 400]
    assert not long, long
