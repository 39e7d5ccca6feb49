"""Batching variable-length documents by a token budget instead of a row count (chapter 11b).

A fixed ``batch_size`` pads every row to the longest in its batch, so one long document makes
its short neighbours mostly padding, and the batch's memory swings with its longest row.
fairseq's ``batch_by_size`` and HF's ``group_by_length`` do better: sort documents by length
within a buffer (a bounded window, so the order stays shuffled at larger scale), then fill
each batch while ``rows x longest <= max_tokens``. Batches hold similar lengths (little
padding), as many rows as the budget allows (fewer batches), and never more padded tokens
than the budget; the batches of a buffer are shuffled so lengths do not march in order.
"""

from __future__ import annotations

import numpy as np


def budget_batches(lengths, max_tokens: int, *, buffer_size: int = 1024,
                   seed: int = 0) -> list[np.ndarray]:
    """Indices of ``lengths`` grouped so each batch's ``rows x longest <= max_tokens``.

    Each ``buffer_size`` run of documents is sorted by length and cut greedily; the batches of
    a buffer come out in a seeded random order. Every index lands in exactly one batch.
    """
    lengths = np.asarray(lengths)
    if len(lengths) and int(lengths.max()) > max_tokens:
        raise ValueError(f"a document of {int(lengths.max())} tokens exceeds max_tokens="
                         f"{max_tokens}: cut documents to the context first")
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for lo in range(0, len(lengths), buffer_size):
        idx = np.arange(lo, min(lo + buffer_size, len(lengths)))
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        batches, first, longest = [], 0, 0
        for j, i in enumerate(idx.tolist()):
            longest = max(longest, int(lengths[i]))
            if (j + 1 - first) * longest > max_tokens:  # sorted: this one is the longest
                batches.append(idx[first:j])
                first, longest = j, int(lengths[i])
        batches.append(idx[first:])
        out += [batches[k] for k in rng.permutation(len(batches))]
    return out


def batch_padding(lengths, batches) -> dict:
    """Padding and size figures of ``batches`` (index arrays), each padded to its longest.

    Returns ``batches``, ``padding`` (padded slots / all slots), ``rows_min``/``rows_max``
    (rows per batch) and ``slots_max`` (the largest ``rows x longest``, the memory peak).
    """
    lengths = np.asarray(lengths)
    real = sum(int(lengths[b].sum()) for b in batches)
    slots = [len(b) * int(lengths[b].max()) for b in batches]
    rows = [len(b) for b in batches]
    return {"batches": len(batches), "padding": 1 - real / sum(slots) if slots else 0.0,
            "rows_min": min(rows, default=0), "rows_max": max(rows, default=0),
            "slots_max": max(slots, default=0)}
