"""The report written out: Markdown with a PNG beside it, or one self-contained HTML (ch. 00)."""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path

from ..errors import LabkitError
from ..records.checkpoint import format_config, load_records
from .report import (
    FAR,
    FORMATS,
    _cell,
    _runs_text,
    _sections,
    baselines,
    chapter_plot,
    chapter_warnings,
    comparison_rows,
    environment_table,
    plot_comparison,
    ratio,
    run_labels,
)


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
