"""A measurement: passes, rates, data-wait, spread, each defined once (ch. 01-07, 12, 14)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from ..records.checkpoint import observation_name
from ..records.table import text_table


def rate(count: float, seconds: float) -> float:
    """``count / seconds``, NaN when no time passed: the one way the kit turns counts into rates."""
    return count / seconds if seconds > 0 else float("nan")


def wait_fraction(wait_s: float, loop_s: float) -> float:
    """Data-wait as a share of the loop's time (wait + step + overhead); NaN for no time."""
    return wait_s / loop_s if loop_s > 0 else float("nan")


@dataclass
class Pass:
    """The raw timings of one pass over a loader."""

    batches: int
    samples: int
    nbytes: int
    first_batch_s: float
    epoch_s: float
    steady_s: float  # t_end[n-1] - t_end[0]
    steady_samples: int  # samples in batches 1..n-1
    wait: np.ndarray  # data-wait per batch 1..n-1 (s)
    compute: np.ndarray  # step time per batch 0..n-1 (s); empty without a step
    stride: int = 1  # batches per clock read after the first 64 (see GROUP_PERIOD_S)
    tensors: int = 0  # torch tensors in the first batch: a worker hands each over on its own

    @property
    def samples_per_s(self) -> float:
        """Steady state: batches 1..n-1 over their time (a one-batch pass: the whole pass)."""
        if self.steady_s > 0 and self.steady_samples:
            return rate(self.steady_samples, self.steady_s)
        return self.epoch_samples_per_s

    @property
    def epoch_samples_per_s(self) -> float:
        """The whole pass, worker start-up and first batch included."""
        return rate(self.samples, self.epoch_s)


@dataclass
class Measurement:
    """What :func:`measure` observed: the passes and their summaries (median, min, max)."""

    name: str
    config: dict = field(default_factory=dict)
    passes: list[Pass] = field(default_factory=list)
    step: str | None = None

    @property
    def samples_per_s(self) -> float:
        return statistics.median(p.samples_per_s for p in self.passes)

    @property
    def epoch_samples_per_s(self) -> float:
        """Median whole-pass samples/s, start-up included (what persistent workers save)."""
        return statistics.median(p.epoch_samples_per_s for p in self.passes)

    @property
    def best_samples_per_s(self) -> float:
        """The fastest pass's steady samples/s: on a shared machine noise only slows a pass."""
        return max(p.samples_per_s for p in self.passes)

    @property
    def samples_per_s_range(self) -> tuple[float, float]:
        rates = [p.samples_per_s for p in self.passes]
        return min(rates), max(rates)

    @property
    def bytes_per_s(self) -> float:
        p = self.passes[0]
        per_sample = p.nbytes / p.samples if p.samples else 0.0
        return self.samples_per_s * per_sample

    @property
    def tensors_per_batch(self) -> int:
        """Torch tensors in the first batch (each crosses from a worker on its own)."""
        return self.passes[0].tensors

    @property
    def first_batch_s(self) -> float:
        return statistics.median(p.first_batch_s for p in self.passes)

    @property
    def samples(self) -> int:
        return self.passes[0].samples

    @property
    def batches(self) -> int:
        return self.passes[0].batches

    def latency_ms(self, q: float) -> float:
        """Percentile ``q`` (0-100) of per-batch data latency, pooled over passes, in ms."""
        pooled = np.concatenate([p.wait for p in self.passes])
        return float(np.percentile(pooled, q) * 1e3) if pooled.size else float("nan")

    @property
    def wait_fraction(self) -> float:
        """Share of steady-state loop time spent waiting for data (needs a step to mean much)."""
        fr = [wait_fraction(p.wait.sum(), p.steady_s) for p in self.passes if p.steady_s > 0]
        return float(statistics.median(fr)) if fr else float("nan")

    @property
    def wait_s(self) -> float:
        return float(statistics.median(p.wait.sum() for p in self.passes))

    @property
    def compute_s(self) -> float:
        return float(statistics.median(p.compute.sum() for p in self.passes))

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint record: samples/s, bytes/s, first batch, wait."""
        name = observation_name(name or self.name)
        cfg = {**self.config, **(config or {})}
        if self.step is not None:
            cfg.setdefault("step", self.step)
        lo, hi = self.samples_per_s_range
        obs = [
            {"name": f"{name}.samples_per_s", "value": round(self.samples_per_s, 2),
             "unit": "samples/s", "config": cfg,
             "note": f"median of {len(self.passes)} passes, range {lo:.0f}-{hi:.0f}"},
            {"name": f"{name}.bytes_per_s", "value": round(self.bytes_per_s, 1),
             "unit": "B/s", "config": cfg, "note": None},
            {"name": f"{name}.first_batch_s", "value": round(self.first_batch_s, 6),
             "unit": "s", "config": cfg, "note": None},
        ]
        if self.step is not None:
            obs.append({"name": f"{name}.wait_fraction", "value": round(self.wait_fraction, 4),
                        "unit": "fraction", "config": cfg, "note": "data-wait / loop time"})
        return obs

    def __str__(self) -> str:
        lo, hi = self.samples_per_s_range
        s = (f"{self.name}: {self.samples_per_s:,.0f} samples/s ({lo:,.0f}-{hi:,.0f} over "
             f"{len(self.passes)} passes), {self.bytes_per_s / 1e6:,.1f} MB/s, first batch "
             f"{self.first_batch_s * 1e3:,.1f} ms, batch p50/p99 {self.latency_ms(50):.3f}/"
             f"{self.latency_ms(99):.3f} ms")
        if self.step is not None:
            s += f", waiting {self.wait_fraction:.0%} of the loop"
        return s

    __repr__ = __str__


def compare(measurements: list[Measurement], baseline: int = 0) -> str:
    """A text table of measurements with each one's samples/s as a ratio of the baseline's."""
    base = measurements[baseline].samples_per_s
    return text_table(
        {"loader": "<", "samples/s": ">,.0f", "range": ">", "MB/s": ">.1f", "first ms": ">.1f",
         "x base": ">.2f"},
        [[m.name, m.samples_per_s, "{:,.0f}-{:,.0f}".format(*m.samples_per_s_range),
          m.bytes_per_s / 1e6, m.first_batch_s * 1e3, m.samples_per_s / base]
         for m in measurements])
