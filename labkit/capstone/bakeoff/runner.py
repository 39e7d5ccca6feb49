"""The bake-off run: each adapter measured with one step, audited, against the baseline (ch. 16)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ...instruments.audits import Audit
from ...instruments.measurement import Measurement
from ...records.table import text_table
from ..pipeline import measure_audited
from .adapters import ADAPTERS, get_adapter, loader_names, probe_loader
from .data import BakeoffData, ensure_format


@dataclass
class BakeoffResult:
    """One row of the bake-off: a measured loader, or a skipped one and why."""

    name: str
    library: str
    version: str | None
    num_workers: int
    measurement: Measurement | None = None
    audit: Audit | None = None
    skipped: str | None = None
    error: str | None = None
    ratio: float | None = None
    conversion_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.measurement is not None

    @property
    def samples_per_s(self) -> float | None:
        return self.measurement.epoch_samples_per_s if self.measurement else None

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint record (``ckpt.add(results)``): ``bakeoff.``
        ``samples_per_s``, ``ratio`` (x torch map-style) and ``exactly_once`` for a loader
        that ran, ``bakeoff.skipped`` (the reason) for one that did not."""
        key = name or "bakeoff"
        cfg = {"loader": self.name, "library": self.library, "version": self.version,
               "num_workers": self.num_workers, **(config or {})}
        if self.ok:
            rows = [("samples_per_s", round(self.samples_per_s, 1), "samples/s"),
                    ("ratio", round(self.ratio, 3), "x torch map-style"),
                    ("exactly_once", self.audit.ok, "")]
        else:
            rows = [("skipped", (self.skipped or self.error or "")[:200], "")]
        return [{"name": f"{key}.{n}", "value": v, "unit": u, "config": dict(cfg), "note": None}
                for n, v, u in rows]

    def as_dict(self) -> dict:
        m = self.measurement
        return {
            "loader": self.name, "library": self.library, "version": self.version,
            "num_workers": self.num_workers,
            "samples_per_s": None if m is None else round(self.samples_per_s, 1),
            "steady_samples_per_s": None if m is None else round(m.samples_per_s, 1),
            "ratio_vs_torch_map": None if self.ratio is None else round(self.ratio, 3),
            "first_batch_s": None if m is None else round(m.first_batch_s, 4),
            "exactly_once": None if self.audit is None else self.audit.ok,
            "conversion_s": None if self.conversion_s is None else round(self.conversion_s, 3),
            "skipped": self.skipped, "error": self.error,
        }


def _run_one(name: str, label: str, data: BakeoffData, step: Callable, batch_size: int,
             num_workers: int, decoder: str, repeats: int, warmup: int) -> BakeoffResult:
    a = get_adapter(name)
    ok, why = probe_loader(a)
    r = BakeoffResult(label, a.dist, why if ok else None, num_workers)
    if not ok:
        r.skipped = why
        return r
    fmt = a.fmt
    loader = None
    try:
        if fmt is not None:
            ensure_format(data, fmt)
            r.conversion_s = data.conversion_s[fmt]
        loader = a.build(data, batch_size, num_workers, decoder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. more workers than cores / shards
            r.measurement, r.audit = measure_audited(
                lambda loader=loader: loader, step, [i for i, _, _ in data.rows],
                repeats=repeats, warmup=warmup, name=label,
                config={"num_workers": num_workers, "batch_size": batch_size})
    except Exception as e:  # noqa: BLE001 - one broken library must not stop the rest
        if name == ADAPTERS[0].name:
            raise
        r.error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
    finally:
        # a row that holds more than its workers (Ray's processes, Mosaic's shared memory,
        # the S3 store) releases it in its own close(); a DataLoader's workers stop when its
        # last reference goes, here
        close = getattr(loader, "close", None)
        if close is not None:
            close()
        del loader
    return r


#: The name of the baseline's second measurement, at the end of a run.
AGAIN = " (again)"


def run_bakeoff(data: BakeoffData, step: Callable, *, names=None, batch_size: int = 32,
                num_workers: int = 2, decoder: str = "pil", repeats: int = 2, warmup: int = 1,
                recheck_baseline: bool = True) -> list[BakeoffResult]:
    """Measure every adapter (or ``names``) over ``data`` with the same step; audit each.

    The torch map-style baseline is measured first, in the same run, and with
    ``recheck_baseline`` once more at the end (``"torch map-style (again)"``): every ratio
    is against the mean of the two, so a machine that got busier or quieter during the run
    (other programs, thermal limits) shows up as the two baseline rows disagreeing instead
    of favouring whichever loaders ran in the quiet part. A library that is absent is
    skipped with its reason; one that fails while running is reported with its error, and
    the bake-off goes on.
    """
    wanted = list(names) if names is not None else loader_names()
    baseline = ADAPTERS[0].name
    order = [(baseline, baseline)] + [(n, n) for n in wanted if n != baseline]
    if recheck_baseline and len(order) > 1:
        order.append((baseline, baseline + AGAIN))
    results: list[BakeoffResult] = []
    for name, label in order:
        results.append(_run_one(name, label, data, step, batch_size, num_workers, decoder,
                                repeats, warmup))
    bases = [r.samples_per_s for r in results if r.name.startswith(baseline)]
    base = sum(bases) / len(bases)
    for r in results:
        if r.ok:
            r.ratio = r.samples_per_s / base
    return results


def format_bakeoff(results: list[BakeoffResult]) -> str:
    """A text table: library, version, samples/s, x torch map-style, first batch, audit."""
    columns = {"loader": "<", "library": "<", "version": "<", "samples/s": ">,.0f",
               "x map": ">.2f", "first ms": ">.0f", "exactly once": "<"}
    rows = []
    for r in results:
        if r.ok:
            rows.append([r.name, r.library, r.version, r.samples_per_s, r.ratio,
                         r.measurement.first_batch_s * 1e3,
                         "ok" if r.audit.ok else "NO: " + _audit_line(r.audit)])
        else:  # the reason runs on from the figures' first column
            rows.append([r.name, r.library, None,
                         f"skipped: {r.skipped}" if r.skipped else f"failed: {r.error}"])
    return text_table(columns, rows, rule=True)


def _audit_line(a: Audit) -> str:
    return f"{a.duplicates} duplicates, {a.missing} missing"


