"""Comparing checkpoint records across runs and machines, ``labkit report`` (chapter 00).

Each record is one run: a chapter on one machine at one time. Rows line up the same
observation (name, unit, knobs) across runs, so a workshop can put a laptop beside a
workstation, or a run before a knob change beside the run after. The report is Markdown
(a PNG beside it) or one self-contained HTML file (plots embedded, no scripts, nothing
fetched). Introduced in chapter 00.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from ..display.figures import agg_figure, png_bytes
from ..errors import LabkitError
from ..records.checkpoint import format_config, format_value
from ..records.machine import gpu_line, human_bytes
from ..records.table import text_table

_FIXED = ("chapter", "name", "unit", "config")
FORMATS = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
FAR = 1.25  # a ratio beyond 1.25x (or under 1/1.25) is marked: more than run-to-run noise


def run_labels(records: list[dict]) -> list[str]:
    """``hostname @ 2026-05-09 07:35:25`` per record, made unique with ``#2``, ``#3``.

    To the second: ``labkit run`` writes several chapters' records within one minute.
    """
    labels, counts = [], {}
    for r in records:
        try:
            when = datetime.fromisoformat(r["created"]).astimezone(UTC)
            stamp = when.strftime("%Y-%m-%d %H:%M:%S")
        except (TypeError, ValueError):
            stamp = str(r["created"])
        base = f"{r['environment'].get('hostname', '?')} @ {stamp}"
        counts[base] = counts.get(base, 0) + 1
        labels.append(base if counts[base] == 1 else f"{base} #{counts[base]}")
    return labels


def comparison_rows(records: list[dict]) -> list[dict]:
    """One row per (chapter, name, unit, config) with one column per run (None = absent)."""
    labels = run_labels(records)
    rows: dict[tuple, dict] = {}
    for label, r in zip(labels, records, strict=True):
        repeats: dict[tuple, int] = {}
        for o in r["observations"]:
            key = (r["chapter"], o["name"], o["unit"], format_config(o.get("config")))
            # The same observation twice in one run is kept as a second row, not overwritten.
            repeats[key] = repeats.get(key, 0) + 1
            if repeats[key] > 1:
                key = (key[0], f"{key[1]} ({repeats[key]})", *key[2:])
            fixed = dict(zip(_FIXED, key, strict=True))
            row = rows.setdefault(key, {**fixed, **dict.fromkeys(labels)})
            row[label] = o["value"]
    return sorted(rows.values(), key=lambda row: row["chapter"])  # stable: first-seen order


def _runs_in(rows: list[dict]) -> list[str]:
    return [k for k in (rows[0] if rows else {}) if k not in _FIXED]


def _sections(rows):
    """Rows per chapter, with only the runs that observed something in that chapter."""
    chapters = dict.fromkeys(row["chapter"] for row in rows)
    for chapter in chapters:
        part = [row for row in rows if row["chapter"] == chapter]
        runs = [run for run in _runs_in(rows) if any(row[run] is not None for row in part)]
        yield chapter, part, runs


def _cell(value) -> str:
    return "" if value is None else format_value(value)


def format_table(rows: list[dict], width: int = 110) -> str:
    """A fixed-width text table for terminals, one block per chapter.

    Run labels head the columns when they fit in ``width``; otherwise columns are numbered
    and a legend names the runs.
    """
    if not rows:
        return "(no observations)"
    out = []
    for chapter, part, runs in _sections(rows):
        names = [f"{row['name']} [{row['config']}]" if row["config"] else row["name"]
                 for row in part]
        first = max(len("observation"), *map(len, names))
        unit_w = max(len("unit"), *(len(row["unit"]) for row in part))
        heads = runs
        vals = [[_cell(row[run]) for run in runs] for row in part]
        if first + unit_w + sum(len(h) + 2 for h in heads) > width:
            heads = [f"#{i}" for i in range(1, len(runs) + 1)]
        out.append(f"== {chapter} ==")
        if heads != runs:
            out.extend(f"  {h} = {run}" for h, run in zip(heads, runs, strict=True))
        out.append(text_table({"observation": "<", "unit": "<", **{h: ">" for h in heads}},
                              [[name, row["unit"], *v] for name, row, v in
                               zip(names, part, vals, strict=True)]))
        out.append("")
    return "\n".join(out).rstrip()


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def ratio(value, base) -> float | None:
    """``value / base`` when both are finite numbers and ``base`` is not 0; else None."""
    if _is_number(value) and _is_number(base) and base != 0:
        return value / base
    return None


def baselines(records: list[dict], baseline: str | None = None) -> dict[str, str]:
    """The baseline run (its label) per chapter: the first run, or the first one matching.

    ``baseline`` matches a run whose hostname or label equals it, or whose records folder
    contains it. A chapter without a matching run falls back to its first run.

    Raises:
        LabkitError: ``baseline`` matches no run at all (the message lists the runs).
    """
    labels = run_labels(records)

    def matches(label, r):
        return baseline in (label, r["environment"].get("hostname")) or baseline in r["_folder"]

    if baseline is not None and not any(matches(lb, r) for lb, r in zip(labels, records,
                                                                         strict=True)):
        raise LabkitError(f"--baseline {baseline!r} matches no run (a hostname, a run label or "
                          f"part of a records folder); the runs are: {', '.join(labels)}")
    first: dict[str, str] = {}
    chosen: dict[str, str] = {}
    for lb, r in zip(labels, records, strict=True):  # oldest first: the first match wins
        first.setdefault(r["chapter"], lb)
        if baseline is not None and matches(lb, r):
            chosen.setdefault(r["chapter"], lb)
    return {chapter: chosen.get(chapter, lb) for chapter, lb in first.items()}


# -- environments -------------------------------------------------------------------------

def _get(env, *keys):
    for k in keys:
        env = env.get(k) if isinstance(env, dict) else None
    return env if env is not None else "?"


def _pools(env) -> str:
    # sorted: threadpoolctl lists pools in load order, which differs between runs
    pools = sorted(f"{p.get('internal_api', '?')} x{p.get('num_threads', '?')}"
                   for p in env.get("threadpools") or [] if isinstance(p, dict))
    return ", ".join(pools) or "?"


_FACTS = {
    "hostname": lambda e: _get(e, "hostname"),
    "CPU": lambda e: _get(e, "cpu", "model"),
    "cores": lambda e: f"{_get(e, 'cpu', 'logical_cores')} logical / "
                       f"{_get(e, 'cpu', 'physical_cores')} physical, "
                       f"{len(_get(e, 'cpu', 'affinity') or [])} usable",
    "RAM": lambda e: human_bytes(_get(e, "memory", "total_bytes")
                                 if _get(e, "memory", "total_bytes") != "?" else None),
    "GPU": lambda e: gpu_line(e.get("gpu", {})),
    "OS": lambda e: f"{_get(e, 'os', 'system')} {_get(e, 'os', 'release')} "
                    f"{_get(e, 'os', 'machine')}",
    "libc": lambda e: _get(e, "os", "libc"),
    "torch threads": lambda e: f"{_get(e, 'torch', 'num_threads')} intra-op / "
                               f"{_get(e, 'torch', 'interop_threads')} inter-op",
    "thread pools": _pools,
    "data filesystem": lambda e: f"{_get(e, 'data', 'filesystem')} at "
                                 f"{_get(e, 'data', 'mount_point')}",
}


def environment_table(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """Environments side by side: ``(columns, rows)``.

    Runs whose facts are all the same share one column (``{"hostname", "runs"}``, ``runs``
    the 1-based positions of the records); each row is ``{"fact", "values", "differs"}``
    with one value per column. Rows that differ are where a difference between machines
    is traced. Every package in the records' ``versions`` gets a row.
    """
    packages = list(dict.fromkeys(k for r in records for k in r["environment"].get("versions")
                                  or {}))
    facts = []
    for r in records:
        env = r["environment"]
        versions = env.get("versions") or {}
        row = [str(fn(env)) for fn in _FACTS.values()]
        row += [str(versions[p]) if versions.get(p) is not None else "not installed"
                for p in packages]
        facts.append(tuple(row))
    groups: dict[tuple, list[int]] = {}
    for i, f in enumerate(facts, 1):
        groups.setdefault(f, []).append(i)
    columns = [{"hostname": f[0], "runs": runs} for f, runs in groups.items()]
    names = [*_FACTS, *(f"version: {p}" for p in packages)]
    rows = [{"fact": name, "values": [f[i] for f in groups],
             "differs": len({f[i] for f in groups}) > 1} for i, name in enumerate(names)]
    return columns, rows


def _runs_text(runs: list[int]) -> str:
    return ("run " if len(runs) == 1 else "runs ") + ", ".join(map(str, runs))


def chapter_warnings(records: list[dict], chapter: str) -> list[str]:
    """Why a chapter's runs may not be comparable: different scales or constraints."""
    numbered = [(i, r) for i, r in enumerate(records, 1) if r["chapter"] == chapter]
    out = []
    scales = {}
    for i, r in numbered:
        scales.setdefault(r["scale"], []).append(i)
    if len(scales) > 1:
        out.append("runs at different scales (" + "; ".join(
            f"{s}: {_runs_text(runs)}" for s, runs in scales.items()) + "): sizes differ, so "
            "throughputs are not comparable")
    kinds = {}
    for i, r in numbered:
        kinds.setdefault(tuple(sorted(map(str, r.get("constraints") or []))), []).append(i)
    if len(kinds) > 1:
        out.append("runs under different constraints (" + "; ".join(
            f"{_runs_text(runs)}: {', '.join(k) or 'none'}" for k, runs in kinds.items())
            + "): compare with care")
    return out


