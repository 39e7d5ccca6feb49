"""labkit.paths: a notebook's stem and its file, one relation for the kit."""

from __future__ import annotations

from labkit import paths
from labkit_tools.runner import chapters


def test_every_notebook_is_found_from_its_stem():
    listed = chapters()
    assert any("/further/" in str(p) for p in listed)   # chapters and Going-further ones
    for p in listed:
        assert paths.notebooks_dir() / f"{paths.notebook_path(p.stem)}.ipynb" == p


def test_a_going_further_notebook_is_its_chapters():
    assert paths.notebook_path("14b_cache_faults_clients") == "further/14b_cache_faults_clients"
    assert paths.notebook_path("14_object_stores") == "14_object_stores"
