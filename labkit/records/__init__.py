"""Records: the checkpoint, the machine, reports, labkit run (ch. 00, 11).

Its public name is reached as ``lk.records.reference_figures`` (``import labkit as lk``);
its modules' other names are for labkit, the tools and tests: ``checkpoint.read_checkpoint``
(also ``lk.Checkpoint.read``) and ``load_records`` read records back (``labkit report``),
``machine.environment`` and ``format_environment`` describe the machine (``labkit env``),
``table.text_table`` renders every fixed-width table labkit prints.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "reference_figures": "checkpoint",
})
