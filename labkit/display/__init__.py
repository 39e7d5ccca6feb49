"""What a person looks at: the dashboard model and widget, plots, figures (every chapter).

Its public names are reached as ``lk.display.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "plot_rates": "plots",
})
