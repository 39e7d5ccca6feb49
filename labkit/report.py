"""Comparing checkpoint records across runs and machines (``labkit report``).

Each record is one run: a chapter on one machine at one time. Rows line up the same
observation (name, unit, knobs) across runs, so a workshop can put a laptop beside a
workstation, or a run before a knob change beside the run after. Introduced in chapter 00.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from .checkpoint import format_config, format_value, read_checkpoint
from .errors import RecordError
from .machine import gpu_line, human_bytes

_FIXED = ("chapter", "name", "unit", "config")


def load_records(dirs) -> list[dict]:
    """Read every ``*.json`` record under the folders (recursive), oldest first.

    Raises:
        RecordError: a folder is missing or holds no records, or a record is invalid.
    """
    dirs = [dirs] if isinstance(dirs, (str, Path)) else list(dirs)
    if not dirs:
        raise RecordError("no records folder given")
    records, seen = [], set()
    for d in map(Path, dirs):
        if not d.exists():
            raise RecordError(f"records folder {d} does not exist")
        files = [d] if d.is_file() else sorted(d.rglob("*.json"))
        if not files:
            raise RecordError(f"{d} holds no checkpoint records (*.json); run a chapter's "
                              "checkpoint cell first, or point at the folder LABKIT_RECORDS names")
        for f in files:
            if f.resolve() not in seen:
                seen.add(f.resolve())
                records.append({**read_checkpoint(f), "_source": str(f)})
    return sorted(records, key=lambda r: str(r["created"]))


def run_labels(records: list[dict]) -> list[str]:
    """``hostname @ 2026-05-09 07:35`` per record, made unique with ``#2``, ``#3``."""
    labels, counts = [], {}
    for r in records:
        try:
            when = datetime.fromisoformat(r["created"]).astimezone(UTC)
            stamp = when.strftime("%Y-%m-%d %H:%M")
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
        col_w = [max(len(h), *(len(v[j]) for v in vals)) for j, h in enumerate(heads)]
        out.append(f"== {chapter} ==")
        if heads != runs:
            out.extend(f"  {h} = {run}" for h, run in zip(heads, runs, strict=True))
        out.append(f"{'observation':<{first}}  {'unit':<{unit_w}}"
                   + "".join(f"  {h:>{w}}" for h, w in zip(heads, col_w, strict=True)))
        for name, row, v in zip(names, part, vals, strict=True):
            out.append(f"{name:<{first}}  {row['unit']:<{unit_w}}"
                       + "".join(f"  {x:>{w}}" for x, w in zip(v, col_w, strict=True)))
        out.append("")
    return "\n".join(out).rstrip()


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def plot_comparison(records: list[dict], path) -> Path:
    """A PNG of grouped horizontal bars: one panel per (chapter, unit), one colour per run."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    labels = run_labels(records)
    palette = "tab10" if len(labels) <= 10 else "tab20"
    colours = {lb: (palette, i % 20) for i, lb in enumerate(labels)}
    groups: dict[tuple, list[dict]] = {}
    for row in comparison_rows(records):
        if any(_is_number(row[lb]) for lb in labels):
            groups.setdefault((row["chapter"], row["unit"]), []).append(row)
    # Per panel only the runs that have a number there, so sparse chapters stay readable.
    runs = {g: [lb for lb in labels if any(_is_number(r[lb]) for r in rows)]
            for g, rows in groups.items()}
    heights = [1 + 0.25 * len(rows) * len(runs[g]) for g, rows in groups.items()] or [2]
    fig = Figure(figsize=(10, min(1.5 + sum(heights), 80)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(heights), 1, squeeze=False, height_ratios=heights)[:, 0]
    cmap = {lb: matplotlib.colormaps[name](i) for lb, (name, i) in colours.items()}
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
        ax.set_title(g[0], loc="left", fontsize=10)
        ax.set_xlabel(g[1], fontsize=8)
        positive = [r[lb] for r in rows for lb in runs[g] if _is_number(r[lb]) and r[lb] > 0]
        if positive and max(positive) > 50 * min(positive):  # 3 orders apart: log or invisible
            ax.set_xscale("log")
            ax.set_xlabel(f"{g[1]} (log scale)", fontsize=8)
        ax.margins(x=0.15)  # room for the value labels
    if groups:
        fig.legend([Patch(color=cmap[lb]) for lb in labels], labels, loc="outside upper center",
                   ncols=min(3, len(labels)), fontsize=8)
    else:
        axes[0].set_axis_off()
        axes[0].text(0.5, 0.5, "no numeric observations to plot", ha="center", va="center")
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path


def _short(text: str, n: int = 40) -> str:
    return "\n".join(ln if len(ln) <= n else ln[: n - 1] + "…" for ln in text.splitlines())


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], body: list[list]) -> list[str]:
    lines = ["| " + " | ".join(map(_md, header)) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_md(c) for c in row) + " |" for row in body]


def _env_rows(records: list[dict]) -> list[list]:
    def get(env, *keys):
        for k in keys:
            env = env.get(k) if isinstance(env, dict) else None
        return env if env is not None else "?"

    facts = {
        "CPU": lambda e: get(e, "cpu", "model"),
        "cores": lambda e: f"{get(e, 'cpu', 'logical_cores')} logical / "
                           f"{get(e, 'cpu', 'physical_cores')} physical",
        "RAM": lambda e: human_bytes(get(e, "memory", "total_bytes")),
        "GPU": lambda e: gpu_line(e.get("gpu", {})),
        "OS": lambda e: f"{get(e, 'os', 'system')} {get(e, 'os', 'release')} "
                        f"{get(e, 'os', 'machine')}",
        "python": lambda e: get(e, "python", "version"),
        "torch": lambda e: get(e, "versions", "torch"),
        "numpy": lambda e: get(e, "versions", "numpy"),
        "data filesystem": lambda e: f"{get(e, 'data', 'filesystem')} at "
                                     f"{get(e, 'data', 'mount_point')}",
    }
    return [[fact] + [fn(r["environment"]) for r in records] for fact, fn in facts.items()]


def write_report(dirs, out=None) -> Path:
    """Write a Markdown report (runs, environments, observations, plot); returns its path.

    ``out`` defaults to ``report.md`` in the current folder; the PNG goes beside it.
    """
    records = load_records(dirs)
    out = Path(out) if out is not None else Path.cwd() / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    png = plot_comparison(records, out.with_suffix(".png"))
    labels = run_labels(records)
    rows = comparison_rows(records)
    folders = ", ".join(str(d) for d in ([dirs] if isinstance(dirs, (str, Path)) else dirs))
    lines = ["# labkit report", "",
             f"{len(records)} checkpoint records from {folders}.", "", "## Runs", ""]
    lines += _md_table(["run", "chapter", "scale", "labkit", "record"],
                       [[lb, r["chapter"], r["scale"], r.get("labkit_version") or "?",
                         Path(r["_source"]).name] for lb, r in zip(labels, records, strict=True)])
    lines += ["", "## Environments", ""]
    lines += _md_table(["", *labels], _env_rows(records))
    lines += ["", "## Observations", ""]
    for chapter, part, runs in _sections(rows):
        lines += [f"### {chapter}", ""]
        lines += _md_table(["observation", "config", "unit", *runs],
                           [[row["name"], row["config"], row["unit"],
                             *(_cell(row[run]) for run in runs)] for row in part])
        lines.append("")
    lines += ["## Plot", "", f"![observations per run]({png.name})", ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    return out
