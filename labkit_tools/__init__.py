"""The kit's tools, beside the panel (chapter 00 on): the ``labkit`` command and what it runs.

The parser (:mod:`.cli`), the commands (:mod:`.commands`), ``labkit run`` (:mod:`.runner`),
``report`` (:mod:`.report`), ``bench`` (:mod:`.bench`, :mod:`.benchmarks`), ``doctor``
(:mod:`.checkup`) and ``diagnose`` (:mod:`.diagnose`). It imports labkit, never the reverse,
and exports no names: a chapter runs the command, as a terminal would.
"""
