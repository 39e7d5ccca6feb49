"""The public API: explicit, sorted, complete (STYLE 2)."""

import labkit as lk


def test_all_is_sorted_and_unique():
    assert lk.__all__ == sorted(lk.__all__)
    assert len(set(lk.__all__)) == len(lk.__all__)


def test_every_exported_name_exists():
    missing = [n for n in lk.__all__ if not hasattr(lk, n)]
    assert not missing


def test_public_callables_are_documented():
    undocumented = [n for n in lk.__all__ if callable(getattr(lk, n))
                    and not (getattr(lk, n).__doc__ or "").strip()]
    assert not undocumented, undocumented


def test_no_public_name_shadows_a_submodule():
    """`lk.measure` (a function) must not hide a module `labkit.measure`, and so on."""
    import importlib
    import pkgutil
    import types

    for info in pkgutil.iter_modules(lk.__path__):
        mod = importlib.import_module(f"labkit.{info.name}")
        attr = getattr(lk, info.name)
        assert isinstance(attr, types.ModuleType) and attr is mod, info.name


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
