"""Remote data on loopback: an HTTP server with faults, torchrun jobs (chapters 04, 06, 07).

Its public names are reached as ``lk.remote.NAME``; its modules' others are for labkit and tests.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "serve": "server",
    "torchrun": "launch",
})
