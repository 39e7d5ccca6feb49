"""Random token windows for ``labkit ceilings``' token_windows row (chapter 11's samplers).

Chapter 11 types these samplers in its cells; this copy stays only while
:mod:`labkit.tools.ceilings` imports ``SAMPLERS`` and ``random_windows`` (the roofline's
rewrite drops that import, and then this module goes).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided


def _split(rows: torch.Tensor):
    return rows[:, :-1], rows[:, 1:]


def _gather(tokens, starts, context):
    """One fancy-index gather of every window, one cast."""
    return _split(torch.from_numpy(tokens[starts[:, None] + np.arange(context + 1)]
                                   .astype(np.int64)))


def _slices(tokens, starts, context, cast=True):
    """One slice per window into a buffer of the file's dtype, then one cast (or none)."""
    flat = tokens.view(np.ndarray)
    buf = np.empty((len(starts), context + 1), tokens.dtype)
    for j, i in enumerate(starts.tolist()):
        buf[j] = flat[i:i + context + 1]
    return _split(torch.from_numpy(buf.astype(np.int64) if cast else buf))


def _view(tokens, starts, context):
    """Rows ``starts`` of the window view (``as_strided``), ids left in the file's dtype."""
    flat = tokens.view(np.ndarray)
    view = as_strided(flat, (len(flat) - context, context + 1), flat.strides * 2,
                      writeable=False)
    return _split(torch.from_numpy(view[starts]))


SAMPLERS = {"vectorized gather": _gather, "memmap slices": _slices,
            "slices, no cast": lambda t, s, c: _slices(t, s, c, cast=False),
            "window view, no cast": _view}


def random_windows(tokens: np.ndarray, context: int, batch_size: int, batches: int,
                   how: str = "vectorized gather", seed: int = 0) -> Iterator:
    """``batches`` batches of random windows by sampler ``how`` (a key of SAMPLERS)."""
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        yield SAMPLERS[how](tokens, rng.integers(0, len(tokens) - context - 1, batch_size),
                            context)