# -- plots --------------------------------------------------------------------------------

def _figure(records: list[dict], labels: list[str], chapter: str | None = None):
    """Grouped horizontal bars, one panel per (chapter, unit); None if nothing to plot."""
    import matplotlib
    from matplotlib.patches import Patch


    # colours by column: a chapter's plot reads in the order of its table's columns
    palette = "tab10" if len(labels) <= 10 else "tab20"
    cmap = {lb: matplotlib.colormaps[palette](i % 20) for i, lb in enumerate(labels)}
    groups: dict[tuple, list[dict]] = {}
    for row in comparison_rows(records):
        if (chapter is None or row["chapter"] == chapter) and any(
                _is_number(row[lb]) for lb in labels):
            groups.setdefault((row["chapter"], row["unit"]), []).append(row)
    # Per panel only the runs that have a number there, so sparse chapters stay readable.
    runs = {g: [lb for lb in labels if any(_is_number(r[lb]) for r in rows)]
            for g, rows in groups.items()}
    shown = [lb for lb in labels if any(lb in rs for rs in runs.values())]
    if chapter is not None and not groups:
        return None
    heights = [1 + 0.25 * len(rows) * len(runs[g]) for g, rows in groups.items()] or [2]
    fig = agg_figure(figsize=(10, min(1.5 + sum(heights), 80)), layout="constrained")
    axes = fig.subplots(len(heights), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (g, rows) in zip(axes, groups.items(), strict=False):
        bar = 0.8 / len(runs[g])
        for j, lb in enumerate(runs[g]):
            ys = [i - 0.4 + bar * (j + 0.5) for i in range(len(rows))]
            xs = [row[lb] if _is_number(row[lb]) else 0 for row in rows]
            bars = ax.barh(ys, xs, height=bar, color=cmap[lb])
            ax.bar_label(bars, [_cell(row[lb]) if _is_number(row[lb]) else "" for row in rows],
                         padding=2, fontsize=7)
        ax.set_yticks(range(len(rows)),
                      [_short(f"{r['name']}\n{r['config']}".strip()) for r in rows], fontsize=8)
        ax.invert_yaxis()  # first observation on top, as in the table
        ax.set_title(g[1] if chapter is not None else g[0], loc="left", fontsize=10)
        ax.set_xlabel(g[1], fontsize=8)
        positive = [r[lb] for r in rows for lb in runs[g] if _is_number(r[lb]) and r[lb] > 0]
        if positive and max(positive) > 50 * min(positive):  # 3 orders apart: log or invisible
            ax.set_xscale("log")
            ax.set_xlabel(f"{g[1]} (log scale)", fontsize=8)
        ax.margins(x=0.15)  # room for the value labels
    if groups:
        number = {lb: i for i, lb in enumerate(run_labels(records), 1)}  # as in the runs table
        fig.legend([Patch(color=cmap[lb]) for lb in shown],
                   [f"run {number[lb]}: {lb}" for lb in shown], loc="outside upper center",
                   ncols=min(3, len(shown)), fontsize=8)
    else:
        axes[0].set_axis_off()
        axes[0].text(0.5, 0.5, "no numeric observations to plot", ha="center", va="center")
    return fig


def plot_comparison(records: list[dict], path) -> Path:
    """A PNG of grouped horizontal bars: one panel per (chapter, unit), one colour per run."""
    path = Path(path)
    _figure(records, run_labels(records)).savefig(path, dpi=110)
    return path


def chapter_plot(records: list[dict], chapter: str, dpi: int = 96) -> bytes | None:
    """One chapter's bars as PNG bytes (one panel per unit); None if it has no numbers."""
    labels = [lb for lb, r in zip(run_labels(records), records, strict=True)
              if r["chapter"] == chapter]
    fig = _figure(records, labels, chapter)
    if fig is None:
        return None

    return png_bytes(fig, dpi)


def _short(text: str, n: int = 40) -> str:
    return "\n".join(ln if len(ln) <= n else ln[: n - 1] + "…" for ln in text.splitlines())
