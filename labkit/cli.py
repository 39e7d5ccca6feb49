"""The ``labkit`` command (chapter 00): kept here so ``python -m labkit.cli`` and old scripts work.

The command itself lives in :mod:`labkit.tools.cli`.
"""

from __future__ import annotations

from .tools.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
