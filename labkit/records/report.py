"""Comparing checkpoint records across runs and machines (``labkit report``).

Each record is one run: a chapter on one machine at one time. Rows line up the same
observation (name, unit, knobs) across runs, so a workshop can put a laptop beside a
workstation, or a run before a knob change beside the run after. The report is Markdown
(a PNG beside it) or one self-contained HTML file (plots embedded, no scripts, nothing
fetched). Introduced in chapter 00.
"""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import UTC, datetime
from pathlib import Path

from ..errors import LabkitError, RecordError
from .checkpoint import format_config, format_value, read_checkpoint
from .machine import gpu_line, human_bytes

_FIXED = ("chapter", "name", "unit", "config")
FORMATS = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
FAR = 1.25  # a ratio beyond 1.25x (or under 1/1.25) is marked: more than run-to-run noise


def load_records(dirs) -> list[dict]:
    """Read every ``*.json`` record under the folders (recursive), oldest first.

    Each record gains ``_source`` (its file) and ``_folder`` (the folder it was found in).

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
                records.append({**read_checkpoint(f), "_source": str(f), "_folder": str(d)})
    return sorted(records, key=lambda r: str(r["created"]))


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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
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
    fig = Figure(figsize=(10, min(1.5 + sum(heights), 80)), layout="constrained")
    FigureCanvasAgg(fig)
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
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _short(text: str, n: int = 40) -> str:
    return "\n".join(ln if len(ln) <= n else ln[: n - 1] + "…" for ln in text.splitlines())


# -- the report ---------------------------------------------------------------------------

def report_format(out=None, fmt: str | None = None) -> str:
    """``"html"`` or ``"md"``: ``fmt`` if given, else from ``out``'s suffix, else Markdown.

    Raises:
        LabkitError: an unknown format, a suffix that names neither, or the two disagree.
    """
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


def write_report(dirs, out=None, fmt: str | None = None, baseline: str | None = None,
                 records: list[dict] | None = None) -> Path:
    """Write the report (runs, environments, observations with ratios, plots); its path.

    ``fmt`` is ``"html"`` (one self-contained file, plots embedded) or ``"md"`` (the PNG
    goes beside it); by default taken from ``out``'s suffix. ``out`` defaults to
    ``report.md`` / ``report.html`` in the current folder. Ratios are against the first run
    of each chapter, or the run ``baseline`` names (see :func:`baselines`). ``records``:
    the folders' records if the caller has already loaded them (:func:`load_records`).
    """
    fmt = report_format(out, fmt)
    records = load_records(dirs) if records is None else records
    base = baselines(records, baseline)
    out = Path(out) if out is not None else Path.cwd() / f"report.{fmt}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabkitError(f"cannot create the report's folder {out.parent}: {e}") from e
    folders = [str(d) for d in ([dirs] if isinstance(dirs, (str, Path)) else dirs)]
    if fmt == "html":
        text = _html_report(records, folders, base, baseline)
    else:
        png = plot_comparison(records, out.with_suffix(".png"))
        text = _md_report(records, folders, base, png.name)
    out.write_text(text, encoding="utf-8")
    return out


def _chapter_table(part, runs, base):
    """Header and rows of one chapter: each run's value, then its ratio to the baseline."""
    others = [r for r in runs if r != base] if base in runs else []
    cols = [(run, None) for run in runs] + [(run, base) for run in others]
    body = []
    for row in part:
        cells = [(row[run], None) for run in runs]
        cells += [(row[run], ratio(row[run], row[base])) for run in others]
        body.append(cells)
    return cols, body


def _ratio_text(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}x"


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], body: list[list]) -> list[str]:
    lines = ["| " + " | ".join(map(_md, header)) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_md(c) for c in row) + " |" for row in body]


