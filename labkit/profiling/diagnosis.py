"""What ``labkit diagnose`` found, as text and as JSON, and its error (chapter 13)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import LabkitError
from ..records.checkpoint import observation_name
from .hotspots import Hotspot


class DiagnoseError(LabkitError):
    """The loader to diagnose could not be built, iterated or measured (the message says which)."""


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
    hotspots: list[Hotspot] = field(default_factory=list)
    hotspots_how: str = ""
    worker_hotspots: list = field(default_factory=list)  # [{"frame", "share"}] from py-spy
    worker_sampling: str = ""                             # how, or why not
    suggestion: dict = field(default_factory=dict)   # {"knobs": {...}, "why": "..."}
    verified: dict = field(default_factory=dict)     # {"done": bool, "how": "...", ...}
    timeline: str | None = None
    samples_per_batch: float | None = None   # the loader's first pass: samples / batches
    bytes_per_sample: float | None = None    # bytes of a sample as the loop receives it
    tensors_per_batch: int | None = None     # torch tensors in a batch (images, labels: 2)
    ceiling: dict = field(default_factory=dict)  # the roofline's verdict (labkit diagnose)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in (
            "target", "bound", "loader_batches_per_s", "step_batches_per_s", "wait_fraction",
            "num_workers", "one_process_batches_per_s", "cpu_share", "first_batch_s",
            "hotspots_how", "worker_hotspots", "worker_sampling", "suggestion", "verified",
            "timeline", "samples_per_batch", "bytes_per_sample", "tensors_per_batch",
            "ceiling")}
        d["hotspots"] = [h.as_dict() for h in self.hotspots]
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint: rates, wait fraction, the bound (``ckpt.add``)."""
        n = observation_name(name or f"diagnose.{self.target}")
        cfg = {"num_workers": self.num_workers, **(config or {})}
        obs = [{"name": f"{n}.bound", "value": self.bound, "unit": "", "config": cfg,
                "note": self.suggestion.get("why")},
               {"name": f"{n}.loader_batches_per_s", "value": round(self.loader_batches_per_s, 2),
                "unit": "batches/s", "config": cfg, "note": None}]
        if self.wait_fraction is not None and not math.isnan(self.wait_fraction):
            obs.append({"name": f"{n}.wait_fraction", "value": round(self.wait_fraction, 4),
                        "unit": "fraction", "config": cfg, "note": "data-wait / loop time"})
        after = self.verified.get("wait_fraction_after")
        if after is not None:
            obs.append({"name": f"{n}.verified_wait_fraction", "value": round(after, 4),
                        "unit": "fraction", "config": {**cfg, **self.suggestion.get("knobs", {})},
                        "note": self.verified.get("how")})
        return obs

    def __str__(self) -> str:
        def f(x, fmt="{:,.1f}"):
            return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)

        lines = [f"diagnose {self.target}",
                 f"  bound:                 {self.bound}",
                 f"  loader_batches_per_s:  {f(self.loader_batches_per_s)}"
                 f"  (num_workers={self.num_workers if self.num_workers is not None else 'n/a'};"
                 f" one process: {f(self.one_process_batches_per_s)})",
                 f"  step_batches_per_s:    {f(self.step_batches_per_s)}",
                 f"  wait_fraction:         {f(self.wait_fraction, '{:.1%}')}",
                 f"  data path CPU share:   {f(self.cpu_share, '{:.0%}')}",
                 f"  first batch:           {f(self.first_batch_s, '{:.2f} s')}",
                 f"  hotspots ({self.hotspots_how}):"]
        lines += [f"    {h}" for h in self.hotspots] or ["    none found"]
        if self.worker_sampling:
            lines.append(f"  inside the workers ({self.worker_sampling}):")
            lines += [f"    {w['share']:6.1%}  {w['frame']}" for w in self.worker_hotspots]
        knobs = self.suggestion.get("knobs") or {}
        lines.append(f"  suggestion:            {knobs or 'no knob'}")
        lines.append(f"    why: {self.suggestion.get('why', '')}")
        if self.suggestion.get("startup"):
            lines.append(f"    start-up: {self.suggestion['startup']}")
        v = self.verified
        if v.get("done"):
            lines.append(f"  verified:              wait_fraction "
                         f"{f(v['wait_fraction_before'], '{:.1%}')}"
                         f" -> {f(v['wait_fraction_after'], '{:.1%}')}, loop "
                         f"{f(v['loop_batches_per_s_before'])} -> "
                         f"{f(v['loop_batches_per_s_after'])} batches/s, bound after: "
                         f"{v['bound_after']} ({v['how']})")
        else:
            lines.append(f"  verified:              no: {v.get('how', '')}")
        if self.ceiling:
            c = self.ceiling
            lines.append(f"  ceiling:               {c['label']}: the loader runs at "
                         f"{c['fraction']:.0%} of the {c['limit']:,.0f} samples/s it allows; "
                         f"its stages predict {c['predicted']:,.0f} ({c['how']})")
        if self.timeline:
            lines.append(f"  timeline:              {self.timeline}")
        return "\n".join(lines)
