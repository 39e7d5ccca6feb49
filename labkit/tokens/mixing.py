"""Mixing sources by weight: a deterministic blended index vs random choice (chapter 11d).

Megatron's blended dataset decides, step by step, which source the next sample comes from:
the one furthest behind its target share (``weight x steps so far - taken``), with no
randomness, so every prefix of the mix is as close to the weights as whole samples allow, and
the index is a pure function of the weights (nothing to save for a resume). Seeded random
choice is right on average only: short prefixes (one batch, the first minutes of a run)
drift by about ``sqrt(w (1 - w) / steps)``.
"""

from __future__ import annotations

import numpy as np


def _weights(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or len(w) == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {weights!r}")
    return w / w.sum()


def blended_index(weights, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Megatron's rule: each step takes from the source furthest behind its target.

    Returns ``(source, within)``: the source of each step and the running count of samples
    taken from that source before it (the sample to read from it).
    """
    w = _weights(weights)
    taken = np.zeros(len(w), np.int64)
    source = np.empty(steps, np.int64)
    within = np.empty(steps, np.int64)
    for i in range(steps):
        s = int(np.argmax(w * max(i, 1) - taken))  # ties: the first source, as Megatron
        source[i], within[i] = s, taken[s]
        taken[s] += 1
    return source, within


def random_mix(weights, steps: int, seed: int = 0) -> np.ndarray:
    """Seeded random choice of source per step (what ``interleave_datasets`` does)."""
    w = _weights(weights)
    return np.random.default_rng(seed).choice(len(w), size=steps, p=w)


def prefix_error(source: np.ndarray, weights) -> np.ndarray:
    """For every prefix of steps, the largest |realized share - weight| over the sources."""
    w = _weights(weights)
    steps = np.arange(1, len(source) + 1)[:, None]
    counts = np.cumsum(np.eye(len(w), dtype=np.int64)[source], axis=0)
    return np.abs(counts / steps - w).max(axis=1)
