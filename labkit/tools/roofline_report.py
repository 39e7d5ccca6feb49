"""The roofline read back from records: chapter 16's plot, ``labkit report``'s table (ch. 16).

A chapter's checkpoint holds its placements as ``roofline.NAME.*`` observations
(:meth:`~labkit.tools.roofline.Placement.as_observations`); these functions rebuild them,
keep each machine's newest per chapter, and draw or tabulate them with the prediction error.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from .. import paths
from ..display.figures import agg_figure
from ..records.checkpoint import load_records
from .roofline import Placement, plot_placements


def placements_from_record(record: dict) -> list[Placement]:
    """The placements a chapter's record holds (its ``roofline.NAME.*`` observations)."""
    by: dict[str, dict] = {}
    for obs in record.get("observations", []):
        parts = obs["name"].split(".")
        if parts[0] != "roofline" or len(parts) < 3:
            continue
        entry = by.setdefault(".".join(parts[1:-1]), {"config": obs.get("config") or {}})
        entry[parts[-1]] = obs["value"]
    out = []
    for name, e in by.items():
        cfg = e["config"]
        limits = cfg.get("limits") or {}
        if not limits or "samples_per_s" not in e or "predicted_samples_per_s" not in e:
            continue
        out.append(Placement(f"{record.get('chapter', '')[:2]} {name}".strip(),
                             float(e["samples_per_s"]), cfg.get("bytes_per_sample"),
                             int(cfg.get("workers") or 0), dict(limits),
                             {k: k for k in limits}, float(e["predicted_samples_per_s"]),
                             cfg.get("predicted_by") or "from the record",
                             covered=tuple(cfg.get("covered") or ())))
    return out


def newest_placements(records: Iterable[dict] | None = None, *, scale: str | None = None,
                      hostname: str | None = None, skip: Iterable[str] = ()) -> list[Placement]:
    """The placements of each chapter's newest record (at ``scale``, from ``hostname``),
    chapters in order: what chapter 16 and ``labkit report`` draw beside their own.
    ``records`` defaults to the records folder's (none yet: an empty list)."""
    if records is None:
        folder = paths.records_dir()
        has_any = folder.is_dir() and any(folder.rglob("*.json"))
        records = load_records([folder]) if has_any else []
    newest: dict[str, dict] = {}
    for rec in records:   # load_records gives them oldest first
        host = rec.get("environment", {}).get("hostname")
        if (scale in (None, rec.get("scale")) and hostname in (None, host)
                and rec.get("chapter") not in set(skip)):
            newest[rec.get("chapter", "")] = rec
    return [p for ch in sorted(newest) for p in placements_from_record(newest[ch])]


def report_rows(records: list[dict]) -> list[dict]:
    """One row per placed pipeline of each machine's newest chapter records, per scale:
    the table of predicted against measured that ``labkit report`` prints."""
    rows = []
    keys = {(rec.get("environment", {}).get("hostname"), rec.get("scale")) for rec in records}
    for host, scale in sorted(keys, key=str):
        for p in newest_placements(records, scale=scale, hostname=host):
            rows.append({"machine": host, "scale": scale, "pipeline": p.name,
                         "measured": p.measured, "bound": p.bound, "fraction": p.fraction,
                         "predicted": p.predicted, "error": p.error, "placement": p})
    return rows


def report_figure(records: list[dict]):
    """One roofline panel per machine and scale that placed pipelines (None: none did)."""
    rows = report_rows(records)
    panels = list(dict.fromkeys((r["machine"], r["scale"]) for r in rows))
    if not panels:
        return None
    n = max(sum(1 for r in rows if (r["machine"], r["scale"]) == k) for k in panels)
    fig = agg_figure(figsize=(9 * len(panels), 0.8 * max(2, n) + 1.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (host, scale) in zip(axes[0], panels, strict=True):
        placed = [r["placement"] for r in rows if (r["machine"], r["scale"]) == (host, scale)]
        errors = prediction_errors(placed)
        plot_placements(placed, ax=ax, title=f"{host}, {scale}: median |prediction error| "
                        f"{errors['median_abs_error']:.0%}")
    return fig


def prediction_errors(placements: Iterable[Placement]) -> dict:
    """The median absolute prediction error of ``placements``, and the ones beyond 50 %."""
    errors = {p.name: p.error for p in placements}
    if not errors:
        return {"median_abs_error": float("nan"), "beyond_50pct": []}
    return {"median_abs_error": statistics.median(abs(e) for e in errors.values()),
            "beyond_50pct": sorted(k for k, e in errors.items() if abs(e) > 0.5)}


__all__ = ["newest_placements", "placements_from_record", "prediction_errors", "report_figure",
           "report_rows"]
