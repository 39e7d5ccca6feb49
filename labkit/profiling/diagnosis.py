"""What ``labkit diagnose`` found, as its report and as JSON, and its error (chapter 13)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import LabkitError


class DiagnoseError(LabkitError):
    """The loader could not be built, iterated or measured in time (the message says which)."""


@dataclass
class Diagnosis:
    """What :func:`diagnose` found; ``str()`` is the report, :meth:`as_dict` its JSON."""

    target: str
    bound: str                          # "loader", "step" or "balanced"
    loader_batches_per_s: float
    step_batches_per_s: float | None
    wait_fraction: float | None
    num_workers: int | None             # the loader's, None if not a DataLoader
    one_process_batches_per_s: float | None
    cpu_share: float | None             # CPU / wall of the data path in this process
    first_batch_s: float | None = None  # iter() to the first batch: worker start-up included
    hotspots: list = field(default_factory=list)     # [{"name", "where", "share", "via"}]
    suggestion: dict = field(default_factory=dict)   # {"knobs": {...}, "why": "..."}
    timeline: str | None = None
    samples_per_batch: float | None = None
    bytes_per_sample: float | None = None    # bytes of a sample as the loop receives it
    tensors_per_batch: int | None = None     # torch tensors in a batch (images, labels: 2)
    ceiling: dict = field(default_factory=dict)  # the roofline's verdict

    def as_dict(self) -> dict:
        return {k: None if isinstance(v, float) and math.isnan(v) else v
                for k, v in self.__dict__.items()}

    def __str__(self) -> str:
        def f(x, fmt="{:,.1f}"):
            return "n/a" if x is None or x != x else fmt.format(x)  # x != x: NaN

        c, hs = self.ceiling, self.hotspots
        return "\n".join([
            f"diagnose {self.target}", f"  bound:                 {self.bound}",
            f"  loader_batches_per_s:  {f(self.loader_batches_per_s)}  (num_workers="
            f"{self.num_workers}; one process: {f(self.one_process_batches_per_s)})",
            f"  step_batches_per_s:    {f(self.step_batches_per_s)}",
            f"  wait_fraction:         {f(self.wait_fraction, '{:.1%}')}",
            f"  data path CPU share:   {f(self.cpu_share, '{:.0%}')}",
            f"  first batch:           {f(self.first_batch_s, '{:.2f} s')}",
            "  hotspots (cProfile, this process, num_workers=0):",
            *([f"    {h['share']:6.1%}  {h['name']}" + (f" (in {h['via']})" if h["via"] else "")
               + f"  {h['where']}" for h in hs] or ["    none found"]),
            f"  suggestion:            {self.suggestion.get('knobs') or 'no knob'}",
            f"    why: {self.suggestion.get('why', '')}",
            *([f"  ceiling:               {c['label']}: the loader runs at {c['fraction']:.0%} "
               f"of the {c['limit']:,.0f} samples/s it allows; its stages predict "
               f"{c['predicted']:,.0f} ({c['how']})"] if c else []),
            *([f"  timeline:              {self.timeline}"] if self.timeline else [])])
