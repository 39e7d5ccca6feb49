"""The shuffle buffer of the kit's resumable stream (chapter 08 types the same by hand).

Random replacement: fill ``buffer_size`` items, then emit a random buffered one for each new
one and put the new one in its place; drain at the end. The random numbers come from the
caller's generator, so a stream seeded by ``(seed, epoch, slot)`` replays the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np


def shuffle_buffer(items: Iterable, buffer_size: int, rng: np.random.Generator) -> Iterator:
    """``items`` in the order a shuffle buffer of ``buffer_size`` gives them (1 or less: as is).

    Lazy: it holds ``buffer_size`` items, never the stream, so it works on bytes read from
    a bucket as on ``(shard, index)`` positions computed before any byte is read.
    """
    if buffer_size <= 1:
        yield from items
        return
    buf: list = []
    for item in items:
        if len(buf) < buffer_size:
            buf.append(item)
            continue
        k = int(rng.integers(len(buf)))
        yield buf[k]
        buf[k] = item
    while buf:
        yield buf.pop(int(rng.integers(len(buf))))
