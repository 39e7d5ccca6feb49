"""What a person looks at: the dashboard model and widget, plots, figures (every chapter).

Its public names are reached as ``lk.display.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .plots import (
    plot_rates,
)

__all__ = [
    "plot_rates",
]
