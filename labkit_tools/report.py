"""``labkit report``: checkpoint records side by side across runs and machines (chapter 00).

A table per chapter, a column per run with its ratio to a baseline run: Markdown with a PNG
beside it, or one self-contained HTML file (plots embedded, no scripts, nothing fetched).
"""

from __future__ import annotations

import base64
import html
import math
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from labkit.display.figures import agg_figure, png_bytes
from labkit.errors import LabkitError
from labkit.records.checkpoint import format_config, format_value, load_records
from labkit.records.machine import gpu_line, human_bytes

FORMATS = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
KEYS = ["chapter", "name", "unit", "config"]


def run_labels(records: list[dict]) -> list[str]:
    """``hostname @ 2026-05-09 07:35:25`` per record, made unique with ``#2``, ``#3``
    (to the second: ``labkit run`` writes several chapters' records within one minute)."""
    labels, counts = [], {}
    for r in records:
        try:
            stamp = datetime.fromisoformat(r["created"]).astimezone(UTC).strftime(
                "%Y-%m-%d %H:%M:%S")
        except (TypeError, ValueError):
            stamp = str(r["created"])
        base = f"{r['environment'].get('hostname', '?')} @ {stamp}"
        counts[base] = counts.get(base, 0) + 1
        labels.append(base if counts[base] == 1 else f"{base} #{counts[base]}")
    return labels


def comparison(records: list[dict]) -> pd.DataFrame:
    """One row per (chapter, name, unit, config), one column per run (None where a run did
    not observe it); the same observation twice in one run is a second row, ``name (2)``."""
    rows, labels = [], run_labels(records)
    for label, r in zip(labels, records, strict=True):
        seen: dict[tuple, int] = {}
        for o in r["observations"]:
            key = (r["chapter"], o["name"], o["unit"], format_config(o.get("config")))
            seen[key] = seen.get(key, 0) + 1
            name = o["name"] if seen[key] == 1 else f"{o['name']} ({seen[key]})"
            rows.append([key[0], name, key[2], key[3], label, o["value"]])
    frame = pd.DataFrame(rows, columns=[*KEYS, "run", "value"])
    wide = frame.pivot_table(index=KEYS, columns="run", values="value", aggfunc="first", sort=False)
    wide = wide.reindex(columns=[lb for lb in labels if lb in wide.columns])
    wide.columns.name = None
    return wide.astype(object).where(wide.notna(), None).reset_index()


def baselines(records: list[dict], baseline: str | None = None) -> dict[str, str]:
    """The baseline run per chapter: the first whose hostname or label is ``baseline`` or
    whose records folder contains it, else the chapter's first run."""
    labels = run_labels(records)

    def matches(label, r):
        return baseline in (label, r["environment"].get("hostname")) or baseline in r["_folder"]

    pairs = list(zip(labels, records, strict=True))
    if baseline is not None and not any(matches(lb, r) for lb, r in pairs):
        raise LabkitError(f"--baseline {baseline!r} matches no run (a hostname, a run label or "
                          f"part of a records folder); the runs are: {', '.join(labels)}")
    first, chosen = {}, {}
    for lb, r in pairs:  # oldest first: the first match wins
        first.setdefault(r["chapter"], lb)
        if baseline is not None and matches(lb, r):
            chosen.setdefault(r["chapter"], lb)
    return {chapter: chosen.get(chapter, lb) for chapter, lb in first.items()}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def chapter_table(records: list[dict], chapter: str, base: str | None,
                  wide: pd.DataFrame | None = None) -> pd.DataFrame:
    """One chapter's rows as text: its runs' values, then each other run's over the baseline's."""
    number = {lb: i for i, lb in enumerate(run_labels(records), 1)}
    wide = comparison(records) if wide is None else wide   # pivoted once by write_report
    part = wide.query("chapter == @chapter")
    runs = [lb for lb in number if lb in part and part[lb].notna().any()]
    out = part[["name", "config", "unit"]].rename(columns={"name": "observation"})
    for lb in runs:
        tag = ", baseline" if lb == base and len(runs) > 1 else ""
        out[f"{lb} (run {number[lb]}{tag})"] = [
            "" if v is None else format_value(v) for v in part[lb]]
    for lb in (r for r in runs if base in runs and r != base):
        out[f"run {number[lb]} ÷ run {number[base]}"] = [
            f"{v / b:.2f}x" if _number(v) and _number(b) and b else ""
            for v, b in zip(part[lb], part[base], strict=True)]
    return out.reset_index(drop=True)


