"""Records: the checkpoint, the machine, the text tables (ch. 00, 11).

``lk.records.reference_figures`` is its public name; the rest is for labkit, the tools
(``labkit report``, ``labkit env``) and tests.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "reference_figures": "checkpoint",
})
