"""The capstone (chapter 16): the pipeline tuned one measured change at a time, and the bake-off.

A chapter folder: it imports the spine and the other chapter folders, never the tools. Its
public names are reached as ``lk.capstone.NAME``.
"""

from __future__ import annotations

from .bakeoff.adapters import loader_names
from .bakeoff.data import cleanup_bakeoff, prepare_bakeoff
from .bakeoff.runner import format_bakeoff, run_bakeoff
from .pipeline import (
    format_tuning,
    image_train_step,
    load_tuning,
    run_tuning,
    save_tuning,
    tuned_result,
    tuning_steps,
)
from .plots import plot_bakeoff, plot_tuning

__all__ = [
    "cleanup_bakeoff",
    "format_bakeoff",
    "format_tuning",
    "image_train_step",
    "load_tuning",
    "loader_names",
    "plot_bakeoff",
    "plot_tuning",
    "prepare_bakeoff",
    "run_bakeoff",
    "run_tuning",
    "save_tuning",
    "tuned_result",
    "tuning_steps",
]
