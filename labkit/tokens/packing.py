"""Packing documents into fixed-length rows, and what each packer costs (chapter 11b).

A packer turns document lengths into rows of at most ``context`` tokens; each row is a list
of segments ``(doc, start, length)``. Pad-to-max and pad-to-longest give every document its
own row (cropped at the context); concatenate-then-split cuts one long stream; the bin packers
(greedy-pad, first-fit decreasing, best-fit decreasing) first cut documents longer than the
context into context-sized chunks, then place the chunks in rows whole, so nothing is
cropped and a row never starts mid-document except at a chunk boundary.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..records.table import text_table


@dataclass(frozen=True)
class Packing:
    """Rows of segments ``(doc, start, length)`` and each row's padded length."""

    method: str
    context: int
    rows: list[list[tuple[int, int, int]]]
    row_lengths: list[int]

    def stats(self, lengths) -> dict:
        """Padding, cropping and cross-document figures of this packing (fractions)."""
        lengths = np.asarray(lengths)
        total = int(lengths.sum())
        real = sum(s[2] for row in self.rows for s in row)
        slots = sum(self.row_lengths)
        pairs = cross = labels = cross_labels = mid = 0
        for row in self.rows:
            n = sum(s[2] for s in row)
            pairs += n * (n + 1) // 2
            cross += n * (n + 1) // 2 - sum(s[2] * (s[2] + 1) // 2 for s in row)
            labels += max(n - 1, 0)
            cross_labels += len(row) - 1  # the last token of each segment but the row's last
            mid += bool(row) and row[0][1] > 0
        return {"method": self.method, "rows": len(self.rows),
                "padding": 1 - real / slots if slots else 0.0,
                "cropped": 1 - real / total if total else 0.0,
                "mid_document_rows": mid / len(self.rows) if self.rows else 0.0,
                "cross_attention_pairs": cross / pairs if pairs else 0.0,
                "cross_labels": cross_labels / labels if labels else 0.0}


def _chunks(lengths, context: int):
    """Documents cut into context-sized chunks: (doc, start, length), in document order."""
    out = []
    for d, n in enumerate(int(x) for x in lengths):
        out += [(d, s, min(context, n - s)) for s in range(0, n, context)]
    return out


def pad_to_max(lengths, context: int) -> Packing:
    """One document per row, cropped at the context, every row padded to the context."""
    rows = [[(d, 0, min(int(n), context))] for d, n in enumerate(lengths)]
    return Packing("pad to max", context, rows, [context] * len(rows))


def pad_to_longest(lengths, context: int, batch_size: int = 8) -> Packing:
    """One document per row, cropped; rows padded to the longest row of their batch."""
    rows = [[(d, 0, min(int(n), context))] for d, n in enumerate(lengths)]
    row_lengths = []
    for lo in range(0, len(rows), batch_size):
        longest = max(r[0][2] for r in rows[lo:lo + batch_size])
        row_lengths += [longest] * len(rows[lo:lo + batch_size])
    return Packing("pad to longest in batch", context, rows, row_lengths)


def concat_split(lengths, context: int) -> Packing:
    """Every document back to back, cut every ``context`` tokens (nanoGPT, Megatron)."""
    rows, row, room = [], [], context
    for d, n in enumerate(int(x) for x in lengths):
        start = 0
        while start < n:
            take = min(room, n - start)
            row.append((d, start, take))
            start, room = start + take, room - take
            if room == 0:
                rows.append(row)
                row, room = [], context
    if row:
        rows.append(row)
    return Packing("concatenate, split", context, rows, [context] * len(rows))


def greedy_pad(lengths, context: int) -> Packing:
    """Chunks in document order; a chunk that does not fit closes the row (padded)."""
    rows, row, room = [], [], context
    for seg in _chunks(lengths, context):
        if seg[2] > room:
            rows.append(row)
            row, room = [], context
        row.append(seg)
        room -= seg[2]
    if row:
        rows.append(row)
    return Packing("greedy pad", context, rows, [context] * len(rows))


def first_fit_decreasing(lengths, context: int) -> Packing:
    """Chunks longest first, each into the first row with room (a new row if none).

    The rows' remaining room sits in a max segment tree whose unused leaves hold a whole
    context, so "the leftmost row with room" is one walk down the tree: O(log rows) a chunk.
    """
    segs = sorted(_chunks(lengths, context), key=lambda s: -s[2])
    size = 1
    while size < max(len(segs), 1):
        size *= 2
    tree = [context] * (2 * size)  # tree[1] is the root; leaves tree[size + r] are rows
    rows: list[list] = []
    for seg in segs:
        need, i = seg[2], 1
        while i < size:  # the left child if it has room, else the right one
            i = 2 * i if tree[2 * i] >= need else 2 * i + 1
        r = i - size
        if r == len(rows):
            rows.append([])
        rows[r].append(seg)
        tree[i] -= need
        i //= 2
        while i:
            tree[i] = max(tree[2 * i], tree[2 * i + 1])
            i //= 2
    return Packing("first-fit decreasing", context, rows, [context] * len(rows))


def best_fit_decreasing(lengths, context: int) -> Packing:
    """Chunks longest first, each into the row whose room fits it most tightly.

    Rows are kept in buckets by remaining room, with a sorted list of the rooms that have a
    row, so finding the tightest row is a bisect (fast enough for a million documents).
    """
    segs = sorted(_chunks(lengths, context), key=lambda s: -s[2])
    rows: list[list] = []
    by_room: dict[int, list[int]] = {}
    rooms: list[int] = []  # sorted, each with a non-empty bucket
    for seg in segs:
        k = bisect.bisect_left(rooms, seg[2])
        if k < len(rooms):
            have = rooms[k]
            r = by_room[have].pop()
            if not by_room[have]:
                rooms.pop(k)
        else:
            have, r = context, len(rows)
            rows.append([])
        rows[r].append(seg)
        left = have - seg[2]
        if left > 0:
            if not by_room.get(left):
                by_room[left] = []
                bisect.insort(rooms, left)
            by_room[left].append(r)
    return Packing("best-fit decreasing", context, rows, [context] * len(rows))


PACKERS = {"pad to max": pad_to_max, "pad to longest in batch": pad_to_longest,
           "concatenate, split": concat_split, "greedy pad": greedy_pad,
           "first-fit decreasing": first_fit_decreasing,
           "best-fit decreasing": best_fit_decreasing}


def pack(lengths, context: int, method: str = "best-fit decreasing") -> Packing:
    """Pack documents of ``lengths`` tokens into rows of ``context`` by ``method`` (PACKERS)."""
    if method not in PACKERS:
        raise ValueError(f"unknown packing method {method!r}; known: {', '.join(PACKERS)}")
    return PACKERS[method](lengths, context)


def format_packing(stats: list[dict]) -> str:
    """A fixed-width table of :meth:`Packing.stats` rows (deterministic: no timings)."""
    return text_table(
        {"method": "<", "rows": ">", "padding": ">.1%", "cropped": ">.1%", "mid-doc": ">.1%",
         "x-doc attn": ">.1%", "x-doc labels": ">.2%"},
        [[s["method"], s["rows"], s["padding"], s["cropped"], s["mid_document_rows"],
          s["cross_attention_pairs"], s["cross_labels"]] for s in stats])
