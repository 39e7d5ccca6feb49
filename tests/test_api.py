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
