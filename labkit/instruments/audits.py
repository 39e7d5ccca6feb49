"""Exactly-once audit: which samples each rank and worker delivered (ch. 03-09, 11-16).

A loader that silently repeats or drops samples still trains, so the mistake hides. The
audit makes it visible: give it the ids each source (a rank, a worker, ``rank1/worker0``)
delivered and the ids that should have been delivered, and it counts. Introduced in
chapter 03; chapters 04, 06-08 and the contract tests reuse it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..records.checkpoint import observation_name
from ..records.table import text_table


def id_list(x) -> list[int]:
    """Sample ids from an int, a sequence, a numpy array or a tensor."""
    if hasattr(x, "detach"):  # torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return [int(v) for v in x.reshape(-1)]
    if isinstance(x, (int, np.integer)):
        return [int(x)]
    return [int(v) for v in x]


def ids_of(batch) -> list[int]:
    """The sample ids of a batch, the kit's one reading: ``batch["id"]`` for a dict, else
    ``batch[1]`` (a ``(values, ids)`` pair), as a list of ints (chapters 03-16)."""
    return id_list(batch["id"] if isinstance(batch, dict) else batch[1])


def deliveries(loader) -> list[tuple[str, list[int]]]:
    """One epoch of a loader over a ``tag=True`` dataset as ``(source, ids)`` pairs.

    Feed the result to ``lk.audit(pairs, expected)``. The iterator is dropped at the end
    (``del it``), so its workers stop even if iteration fails.
    """
    out: dict[str, list[int]] = {}
    it = iter(loader)
    try:
        for batch in it:
            ids = ids_of(batch)
            srcs = batch["source"]
            if isinstance(srcs, str):  # one sample, or a batch the dataset made itself
                srcs = [srcs] * len(ids)
            for src, i in zip(srcs, ids, strict=True):
                out.setdefault(src, []).append(i)
    finally:
        del it
    return sorted(out.items())


@dataclass(frozen=True)
class Audit:
    """The result of :func:`audit`. ``ok`` is True when every id came exactly once."""

    expected: int
    delivered: int
    unique: int
    missing_ids: tuple[int, ...]
    duplicate_ids: tuple[int, ...]   # ids delivered more than once, sorted
    unexpected_ids: tuple[int, ...]  # ids that should not have come at all
    per_source: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        """Extra deliveries: samples delivered beyond the first time of their id."""
        return self.delivered - self.unique

    @property
    def missing(self) -> int:
        return len(self.missing_ids)

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.missing == 0 and not self.unexpected_ids

    def table(self, max_ids: int = 8) -> str:
        """A fixed-width table, one row per source, then the totals; deterministic."""
        rows = [[src, row["samples"], row["unique"], row["shared"]]
                for src, row in self.per_source.items()]
        rows.append(["total", self.delivered, self.unique,
                     sum(r["shared"] for r in self.per_source.values())])
        lines = [text_table({"source": "<", "samples": ">8", "unique": ">8", "shared": ">8"},
                            rows, rule=True)]
        lines.append(f"expected {self.expected}, duplicates {self.duplicates}, "
                     f"missing {self.missing}" + (f", unexpected {len(self.unexpected_ids)}"
                                                  if self.unexpected_ids else "")
                     + ("  -> exactly once" if self.ok else ""))

        def some(ids):
            shown = ", ".join(map(str, ids[:max_ids]))
            return shown + (f", ... ({len(ids)} in all)" if len(ids) > max_ids else "")

        if self.duplicate_ids:
            lines.append(f"duplicated ids: {some(self.duplicate_ids)}")
        if self.missing_ids:
            lines.append(f"missing ids: {some(self.missing_ids)}")
        if self.unexpected_ids:
            lines.append(f"unexpected ids: {some(self.unexpected_ids)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint record (``ckpt.add(audit, "split")``): the
        ``expected``, ``delivered``, ``duplicates`` and ``missing`` counts, in samples."""
        name = observation_name(name or "audit")
        counts = {"expected": self.expected, "delivered": self.delivered,
                  "duplicates": self.duplicates, "missing": self.missing}
        return [{"name": f"{name}.{k}", "value": v, "unit": "samples",
                 "config": dict(config or {}), "note": None} for k, v in counts.items()]


def audit(deliveries, expected) -> Audit:
    """Count what each source delivered against the ids that should have come.

    ``deliveries``: a mapping ``source -> ids``, an iterable of ``(source, ids)`` pairs (ids:
    an int, a sequence, an array or a tensor; a source may repeat), or plain ids (source
    ``"all"``). ``expected``: the number of samples (ids ``0..n-1``) or the ids themselves.
    ``print()`` the :class:`Audit` for the per-source table; ``shared`` counts a source's
    deliveries whose id was delivered more than once in total.
    """
    if isinstance(deliveries, Mapping):
        pairs: Iterable = deliveries.items()
    else:
        items = list(deliveries)
        # (source, ids) pairs; lists too, as JSON gives them back
        is_pair = all(isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str)
                      for p in items)
        pairs = items if (items and is_pair) else [("all", items)]
    per: dict[str, Counter] = {}
    for src, ids in pairs:
        per.setdefault(str(src), Counter()).update(id_list(ids))
    total: Counter = Counter()
    for c in per.values():
        total.update(c)
    whole = isinstance(expected, (int, np.integer))
    want = set(range(expected)) if whole else set(id_list(expected))
    got = set(total)
    per_source = {
        src: {"samples": sum(c.values()), "unique": len(c),
              "shared": sum(n for i, n in c.items() if total[i] > 1)}
        for src, c in sorted(per.items())
    }
    return Audit(
        expected=len(want),
        delivered=sum(total.values()),
        unique=len(got),
        missing_ids=tuple(sorted(want - got)),
        duplicate_ids=tuple(sorted(i for i, n in total.items() if n > 1)),
        unexpected_ids=tuple(sorted(got - want)),
        per_source=per_source,
    )