def _md_report(records, folders, base, png_name) -> str:
    labels = run_labels(records)
    number = {lb: i for i, lb in enumerate(labels, 1)}
    lines = ["# labkit report", "",
             f"{len(records)} checkpoint records from {', '.join(folders)}.", "", "## Runs", ""]
    lines += _md_table(["#", "run", "chapter", "scale", "labkit", "folder", "record"],
                       [[i, lb, r["chapter"], r["scale"], r.get("labkit_version") or "?",
                         r["_folder"], Path(r["_source"]).name]
                        for i, (lb, r) in enumerate(zip(labels, records, strict=True), 1)])
    columns, env_rows = environment_table(records)
    lines += ["", "## Environments", "",
              "Runs with identical facts share a column; facts marked **≠** differ between "
              "the columns: that is where a difference between machines is traced.", ""]
    differ = [row["fact"] for row in env_rows if row["differs"]]
    lines += [f"Differ: {', '.join(differ)}.", ""] if differ else []
    lines += _md_table(["", *(f"{c['hostname']} ({_runs_text(c['runs'])})" for c in columns)],
                       [[f"**{row['fact']}** ≠" if row["differs"] else row["fact"],
                         *row["values"]] for row in env_rows])
    lines += ["", "## Observations", "",
              "`run N ÷ run M` columns: run N's value divided by the baseline run's (the "
              "chapter's first run unless `--baseline` chose another).", ""]
    for chapter, part, runs in _sections(comparison_rows(records)):
        cols, body = _chapter_table(part, runs, base.get(chapter))
        head = [f"{run} (run {number[run]}"
                + (", baseline)" if run == base.get(chapter) and len(runs) > 1 else ")")
                for run, b in cols if b is None]
        head += [f"run {number[run]} ÷ run {number[b]}" for run, b in cols if b is not None]
        lines += [f"### {chapter}", ""]
        lines += [f"**Note:** {w}." for w in chapter_warnings(records, chapter)]
        lines += [""] if chapter_warnings(records, chapter) else []
        lines += _md_table(["observation", "config", "unit", *head],
                           [[row["name"], row["config"], row["unit"],
                             *(_cell(v) if b is None else _ratio_text(x)
                               for (v, x), (_, b) in zip(cells, cols, strict=True))]
                            for row, cells in zip(part, body, strict=True)])
        lines.append("")
    lines += ["## Plot", "", f"![observations per run]({png_name})", ""]
    return "\n".join(lines)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;
