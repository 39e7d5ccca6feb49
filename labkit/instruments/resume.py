"""Resume trials: stop a loader mid-epoch, restore it, count what went wrong (ch. 07, 08, 11).

A resumed epoch should deliver exactly the samples the uninterrupted epoch delivers, in the
same order. :func:`resume_trial` runs the epoch three ways (uninterrupted, resumed once,
resumed twice), pickles every saved state on the way (a real restart only keeps bytes), and
counts lost and duplicated samples against the uninterrupted run. Introduced in chapter 08;
the contract test ``check_resume`` asserts on it for every resumable dataset.
"""

from __future__ import annotations

import gc
import pickle
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..records.checkpoint import observation_name
from ..records.table import text_table
from .audits import ids_of


@dataclass(frozen=True)
class ResumeRun:
    """One way through the epoch: the ids delivered, and how they differ from the reference."""

    name: str
    ids: tuple[int, ...]
    lost: int        # reference deliveries that never came
    duplicated: int  # deliveries beyond what the reference delivered
    same_order: bool
    error: str | None = None  # what the resumed loader raised (``record_errors=True``)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.same_order and not self.error


@dataclass(frozen=True)
class ResumeTrial:
    """The result of :func:`resume_trial`: one :class:`ResumeRun` per way through the epoch."""

    name: str
    stops: tuple[int, ...]
    runs: tuple[ResumeRun, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    def rows(self) -> list[dict]:
        """One dict a run, for a table of several trials (``pd.DataFrame``). ``verdict``
        (``exact``, ``loses``, ``duplicates``, both, and an error's type without its message)
        is what a checked cell can pin: how many samples a library loses depends on its
        version and the seed."""
        out = []
        for r in self.runs:
            verdict = " and ".join(w for w, n in (("loses", r.lost),
                                                   ("duplicates", r.duplicated)) if n)
            error = r.error.split(":")[0] if r.error else None
            out.append({"loader": self.name, "run": r.name, "delivered": len(r.ids),
                        "lost": r.lost, "duplicated": r.duplicated, "same_order": r.same_order,
                        "verdict": (verdict or "exact") + (f" ({error})" if error else ""),
                        "error": r.error})
        return out

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint record (``ckpt.add(trial)``): samples ``lost`` and
        ``duplicated`` per run, the loader and run in each observation's config."""
        name = observation_name(name or "resume")
        obs = []
        for r in self.runs:
            cfg = {"loader": self.name, "run": r.name, **(config or {})}
            obs += [{"name": f"{name}.lost", "value": r.lost, "unit": "samples",
                     "config": cfg, "note": r.error},
                    {"name": f"{name}.duplicated", "value": r.duplicated, "unit": "samples",
                     "config": cfg, "note": None}]
        return obs

    def table(self) -> str:
        """Fixed-width, deterministic for a deterministic loader (``print(trial)``)."""
        columns = {"loader": "<", "run": "<", "delivered": ">", "lost": ">", "duplicated": ">",
                   "same order": "<"}
        cells = [[r["loader"], r["run"], r["delivered"], r["lost"], r["duplicated"],
                  ("yes" if r["same_order"] else "no")
                  + (f"  ({r['error']})" if r["error"] else "")] for r in self.rows()]
        return text_table(columns, cells, rule=True)

    def __str__(self) -> str:
        return self.table()


def _roundtrip(state):
    return pickle.loads(pickle.dumps(state))


def resumed_ids(make: Callable[[], object], breaks=(), *, state_of: Callable | None = None,
                load_state: Callable | None = None, ids_of: Callable = ids_of,
                record_errors: bool = False, after: tuple[list[int], object] | None = None,
                saved: list | None = None) -> tuple[list[int], str | None]:
    """One way through an epoch, stopped after each of ``breaks`` batches and resumed in a
    fresh loader from the saved state: the ids delivered, in order, and the error a restored
    loader raised (``record_errors``; else it propagates). No breaks: the uninterrupted epoch.

    Each stopped loader is dropped before the next is made (its workers stop).
    ``saved``, a list, gets ``(ids so far, state)`` at each stop; ``after``, one of those,
    goes on from that stop: the first loader starts from its state (that is resume 1).
    """
    out: list[int] = [] if after is None else list(after[0])
    state = None if after is None else _roundtrip(after[1])
    for resumes, stop in enumerate([*breaks, None], start=0 if after is None else 1):
        it = loader = None
        restored = state is not None
        try:
            loader = make()
            if restored:
                load_state(loader, state) if load_state else loader.load_state_dict(state)
            it = iter(loader)
            n = 0
            for batch in it:
                out += ids_of(batch)
                n += 1
                if stop is not None and n == stop:
                    break
            if stop is not None:
                state = _roundtrip(state_of(loader) if state_of else loader.state_dict())
                if saved is not None:
                    saved.append((list(out), state))
        except Exception as e:
            if not (record_errors and restored):
                raise
            last = (str(e).splitlines() or [""])[-1]  # an empty message has no lines
            error = f"{type(e).__name__} after resume {resumes}: {last[:60]}"
        else:
            continue
        finally:
            # the last references (a StatefulDataLoader keeps its iterator): torch stops
            # the workers here, stopped mid-epoch or not
            it = loader = None
        # An error re-raised from a worker sits in a reference cycle with the frames that
        # hold torch's iterator: its workers stop only when the cycle is collected.
        gc.collect()
        return out, error
    return out, None


def resume_trial(make: Callable[[], object], stops=(3, 2), *, name: str = "loader",
                 state_of: Callable | None = None, load_state: Callable | None = None,
                 ids_of: Callable = ids_of, record_errors: bool = False) -> ResumeTrial:
    """Run an epoch uninterrupted, resumed once, resumed twice; count lost/duplicated samples.

    ``make()`` returns a fresh loader with state (a restart: ``StatefulDataLoader``, an HF
    ``IterableDataset``). ``stops=(3, 2)`` stops after batch 3 (resumed once), and for
    resumed twice also 2 batches after the first resume. ``state_of``/``load_state`` save and
    restore (default: the loader's ``state_dict``/``load_state_dict``); ``ids_of(batch)``.
    ``record_errors``: a restored loader's error goes in its row (what it never delivered is
    lost) instead of being raised.
    """
    def run(breaks, **kw) -> tuple[list[int], str | None]:
        return resumed_ids(make, breaks, state_of=state_of, load_state=load_state,
                           ids_of=ids_of, record_errors=record_errors, **kw)

    stops = tuple(int(s) for s in stops)
    ref, _ = run(())
    runs = [ResumeRun("uninterrupted", tuple(ref), 0, 0, True)]
    want = Counter(ref)
    # both resumed runs begin with the same stop: the second goes on from the first's saved
    # state (five loaders, not six; under spawn each one's workers import torch afresh)
    saved: list = []
    resumed = {"resumed once": run(stops[:1], saved=saved)}
    resumed["resumed twice"] = run(stops[1:2], after=saved[0])
    for label, (got, error) in resumed.items():
        have = Counter(got)
        runs.append(ResumeRun(label, tuple(got), sum((want - have).values()),
                              sum((have - want).values()), got == ref, error))
    return ResumeTrial(name, stops, tuple(runs))
