"""Object stores (chapter 14): the loopback S3 store behind its fault layer.

The stream over S3, the shard-size model and the systems' runs are typed in chapters 14 and
14b; ``systems`` registers ``lk.status`` checks for MosaicML Streaming, LitData, Ray Data;
the store's ``cleanup`` removes what they leave behind.
"""

from __future__ import annotations

from . import systems  # noqa: F401 - registers the lk.status checks
from .store import s3_store

__all__ = ["s3_store"]