def chapter_warnings(records: list[dict], chapter: str) -> list[str]:
    """Why a chapter's runs may not be comparable: different scales or constraints."""
    def runs_by(key):
        groups: dict = {}
        for i, r in enumerate(records, 1):
            if r["chapter"] == chapter:
                groups.setdefault(key(r), []).append(str(i))
        return groups

    def runs(ids):
        return ("run " if len(ids) == 1 else "runs ") + ", ".join(ids)

    out = []
    if len(scales := runs_by(lambda r: r["scale"])) > 1:
        out.append("runs at different scales (" + "; ".join(
            f"{s}: {runs(ids)}" for s, ids in scales.items()) + "): sizes differ, so "
            "throughputs are not comparable")
    if len(kinds := runs_by(lambda r: tuple(sorted(map(str, r.get("constraints") or []))))) > 1:
        out.append("runs under different constraints (" + "; ".join(
            f"{runs(ids)}: {', '.join(k) or 'none'}" for k, ids in kinds.items())
            + "): compare with care")
    return out


def environments(records: list[dict]) -> pd.DataFrame:
    """The machines side by side: a row per fact and package version, a column per distinct
    environment; ``differs`` marks the rows where a difference between machines is traced."""
    def facts(e):
        cpu, mem, os_, th, data = (e.get(k) or {} for k in ("cpu", "memory", "os", "torch", "data"))
        pools = sorted(f"{p.get('internal_api', '?')} x{p.get('num_threads', '?')}"
                       for p in e.get("threadpools") or [] if isinstance(p, dict))
        return {"hostname": e.get("hostname", "?"), "CPU": cpu.get("model", "?"),
                "cores": f"{cpu.get('logical_cores', '?')} logical / "
                         f"{cpu.get('physical_cores', '?')} physical, "
                         f"{len(cpu.get('affinity') or [])} usable",
                "RAM": human_bytes(mem.get("total_bytes")), "GPU": gpu_line(e.get("gpu", {})),
                "OS": f"{os_.get('system', '?')} {os_.get('release', '?')} "
                      f"{os_.get('machine', '?')}", "libc": os_.get("libc", "?"),
                "torch threads": f"{th.get('num_threads', '?')} intra-op / "
                                 f"{th.get('interop_threads', '?')} inter-op",
                "thread pools": ", ".join(pools) or "?",
                "data filesystem": f"{data.get('filesystem', '?')} at "
                                   f"{data.get('mount_point', '?')}"}

    packages = list(dict.fromkeys(p for r in records for p in r["environment"].get("versions")
                                  or {}))
    columns: dict[tuple, list[str]] = {}
    for i, r in enumerate(records, 1):
        versions = r["environment"].get("versions") or {}
        row = {**facts(r["environment"]), **{
            f"version: {p}": str(versions[p]) if versions.get(p) is not None else "not installed"
            for p in packages}}
        columns.setdefault(tuple(row.items()), []).append(str(i))
    table = pd.DataFrame({f"{dict(k)['hostname']} (run{'s' if len(ids) > 1 else ''} "
                          f"{', '.join(ids)})": dict(k) for k, ids in columns.items()})
    table.insert(0, "differs", table.nunique(axis=1) > 1)
    return table


def plot(records: list[dict], chapter: str | None = None, wide: pd.DataFrame | None = None):
    """Bars, a panel per (chapter, unit), a colour per run; None for a chapter without numbers."""
    wide = comparison(records) if wide is None else wide
    if chapter is not None:
        wide = wide[wide.chapter == chapter]
    labels = [c for c in wide.columns if c not in KEYS]
    panels = [(key, part) for key, part in wide.groupby(["chapter", "unit"], sort=False)
              if part[labels].map(_number).any(axis=None)]
    if chapter is not None and not panels:
        return None
    fig = agg_figure(figsize=(10, min(2 + sum(1 + 0.3 * len(p) for _, p in panels), 80)),
                     layout="constrained")
    axes = fig.subplots(max(len(panels), 1), 1, squeeze=False)[:, 0]
    for ax, ((ch, unit), part) in zip(axes, panels, strict=False):
        numbers = part.set_index(part.name + " " + part.config)[labels].map(
            lambda v: v if _number(v) else float("nan")).astype(float)
        numbers.plot.barh(ax=ax, legend=False, logx=bool(
            numbers.min(axis=None) > 0 and numbers.max(axis=None) > 50 * numbers.min(axis=None)))
        ax.invert_yaxis()   # the first observation on top, as in the table
        ax.set_title(unit if chapter else f"{ch} ({unit})", loc="left", fontsize=10)
        ax.set_ylabel("")
    if panels:
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center",
                   ncols=min(3, len(labels)), fontsize=8)
    else:
        axes[0].set_axis_off()
        axes[0].text(0.5, 0.5, "no numeric observations to plot", ha="center", va="center")
    return fig


