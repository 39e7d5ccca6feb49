"""Random (context + 1)-token windows from a memory-mapped token file, three ways (chapter 11).

nanoGPT's ``get_batch`` draws ``batch_size`` random starts and stacks one window per start:
a Python loop with a cast per window. The same bytes come faster as one vectorized gather
(fancy indexing with a (batch, context + 1) index array), as one slice per window into a
buffer and a single cast (or none: the cast can happen on the device), or as rows of a
window view (``sliding_window_view``: one numpy call, no index array, no Python per window).
``copy_batch`` copies as many contiguous bytes: the ceiling every window sampler is compared to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided


def window_starts(n_tokens: int, context: int, batch_size: int,
                  rng: np.random.Generator) -> np.ndarray:
    """``batch_size`` random starts, each leaving room for context + 1 tokens."""
    return rng.integers(0, n_tokens - context - 1, batch_size)


def loop_batch(tokens: np.ndarray, starts: np.ndarray, context: int):
    """nanoGPT's pattern: one cast and one tensor per window, then a stack."""
    x = torch.stack([torch.from_numpy(tokens[i:i + context].astype(np.int64)) for i in starts])
    y = torch.stack([torch.from_numpy(tokens[i + 1:i + 1 + context].astype(np.int64))
                     for i in starts])
    return x, y


def gather_batch(tokens: np.ndarray, starts: np.ndarray, context: int):
    """One fancy-index gather of all windows, one cast; x and y are views of the same rows."""
    rows = torch.from_numpy(tokens[starts[:, None] + np.arange(context + 1)].astype(np.int64))
    return rows[:, :-1], rows[:, 1:]


def slice_batch(tokens: np.ndarray, starts: np.ndarray, context: int, cast: bool = True):
    """One slice copied per window into a buffer of the file's dtype, then one cast.

    The slices are taken from a plain ndarray view of the map: slicing an ``np.memmap``
    itself builds a memmap object per slice, several times the cost of the copy at this size.
    With ``cast=False`` the rows stay in the file's dtype (cast later, on the device): a
    quarter of the bytes of int64 to copy and to transfer.
    """
    flat = tokens.view(np.ndarray)
    buf = np.empty((len(starts), context + 1), tokens.dtype)
    for j, i in enumerate(starts.tolist()):
        buf[j] = flat[i:i + context + 1]
    rows = torch.from_numpy(buf.astype(np.int64) if cast else buf)
    return rows[:, :-1], rows[:, 1:]


def view_batch(tokens: np.ndarray, starts: np.ndarray, context: int, cast: bool = False):
    """Rows ``starts`` of the window view of ``tokens``: one numpy gather, no Python per window.

    The view is a ``(n - context, context + 1)`` array whose row ``i`` is the window at ``i``:
    strides ``(itemsize, itemsize)``, nothing copied; indexing it with the starts copies the
    rows in one call. It is what ``sliding_window_view(tokens, context + 1)`` returns, built
    here with ``as_strided`` (read-only) because that function's argument checks cost several
    microseconds a call, a visible share of a 256 KB batch. Ids stay in the file's dtype
    unless ``cast`` (``labkit bench tokens`` times this against a plain copy).
    """
    flat = tokens.view(np.ndarray)
    view = as_strided(flat, (len(flat) - context, context + 1), flat.strides * 2,
                      writeable=False)
    rows = view[starts]
    rows = torch.from_numpy(rows.astype(np.int64) if cast else rows)
    return rows[:, :-1], rows[:, 1:]


def copy_batch(tokens: np.ndarray, start: int, batch_size: int, context: int):
    """The ceiling: the same number of bytes, one contiguous copy (no cast, no gather)."""
    n = batch_size * (context + 1)
    return torch.from_numpy(np.array(tokens[start:start + n]).reshape(batch_size, context + 1))


SAMPLERS: dict[str, Callable] = {"python loop": loop_batch, "vectorized gather": gather_batch,
                                 "memmap slices": slice_batch,
                                 "slices, no cast": partial(slice_batch, cast=False),
                                 "window view, no cast": view_batch}


def random_windows(tokens: np.ndarray, context: int, batch_size: int, batches: int,
                   how: str = "vectorized gather", seed: int = 0) -> Iterator:
    """``batches`` batches of random windows by sampler ``how`` (a key of SAMPLERS, or
    ``"plain copy"``): a fresh iterable for ``lk.measure``; the same seed, the same starts."""
    rng = np.random.default_rng(seed)
    n = len(tokens)
    for _ in range(batches):
        if how == "plain copy":
            span = batch_size * (context + 1)
            yield copy_batch(tokens, int(rng.integers(0, n - span)), batch_size, context)
        else:
            yield SAMPLERS[how](tokens, window_starts(n, context, batch_size, rng), context)


def tokens_needed(params: float, accelerator_flops: float, mfu: float = 0.4,
                  accelerators: int = 1) -> float:
    """Tokens/s a training run consumes: FLOP/s actually used / (6 x params FLOPs per token).

    6N is the usual estimate of forward + backward FLOPs per token for a dense transformer
    with N parameters (attention's own FLOPs left out, small at modest contexts).
    """
    return accelerators * accelerator_flops * mfu / (6.0 * params)
