"""The kit's tools, beside the panel (chapter 00 on): the ``labkit`` command and what it runs.

``labkit`` (the panel, ``import labkit as lk``) is what the chapters read off; this package
is what a learner runs from a terminal: the command line (:mod:`.cli`, the parser alone,
then :mod:`.commands`), ``labkit run`` (:mod:`.runner`), ``labkit report`` (:mod:`.report`),
the named benchmarks (``labkit bench``, :mod:`.bench` and :mod:`.benchmarks`), ``labkit
doctor`` (:mod:`.checkup`) and ``labkit diagnose`` (:mod:`.diagnose`). It imports labkit;
labkit never imports it (tests/test_layout.py). A chapter that shows a tool calls it as
``lt.NAME`` after ``import labkit_tools as lt``: the names below.
"""

from __future__ import annotations

import importlib

__all__ = ["doctor", "format_doctor", "run_benchmark"]
_HOMES = {"doctor": "checkup", "format_doctor": "checkup", "run_benchmark": "bench"}


def __getattr__(name: str):
    """The names above, imported on first use: ``labkit --help`` (:mod:`.cli`, inside this
    package) answers before torch is imported."""
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
