"""Scale presets: one word decides how big every fixture and sweep is.

``ci`` fits a 2-core CI runner in seconds, ``workshop`` (the default) makes effects
visible on a laptop in minutes, ``full`` is sized for page-cache, disk and network
effects to dominate (GBs). Introduced in chapter 00.
"""

from __future__ import annotations

import os

from .errors import ScaleError

SCALES = ("ci", "workshop", "full")
DEFAULT_SCALE = "workshop"


def resolve_scale(scale: str | None = None) -> str:
    """Return a valid scale name: the argument, else ``LABKIT_SCALE``, else ``workshop``.

    Raises:
        ScaleError: the name is not one of ``ci``, ``workshop``, ``full``.
    """
    source = "argument"
    if scale is None:
        scale = os.environ.get("LABKIT_SCALE") or DEFAULT_SCALE
        source = "LABKIT_SCALE" if os.environ.get("LABKIT_SCALE") else "default"
    name = str(scale).strip().lower()
    if name not in SCALES:
        what = f"LABKIT_SCALE={scale!r}" if source == "LABKIT_SCALE" else f"scale {scale!r}"
        raise ScaleError(
            f"{what} is not a scale; choose one of {', '.join(SCALES)} "
            f"(e.g. LABKIT_SCALE=ci for a quick run)"
        )
    return name


def pick(values: dict, scale: str | None = None):
    """Pick the value for the current scale from ``{"ci": .., "workshop": .., "full": ..}``."""
    name = resolve_scale(scale)
    try:
        return values[name]
    except KeyError:
        raise ScaleError(f"no value for scale {name!r} in {values!r}") from None