max-width:1200px;padding:0 1em;color:#1b1b1b}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
h3{margin:1.4em 0 .3em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
th,td{border:1px solid #d0d0d0;padding:3px 8px;vertical-align:top;text-align:left}
th{background:#f3f3f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.differs td,tr.differs th{background:#fff3c4}tr.differs th::before{content:"≠ ";color:#b15c00}
td.far{font-weight:bold;color:#8a2a00}th.ratio,td.ratio{background:#f7f9fc}
.sub{font-weight:normal;color:#555;font-size:12px}.note{color:#555}
.warn{background:#fdecea;border-left:4px solid #c0392b;padding:4px 8px}
code{background:#f3f3f3;padding:0 3px}img{max-width:100%;border:1px solid #eee}
nav{display:flex;flex-wrap:wrap;gap:.2em .9em}.wide{overflow-x:auto;max-width:100%}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _html_table(head: list[str], rows: list[str], cls: str = "") -> str:
    cls = f' class="{cls}"' if cls else ""
    # in a scrolling box: many runs make wide tables, and the page itself should not scroll
    return (f"<div class=wide><table{cls}><thead><tr>{''.join(head)}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _anchor(chapter: str) -> str:
    return "ch-" + "".join(c if c.isalnum() else "-" for c in chapter)


def _html_report(records, folders, base, baseline) -> str:
    labels = run_labels(records)
    number = {lb: i for i, lb in enumerate(labels, 1)}  # the # column of the runs table
    notes = {}  # (label, chapter, name, config) -> the observation's note, shown on hover
    for lb, r in zip(labels, records, strict=True):
        for o in r["observations"]:
            if o.get("note"):
                notes.setdefault((lb, r["chapter"], o["name"], format_config(o.get("config"))),
                                 o["note"])
    rows = comparison_rows(records)
    chapters = list(dict.fromkeys(row["chapter"] for row in rows))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>labkit report</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>labkit report</h1>",
           f"<p>{len(records)} checkpoint records from {len(folders)} folder"
           f"{'s' if len(folders) != 1 else ''}: "
           + ", ".join(f"<code>{_e(f)}</code>" for f in folders)
           + f". Written {_e(generated)}.</p>",
           '<nav><a href="#runs">Runs</a><a href="#environments">Environments</a>'
           + "".join(f'<a href="#{_anchor(c)}">{_e(c)}</a>' for c in chapters) + "</nav>"]

    # Runs
    out.append('<h2 id="runs">Runs</h2>')
    head = [f"<th>{h}</th>" for h in ("#", "run", "chapter", "scale", "labkit", "constraints",
                                      "folder", "record")]
    body = [f"<tr><td class=num>{i}</td><td>{_e(lb)}</td><td>{_e(r['chapter'])}</td>"
            f"<td>{_e(r['scale'])}</td><td>{_e(r.get('labkit_version') or '?')}</td>"
            f"<td>{_e('; '.join(map(str, r.get('constraints') or [])))}</td>"
            f"<td><code>{_e(r['_folder'])}</code></td><td>{_e(Path(r['_source']).name)}</td>"
            "</tr>" for i, (lb, r) in enumerate(zip(labels, records, strict=True), 1)]
    out.append(_html_table(head, body))

    # Environments
    columns, env_rows = environment_table(records)
    n_diff = sum(row["differs"] for row in env_rows)
    out.append('<h2 id="environments">Environments</h2>')
    if len(columns) == 1:
        out.append(f"<p>All {len(records)} runs report the same environment.</p>")
    else:
        differ = ", ".join(_e(row["fact"]) for row in env_rows if row["differs"])
        out.append(f"<p>{len(columns)} environments; runs with identical facts share a column. "
                   f"The {n_diff} highlighted row{'s' if n_diff != 1 else ''} (≠) differ: that "
                   f"is where a difference between machines is traced.<br>Differ: <b>{differ}"
                   "</b>.</p>")
    head = ["<th></th>"] + [f"<th>{_e(c['hostname'])}<br><span class=sub>"
                            f"{_e(_runs_text(c['runs']))}</span></th>" for c in columns]
    body = [f"<tr{' class=differs' if row['differs'] else ''}><th>{_e(row['fact'])}</th>"
            + "".join(f"<td>{_e(v)}</td>" for v in row["values"]) + "</tr>"
            for row in env_rows]
    out.append(_html_table(head, body, "env"))

    # Observations, one section per chapter
    out.append('<h2 id="observations">Observations</h2>')
    out.append(f"<p class=note>One column per run (numbered as in <a href=#runs>Runs</a>); "
               "<b>run N ÷ run M</b> columns divide a run's value by the baseline run's "
               "(the chapter's first run"
               f"{'' if baseline is None else ', or the one matching ' + _e(repr(baseline))}"
               f"); ratios beyond {FAR:.2f}x either way are in bold. Hover a value for its note "
               "(e.g. the spread of the passes). Compare runs only where their constraints "
               "match.</p>")
    for chapter, part, runs in _sections(rows):
        b = base.get(chapter)
        cols, body_cells = _chapter_table(part, runs, b)
        out.append(f'<section id="{_anchor(chapter)}"><h3>{_e(chapter)}</h3>')
        if len(runs) > 1 and b in runs:
            out.append(f"<p class=note>baseline: {_e(b)}</p>")
        out += [f"<p class=warn>⚠ {_e(w)}.</p>" for w in chapter_warnings(records, chapter)]
        head = ["<th>observation</th>", "<th>config</th>", "<th>unit</th>"]
        for run, against in cols:
            if against is None:
                tag = ", baseline" if run == b and len(runs) > 1 else ""
                head.append(f"<th class=num>{_e(run)}<br><span class=sub>run {number[run]}"
                            f"{tag}</span></th>")
            else:
                head.append(f"<th class='num ratio'>run {number[run]}<br><span class=sub>"
                            f"÷ run {number[against]}</span></th>")
        trs = []
        for row, cells in zip(part, body_cells, strict=True):
            tds = [f"<td>{_e(row['name'])}</td><td>{_e(row['config'])}</td>"
                   f"<td>{_e(row['unit'])}</td>"]
            for (v, x), (run, against) in zip(cells, cols, strict=True):
                if against is None:
                    note = notes.get((run, chapter, row["name"], row["config"]))
                    tip = f' title="{_e(note)}"' if note else ""
                    tds.append(f"<td class=num{tip}>{_e(_cell(v))}</td>")
                else:
                    far = x is not None and (x > FAR or x < 1 / FAR)
                    tds.append(f"<td class='num ratio{' far' if far else ''}'>"
                               f"{_e(_ratio_text(x))}</td>")
            trs.append("<tr>" + "".join(tds) + "</tr>")
        out.append(_html_table(head, trs, "obs"))
        png = chapter_plot(records, chapter)
        if png is not None:
            data = base64.b64encode(png).decode("ascii")
            out.append(f'<img alt="{_e(chapter)}: observations per run" '
                       f'src="data:image/png;base64,{data}">')
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
