"""This machine's data-loading roofline: ceilings, and pipelines placed under them (ch. 00-16).

A compute roofline bounds a kernel by the machine's peak FLOP/s and its memory bandwidth.
Data loading has more ceilings, and :mod:`.ceilings` measures each on this machine with its
spread (``labkit roofline``): a cold and a page-cache read, memcpy, the hand-over of a batch
from a worker to the loop, the DataLoader's own cost per sample and per batch, a small
file opened and read, JPEG decode and augmentation per core, video decode per core, random
token windows, one S3 connection, host-to-device and GPU decode.

Each ceiling is a rate of one kind of work (bytes, pixels, batches, requests). A pipeline
says how much of each its samples need (:meth:`Roofline.place`); each stage then allows
``rate / work per sample`` samples/s, the lowest of them *binds* the pipeline, and the
measured rate over it is how close the pipeline runs to its ceiling. The prediction adds
the stages that share a process (the loop's, or each worker's) and shares the cores among
all the CPU work: the slowest of those sums, not the slowest stage alone, is what the
pipeline should reach. Chapter 16's tuned loader, for instance (a batch of two tensors,
images and labels: ``handover_batch`` is a batch of one, ``handover_tensor`` each more)::

    roof = lk.tools.measure_roofline(["jpeg_decode", "augment", "handover_batch",
                                      "handover_tensor", "handover_bytes"])
    placed = roof.place(m_tuned, {"jpeg_decode": 512 * 512, "augment": 224 * 224,
                                  "handover_batch": 1 / 64, "handover_tensor": 1 / 64,
                                  "handover_bytes": 3 * 224 * 224},
                        workers=2, in_workers=("jpeg_decode", "augment"))
    print(placed)   # 6,100 samples/s: 83 % of JPEG decode per core x 2 cores ...
    ckpt.add(placed)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LabkitError
from ..facilities import usable_cores
from ..records.checkpoint import Checkpoint
from ..scale import resolve_scale
from . import ceilings_media  # noqa: F401 (registers the decode ceilings)
from .ceilings import CEILINGS, Missing, forget

# where a ceiling's work runs: "core" = CPU work that runs where the pipeline puts it (the
# loop's process, or its workers: per core, x the cores); "main" = in the loop's own
# process whatever the workers do (taking a batch from a worker); "device" = a disk, a
# connection or the GPU, which overlaps with CPU work and does not grow with the cores
WHERE = ("core", "main", "device")
UNITS = {"B": "B/s", "px": "px/s", "batch": "batches/s", "request": "requests/s",
         "sample": "samples/s", "file": "files/s", "tensor": "tensors/s"}


@dataclass(frozen=True)
class Ceiling:
    """One measured ceiling: ``rate`` units of work per second for the whole machine.

    For a ``core`` ceiling ``rate = per_core x cores``; ``lo`` and ``hi`` are the slowest
    and fastest trial, scaled the same way.
    """

    name: str
    label: str
    work: str           # a key of UNITS: what one unit of ``rate`` is
    where: str          # a member of WHERE
    rate: float
    lo: float
    hi: float
    trials: int
    how: str
    cores: int = 1      # the multiplier of a core ceiling (1 for the others)
    covers: tuple[str, ...] = ()   # stages whose time this one's measurement includes

    @property
    def unit(self) -> str:
        return UNITS[self.work]

    @property
    def per_process(self) -> float:
        """What one process gets: the per-core figure of a core ceiling, else the rate."""
        return self.rate / self.cores

    def describe(self) -> str:
        each = f" ({_num(self.per_process)} per core x {self.cores})" if self.where == "core" \
            else ""
        return (f"{self.label}: {_num(self.rate)} {self.unit}{each}, trials "
                f"{_num(self.lo)}-{_num(self.hi)}")


def _num(x: float) -> str:
    """``1.2 G``, ``340 M``, ``5.1 k``, ``12``: ceilings span ten orders of magnitude."""
    for div, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


@dataclass
class Placement:
    """A pipeline under the roofline: what it measured, what binds it, what was predicted.

    ``limits`` is what each stage alone allows (samples/s, its parallelism included);
    ``bound`` the stage whose limit is lowest; ``fraction = measured / limits[bound]``;
    ``predicted`` the stages' prediction (see :meth:`Roofline.place`); ``error`` is
    ``measured / predicted - 1``.
    """

    name: str
    measured: float
    bytes_per_sample: float | None
    workers: int
    limits: dict[str, float]
    labels: dict[str, str]
    predicted: float
    predicted_by: str
    missing: dict[str, str] = field(default_factory=dict)
    covered: tuple[str, ...] = ()   # stages drawn, but inside another stage's time

    @property
    def bound(self) -> str:
        return min(self.limits, key=self.limits.get)

    @property
    def next_bound(self) -> str | None:
        """The stage that would bind next, were the binding one lifted (None: only one)."""
        ranked = sorted(self.limits, key=self.limits.get)
        return ranked[1] if len(ranked) > 1 else None

    @property
    def fraction(self) -> float:
        return self.measured / self.limits[self.bound]

    @property
    def error(self) -> float:
        return self.measured / self.predicted - 1

    def __str__(self) -> str:
        b = self.bound
        text = (f"{self.name}: {self.measured:,.0f} samples/s, {self.fraction:.0%} of "
                f"{self.labels[b]} ({self.limits[b]:,.0f} samples/s); predicted "
                f"{self.predicted:,.0f} samples/s ({self.predicted_by}), measured "
                f"{self.error:+.0%}")
        if self.missing:
            text += "; not in the prediction: " + "; ".join(
                f"{k} ({v})" for k, v in self.missing.items())
        return text

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        key = f"roofline.{name or self.name}"
        cfg = {"workers": self.workers, "bytes_per_sample": self.bytes_per_sample,
               "limits": {k: round(v, 1) for k, v in self.limits.items()},
               "predicted_by": self.predicted_by, "covered": list(self.covered),
               **(config or {})}
        rows = [(f"{key}.samples_per_s", self.measured, "samples/s"),
                (f"{key}.bound", self.bound, ""),
                (f"{key}.bound_samples_per_s", self.limits[self.bound], "samples/s"),
                (f"{key}.fraction", self.fraction, "ratio"),
                (f"{key}.predicted_samples_per_s", self.predicted, "samples/s"),
                (f"{key}.prediction_error", self.error, "ratio")]
        return [{"name": n, "value": v, "unit": u, "config": cfg, "note": None}
                for n, v, u in rows]


@dataclass
class Roofline:
    """The ceilings measured on this machine, and why any is missing (``labkit roofline``)."""

    ceilings: dict[str, Ceiling]
    missing: dict[str, str]
    cores: int
    scale: str

    def __getitem__(self, name: str) -> Ceiling:
        if name in self.ceilings:
            return self.ceilings[name]
        why = self.missing.get(name, "not measured in this roofline")
        raise KeyError(f"ceiling {name!r}: {why}")

    def add(self, name: str, label: str, trials: Iterable[float], *, work: str = "sample",
            where: str = "main", how: str = "measured in the chapter",
            covers: Iterable[str] = ()) -> Roofline:
        """A ceiling measured by the chapter itself, e.g. the train step alone in samples/s
        (``where="main"``: it runs in the loop's process; ``"device"`` for a GPU step).
        ``covers``: the ceilings its time includes (a dataset timed alone, in chapters 02-08
        and 12, covers its read): a placement draws them, dotted, but does not add them."""
        trials = [float(x) for x in trials]
        if work not in UNITS or where not in WHERE or not trials or min(trials) <= 0:
            raise ValueError(f"ceiling {name!r}: work in {sorted(UNITS)}, where in {WHERE}, "
                             f"and positive trials, not {work!r}, {where!r}, {trials!r}")
        covers = tuple(covers)
        if name in covers:
            raise ValueError(f"ceiling {name!r} cannot cover itself")
        k = self.cores if where == "core" else 1
        self.ceilings[name] = Ceiling(name, label, work, where, k * statistics.median(trials),
                                      k * min(trials), k * max(trials), len(trials), how, k,
                                      covers)
        self.missing.pop(name, None)
        return self

    def table(self) -> str:
        lines = [f"{'ceiling':<22}{'rate':>11} {'unit':<11}{'trials: slowest-fastest':>25}"
                 f"  how"]
        for c in self.ceilings.values():
            each = f"  ({_num(c.per_process)}/core x {c.cores})" if c.where == "core" else ""
            lines.append(f"{c.name:<22}{_num(c.rate):>11} {c.unit:<11}"
                         f"{_num(c.lo) + '-' + _num(c.hi):>25}  {c.how}{each}")
        for name, why in self.missing.items():
            lines.append(f"{name:<22}{'missing':>11}  {why}")
        return "\n".join(lines)

    __str__ = table

    def as_dict(self) -> dict:
        """What ``labkit roofline --json`` prints."""
        return {"cores": self.cores, "scale": self.scale,
                "ceilings": {k: {"label": c.label, "rate": c.rate, "unit": c.unit,
                                 "lo": c.lo, "hi": c.hi, "trials": c.trials,
                                 "where": c.where, "cores": c.cores,
                                 "per_process": c.per_process, "how": c.how}
                             for k, c in self.ceilings.items()},
                "missing": dict(self.missing)}

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Every ceiling as ``ceiling.NAME`` (its spread in the config), every missing one
        as the text ``missing`` with the reason in its note: for :meth:`Checkpoint.add`."""
        out = []
        for k, c in self.ceilings.items():
            out.append({"name": f"ceiling.{k}", "value": c.rate, "unit": c.unit,
                        "config": {"lo": c.lo, "hi": c.hi, "trials": c.trials, "where": c.where,
                                   "cores": c.cores, "label": c.label, **(config or {})},
                        "note": c.how})
        for k, why in self.missing.items():
            out.append({"name": f"ceiling.{k}", "value": "missing", "unit": "",
                        "config": dict(config or {}), "note": why[:200]})
        return out

    def write(self, records_dir=None) -> Path:
        """This roofline as the record ``roofline`` (``labkit report`` reads it)."""
        ck = Checkpoint("roofline", scale=self.scale, records_dir=records_dir)
        ck.constraint(f"{self.cores} usable cores; each ceiling measured alone, in one "
                      "process unless it says otherwise")
        return ck.add(self).write(print_summary=False)

    def place(self, pipeline, per_sample: dict[str, float], *, workers: int = 0,
              in_workers: Iterable[str] = (), measured: float | None = None,
              bytes_per_sample: float | None = None) -> Placement:
        """Put a pipeline under these ceilings: how close it runs, what binds it, what its
        stages predict.

        Args:
            pipeline: a :class:`~labkit.instruments.measurement.Measurement` (``lk.measure``'s
                result: its name, samples/s and bytes per sample), or a name with
                ``measured`` (samples/s).
            per_sample: ``{ceiling: work per sample}`` in each ceiling's unit: bytes read,
                pixels decoded, ``1 / batch_size`` batches handed over, requests.
            workers: the DataLoader's ``num_workers``.
            in_workers: the ``core`` stages that run in the workers (the rest of the core
                stages, and every ``main`` one, run in the loop's process).
            bytes_per_sample: the sample's bytes as the loop receives it (recorded with the
                placement; a Measurement brings its own).

        What each stage allows alone: ``per core / work`` in the process it runs in
        (``x min(workers, cores)`` in the workers), ``rate / work`` for a device. The
        prediction is the lowest of: the loop's process (the sum of its stages' seconds),
        the workers (the sum of theirs, over ``min(workers, cores)``), all the CPU work
        sharing the cores (every core and main stage's seconds, over the cores) and each
        device. A stage whose ceiling is missing here is left out of both, and named; one
        that another stage present *covers* (:meth:`add`) is drawn but not summed.
        """
        if hasattr(pipeline, "samples_per_s"):
            name, measured = pipeline.name, pipeline.samples_per_s
            if bytes_per_sample is None and getattr(pipeline, "bytes_per_s", None):
                bytes_per_sample = pipeline.bytes_per_s / pipeline.samples_per_s
        elif measured is None:
            raise ValueError(f"{pipeline!r}: give a Measurement, or a name and measured=")
        else:
            name = str(pipeline)
        if not per_sample:
            raise ValueError(f"{name!r}: per_sample names no ceiling")
        if not (measured > 0 and math.isfinite(measured)):
            raise ValueError(f"{name!r}: measured must be a positive rate, not {measured!r}")
        in_workers = set(in_workers)
        unknown = in_workers - set(per_sample)
        if unknown:
            raise ValueError(f"{name!r}: in_workers names {sorted(unknown)}, which "
                             "per_sample does not")
        if in_workers and not workers:
            raise ValueError(f"{name!r}: in_workers needs workers >= 1")
        parallel = min(workers, self.cores) if workers else 1
        covered = {c for stage in per_sample if stage in self.ceilings
                   for c in self.ceilings[stage].covers if c in per_sample}
        limits, labels, missing = {}, {}, {}
        t_main = t_workers = 0.0
        device = {}
        for stage, work in per_sample.items():
            if stage not in self.ceilings:
                missing[stage] = self.missing.get(stage, "not measured in this roofline")
                continue
            c = self.ceilings[stage]
            if work <= 0:
                raise ValueError(f"{name!r}: work per sample for {stage!r} must be > 0")
            if c.where == "core" and stage in in_workers:
                t_workers += 0 if stage in covered else work / c.per_process
                limits[stage] = parallel * c.per_process / work
                labels[stage] = f"{c.label} per core x {parallel}"
            elif c.where in ("core", "main"):
                if stage in in_workers:
                    raise ValueError(f"{name!r}: {stage!r} always runs in the loop's process")
                t_main += 0 if stage in covered else work / c.per_process
                limits[stage] = c.per_process / work
                labels[stage] = f"{c.label}" + (" on one core" if c.where == "core" else "")
            else:
                limits[stage] = c.rate / work
                if stage not in covered:
                    device[stage] = limits[stage]
                labels[stage] = c.label
        if not limits:
            raise ValueError(f"{name!r}: none of {sorted(per_sample)} is measured here: "
                             + "; ".join(f"{k}: {v}" for k, v in missing.items()))
        bounds = {f"{labels[k]} alone": v for k, v in device.items()}
        if t_main:
            bounds["the loop's process: its stages summed"] = 1 / t_main
        if t_workers:
            bounds[f"{parallel} worker(s): their stages summed"] = parallel / t_workers
        if t_main and t_workers:
            bounds[f"all CPU work sharing {self.cores} cores"] = self.cores / (t_main + t_workers)
        by = min(bounds, key=bounds.get)
        return Placement(name, float(measured), bytes_per_sample, workers, limits, labels,
                         bounds[by], by, missing, tuple(sorted(covered)))

    def plot(self, placements: Iterable[Placement] = (), ax=None, title: str | None = None):
        """The roofline: each pipeline a row, each stage's ceiling a tick at the samples/s
        it allows, the binding one drawn thick, the measured rate a dot, the prediction a
        ring. ``labkit report`` draws one per machine."""
        return plot_placements(list(placements), ax=ax, title=title or
                               f"data-loading roofline, {self.cores} cores")


def measure(names: Iterable[str] | None = None, scale: str | None = None,
            progress: Callable[[str], None] | None = None) -> Roofline:
    """Measure the ceilings ``names`` (default: all) on this machine, now.

    A ceiling this machine cannot measure goes to ``missing`` with the reason; one whose
    measurement fails goes there too, with the error, and the others still run.
    """
    scale = resolve_scale(scale)
    names = list(CEILINGS) if names is None else list(names)
    unknown = [n for n in names if n not in CEILINGS]
    if unknown:
        raise LabkitError(f"no ceiling named {', '.join(map(repr, unknown))}; known: "
                          f"{', '.join(CEILINGS)}")
    cores = usable_cores()
    found, missing = {}, {}
    for name in names:
        spec = CEILINGS[name]
        if progress:
            progress(name)
        try:
            rates = spec.fn(scale)
        except Missing as e:
            missing[name] = str(e)
            continue
        except Exception as e:  # noqa: BLE001 - one ceiling's failure must not hide the rest
            missing[name] = f"measuring it failed: {type(e).__name__}: {e}"[:300]
            continue
        k = cores if spec.where == "core" else 1
        found[name] = Ceiling(name, spec.label, spec.work, spec.where,
                              k * statistics.median(rates), k * min(rates), k * max(rates),
                              len(rates), spec.how, k)
    forget()
    return Roofline(found, missing, cores, scale)


def plot_placements(placements: list[Placement], ax=None, title: str = ""):
    """:meth:`Roofline.plot` for placements from records (``labkit report``)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.8 * max(2, len(placements)) + 1.2))
    for row, p in enumerate(placements):
        for stage, limit in p.limits.items():
            bound = stage == p.bound
            ax.plot([limit, limit], [row - 0.3, row + 0.3], color="C3" if bound else "0.6",
                    lw=3 if bound else 1.2, ls=":" if stage in p.covered else "-")
            ax.annotate(stage, (limit, row - 0.32), fontsize=7, ha="left", va="bottom",
                        rotation=20, color="C3" if bound else "0.4")
        ax.plot([p.measured], [row], "o", color="C0")
        ax.plot([p.predicted], [row], "o", mfc="none", mec="k", ms=9)
        ax.annotate(f"{p.fraction:.0%}", (p.measured, row - 0.12), fontsize=8, ha="right",
                    va="top", color="C0")
    ax.set_yticks(range(len(placements)), [p.name for p in placements])
    ax.set_xscale("log")
    ax.set_ylim(-0.9, len(placements) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("samples/s (ticks: what each stage allows; thick: the one that binds; dotted:"
                  " inside another stage's time; dot: measured; ring: predicted)", fontsize=8)
    ax.set_title(title)
    return ax


__all__ = ["Ceiling", "Placement", "Roofline", "measure", "plot_placements"]
