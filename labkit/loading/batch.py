"""How many samples, bytes and tensors a batch holds, for any batch a loader yields (ch. 01 on).

:func:`make_sizer` reads the first batch's structure once, so sizing costs tens of ns a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

_SCALARS = (str, bytes, bytearray, memoryview, int, float, bool)


def _is_one_sample(batch: Any) -> bool:
    """A scalar, or a tuple/mapping holding one (``(features, 3)``), is one sample."""
    if isinstance(batch, _SCALARS):
        return True
    if isinstance(batch, Mapping):
        return any(isinstance(v, _SCALARS) for v in batch.values())
    if isinstance(batch, tuple):
        return any(isinstance(v, _SCALARS) for v in batch)
    return False


def _leaf_path(batch: Any) -> tuple:
    """Path of keys/indices to the first leaf whose length is the batch size."""
    path: list = []
    node = batch
    for _ in range(8):
        if isinstance(node, Mapping) and node:
            key = next(iter(node))
            path.append(key)
            node = node[key]
        elif isinstance(node, tuple) and node and _is_container(node[0]):
            path.append(0)
            node = node[0]
        elif (isinstance(node, list) and node and _is_container(node[0])
              and not isinstance(node[0], (tuple, Mapping))):
            path.append(0)  # a list of columns (default_collate keeps list samples as lists)
            node = node[0]
        else:
            break  # an array, or a list of samples (collate_fn=list): its length counts
    return tuple(path)


def _is_container(x: Any) -> bool:
    return isinstance(x, (Mapping, tuple, list)) or hasattr(x, "shape")


def make_sizer(first_batch: Any) -> Callable[[Any], int]:
    """Return ``f(batch) -> number of samples`` specialised to the structure of ``first_batch``
    (an array's first dimension, a container's first leaf's, a list's length, 1 a sample)."""
    if _is_one_sample(first_batch):
        return lambda b: 1
    path = _leaf_path(first_batch)
    leaf = first_batch
    for k in path:
        leaf = leaf[k]
    # torch's Tensor.__len__ is Python-level (~0.5 us); .shape[0] is a C getter (~0.13 us)
    ln = (lambda x: x.shape[0]) if getattr(leaf, "shape", None) else len
    try:
        ln(leaf)
    except TypeError:
        return lambda b: 1
    if not path:
        return ln
    if len(path) == 1:
        (k,) = path
        return lambda b: ln(b[k])
    if len(path) == 2:
        k1, k2 = path
        return lambda b: ln(b[k1][k2])

    def sizer(b: Any) -> int:
        for k in path:
            b = b[k]
        return ln(b)

    return sizer


def _leaves(batch: Any) -> Iterator[Any]:
    """What ``batch`` holds below its mappings, tuples and lists (arrays, tensors, bytes, ...)."""
    if isinstance(batch, Mapping):
        batch = batch.values()
    elif not isinstance(batch, (tuple, list)) or hasattr(batch, "nbytes"):
        yield batch
        return
    for v in batch:
        yield from _leaves(v)


def batch_nbytes(batch: Any) -> int:
    """Total bytes of the arrays, tensors, bytes and strings in ``batch`` (recursive)."""
    total = 0
    for leaf in _leaves(batch):
        if hasattr(leaf, "nbytes"):
            total += int(leaf.nbytes)
        elif isinstance(leaf, (bytes, bytearray, memoryview)):
            total += len(leaf)
        elif isinstance(leaf, str):
            total += len(leaf.encode())
    return total


def batch_tensors(batch: Any) -> int:
    """How many torch tensors ``batch`` holds (recursive): a worker hands each one over to
    the loop as a shared-memory segment of its own (the meter, ch. 13)."""
    return sum(isinstance(leaf, torch.Tensor) for leaf in _leaves(batch))
