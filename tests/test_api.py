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
