"""The kit's tools, beside the panel (chapter 00 on): the ``labkit`` command and what it runs.

``labkit`` (the panel, ``import labkit as lk``) is what the chapters read off; this package
is what a learner runs from a terminal: the command line (:mod:`.cli`, the parser alone,
then :mod:`.commands`), ``labkit run`` (:mod:`.runner`), ``labkit report`` (:mod:`.report`),
the named benchmarks (``labkit bench``, :mod:`.bench` and :mod:`.benchmarks`), ``labkit
doctor`` (:mod:`.checkup`) and ``labkit diagnose`` (:mod:`.diagnose`). It imports labkit;
labkit never imports it (tests/test_layout.py). It exports no names: a chapter that shows a
tool runs the command (``python -m labkit_tools.cli doctor --json``), as a terminal would.
"""
