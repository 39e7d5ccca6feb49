"""The per-batch timeline ``labkit diagnose`` draws (chapter 13b; chapter 13 types its own)."""

from __future__ import annotations

from .timeline import record_timeline  # noqa: F401  (labkit_tools.diagnose imports it here)
