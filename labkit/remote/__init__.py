"""Remote data on loopback: HTTP and S3 stores with faults, torchrun jobs (ch. 04, 06, 07, 14)."""

from __future__ import annotations

from ..lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {"serve": "stores", "torchrun": "launch"})
