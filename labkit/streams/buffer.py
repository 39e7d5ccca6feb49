"""The one shuffle buffer of the kit's streams: tar shards, shards in a bucket (ch. 08, 14).

The random-replacement buffer as a plain generator: fill a buffer of ``buffer_size`` items;
then for every new item emit a random buffered one and put the new one in its place; at the
end drain the buffer in random order. Chapter 08 writes it by hand; the libraries use
variants (webdataset's ``shuffle`` swaps the pick with the last item and waits for
``initial`` items; ``datasets`` 5.2 permutes a full buffer and keeps half). An item leaves
at most ``buffer_size - 1`` places early, and arbitrarily late: the shuffle is only as good
as the buffer is large against a shard (chapter 08 measures it). The random numbers come
from the caller's generator, so a stream that seeds it by ``(seed, epoch, slot)`` gets the
same order every time it replays.
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