def report_format(out=None, fmt: str | None = None) -> str:
    """``"html"`` or ``"md"``: ``fmt`` if given, else from ``out``'s suffix, else Markdown."""
    if fmt is not None and fmt not in ("html", "md"):
        raise LabkitError(f"unknown report format {fmt!r}; use html or md")
    suffix = Path(out).suffix.lower() if out is not None else ""
    from_suffix = FORMATS.get(suffix)
    if fmt is None and out is not None and from_suffix is None:
        raise LabkitError(f"cannot tell the report format from {out} (suffix {suffix!r}): "
                          "name it .html or .md, or give --format html|md")
    if fmt is not None and from_suffix is not None and fmt != from_suffix:
        raise LabkitError(f"--format {fmt} but --out {out} ends in {suffix}: they disagree")
    return fmt or from_suffix or "md"


def _md_table(frame: pd.DataFrame) -> list[str]:
    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")
    return (["| " + " | ".join(map(cell, frame.columns)) + " |", "|" + "---|" * frame.shape[1]]
            + ["| " + " | ".join(map(cell, row)) + " |" for row in frame.itertuples(index=False)])


def write_report(dirs, out=None, fmt: str | None = None, baseline: str | None = None,
                 records: list[dict] | None = None) -> Path:
    """Write the report; its path (default ``report.md`` / ``report.html`` here)."""
    fmt = report_format(out, fmt)
    records = load_records(dirs) if records is None else records
    base = baselines(records, baseline)
    out = Path(out) if out is not None else Path.cwd() / f"report.{fmt}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabkitError(f"cannot create the report's folder {out.parent}: {e}") from e
    folders = [str(d) for d in ([dirs] if isinstance(dirs, (str, Path)) else dirs)]
    numbered = enumerate(zip(run_labels(records), records, strict=True), 1)
    runs = pd.DataFrame([{"#": i, "run": lb, "chapter": r["chapter"], "scale": r["scale"],
                          "labkit": r.get("labkit_version") or "?",
                          "constraints": "; ".join(map(str, r.get("constraints") or [])),
                          "folder": r["_folder"], "record": Path(r["_source"]).name}
                         for i, (lb, r) in numbered])
    env = environments(records)
    env.index = [f"{k} ≠" if d else k for k, d in zip(env.index, env.pop("differs"), strict=True)]
    chapters = list(dict.fromkeys(r["chapter"] for r in records))
    wide = comparison(records)   # every run's observations pivoted once, for every chapter
    intro = (f"{len(records)} checkpoint records from {', '.join(folders)}; written "
             f"{datetime.now(UTC):%Y-%m-%d %H:%M UTC}. Facts marked ≠ differ between the "
             "machines: that is where a difference is traced. `run N ÷ run M`: run N's value "
             "over the baseline run's (the chapter's first run unless --baseline chose "
             "another).")
    if env.shape[1] == 1:
        intro += f" All {len(records)} runs report the same environment."
    if fmt == "md":
        png = out.with_suffix(".png")
        plot(records, wide=wide).savefig(png, dpi=110)
        lines = ["# labkit report", "", intro, "", "## Runs", "", *_md_table(runs), "",
                 "## Environments", "", *_md_table(env.rename_axis("fact").reset_index())]
        for ch in chapters:
            lines += ["", f"### {ch}", "", *(f"**Note:** {w}." for w in
                                             chapter_warnings(records, ch)),
                      *_md_table(chapter_table(records, ch, base[ch], wide))]
        lines += ["", "## Plot", "", f"![observations per run]({png.name})", ""]
    else:
        def e(text):
            return html.escape(str(text), quote=True)

        lines = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
                 "<title>labkit report</title><style>table{border-collapse:collapse}"
                 "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>",
                 f"<h1>labkit report</h1><p>{e(intro)}</p>", "<h2>Runs</h2>",
                 runs.to_html(index=False), "<h2>Environments</h2>", env.to_html()]
        for ch in chapters:
            lines += [f"<h3>{e(ch)}</h3>", *(f"<p>⚠ {e(w)}.</p>" for w in
                                              chapter_warnings(records, ch)),
                      chapter_table(records, ch, base[ch], wide).to_html(index=False)]
            if (fig := plot(records, ch, wide)) is not None:
                data = base64.b64encode(png_bytes(fig, 96)).decode("ascii")
                lines.append(f'<img alt="{e(ch)}" src="data:image/png;base64,{data}">')
        lines.append("</body></html>")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
