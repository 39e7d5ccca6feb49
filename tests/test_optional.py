"""labkit.optional: ``lk.status(name)``, the one way to ask whether an optional library or
device is here, and ``library_status``, the probe behind it (chapters 09-16)."""

from __future__ import annotations

import sys

import pytest

import labkit as lk
from labkit.optional import _CHECKS, check, library_status, library_version

#: Every check a chapter, the tests or the doctor asks for: in labkit/optional.py, or
#: registered where its library is used (optional.HOMES names the module).
CHECKS = ["array_record", "cuda", "dali", "ffmpeg", "gpu_decode", "kornia_gpu", "lance",
          "litdata", "media_gpu", "mosaicml_streaming", "pyav", "pyspy", "ray_data",
          "safetensors", "spdl", "tfdata", "torchcodec", "torchvision"]


def _package(tmp_path, monkeypatch, name: str, body: str) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_absent_library_names_the_module_and_what_to_install():
    ok, why = library_status("no-such-dist", "no_such_module_xyz.sub", install="pip install x")
    assert not ok
    assert why == "no-such-dist is not installed (no_such_module_xyz not found); pip install x"


def test_a_library_that_raises_anything_at_import_is_a_reason_not_a_crash(tmp_path,
                                                                         monkeypatch):
    # a wheel built for another torch fails with RuntimeError, OSError, ... not ImportError
    _package(tmp_path, monkeypatch, "labkit_broken_pkg",
             "raise RuntimeError('operator torchvision::nms does not exist')\n")
    ok, why = library_status("labkit-broken-pkg", "labkit_broken_pkg", install="see README",
                             label="broken")
    assert not ok
    assert why == ("broken does not load here (RuntimeError: operator torchvision::nms does "
                   "not exist); see README")


def test_load_false_finds_without_importing(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "labkit_loud_pkg", "raise SystemExit('imported')\n")
    ok, why = library_status("labkit-loud-pkg", "labkit_loud_pkg.deep.module", install="-",
                             load=False)
    assert ok and "labkit_loud_pkg" not in sys.modules
    assert why == "labkit-loud-pkg (version unknown)"


def test_version_comes_from_the_distribution_or_the_module_s_name():
    import numpy

    assert library_status("numpy", install="-") == (True, f"numpy {numpy.__version__}")
    # a dist name that is not installed (tensorflow vs tensorflow-cpu): the module's name
    assert library_version("numpy-cpu-variant", "numpy.linalg") == numpy.__version__


def test_a_custom_importer_is_used_for_loading():
    seen = []
    ok, _ = library_status("numpy", "numpy.linalg", install="-", importer=seen.append)
    assert ok and seen == ["numpy.linalg"]


def test_every_check_is_known_to_lk_status():
    """In labkit/optional.py, or in the module HOMES names (imported when first asked for)."""
    from labkit.optional import HOMES

    assert sorted({*_CHECKS, *HOMES}) == CHECKS
    for name, module in HOMES.items():
        lk.status(name)   # imports its module
        assert name in _CHECKS, (name, module)


@pytest.mark.parametrize("name", [n for n in CHECKS if n != "pyspy"])  # pyspy starts a child
def test_status_is_a_reason_not_an_exception(name):
    ok, reason = lk.status(name)
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(lk.LabkitError, match=r"no check named 'cdua'; the known ones: "
                                             r"affinity, array_record, cuda, dali, .*torchvision"):
        lk.status("cdua")


def test_options_reach_the_check(monkeypatch):
    seen = {}
    monkeypatch.setitem(_CHECKS, "cuda", lambda **options: (not seen.update(options), "fake"))
    assert lk.status("cuda", device="cuda:1") == (True, "fake")
    assert seen == {"device": "cuda:1"}


def test_one_name_one_check(monkeypatch):
    monkeypatch.setattr("labkit.optional._CHECKS", dict(_CHECKS))

    def cuda():
        return True, "another"

    with pytest.raises(lk.LabkitError, match="two checks named 'cuda'"):
        check("cuda")(cuda)
