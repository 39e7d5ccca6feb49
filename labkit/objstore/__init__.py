"""Object stores (chapter 14): the loopback S3 store, its fault layer, shards in a bucket, systems.

A chapter folder: it imports the spine, never the tools. Its public names are
reached as ``lk.objstore.NAME``.
"""

from __future__ import annotations

from .s3shards import (
    S3ShardStream,
    ShardCache,
    ShardSet,
    shard_bytes_for,
    shard_efficiency,
    timed_gets,
    write_s3_shards,
)
from .shardplot import plot_shard_sizes
from .store import s3_store
from .systems import objectstore_systems, run_objectstore_system

__all__ = [
    "S3ShardStream",
    "ShardCache",
    "ShardSet",
    "objectstore_systems",
    "plot_shard_sizes",
    "run_objectstore_system",
    "s3_store",
    "shard_bytes_for",
    "shard_efficiency",
    "timed_gets",
    "write_s3_shards",
]
