"""The course's minutes at workshop pace, from the model CONTRIBUTING states (its section
"A chapter fits an hour"): each notebook's prose talked through, its code typed or read,
its cells' run time at workshop scale, and the time attendees spend on its exercises.

    python tests/course.py                     the table, from docs/workshop-run.json
    python tests/course.py runs/<run>/run.json the table from another ``labkit run``
    python tests/course.py --write RUN.json    that run's times merged into docs/workshop-run.json

``tests/test_course.py`` fails when a notebook is over :data:`LIMIT` minutes.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labkit_tools.runner import chapters

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "docs" / "workshop-run.json"   # a fresh clone's `labkit run --scale workshop`
LIMIT = 60                                  # minutes: a workshop's slot

WORDS_PER_MIN = 120      # prose talked through (a lecture's pace)
CODE_LINES_PER_MIN = 8   # code typed or read aloud: lines that are neither blank nor comment
# The exercises: attendees try the one they pick, then read its worked solution, for a fixed
# share of the slot. The section's prose and solution cells are theirs, not the lecture's
# (self-study does the rest; CI runs every solution).
EXERCISES_MIN = 10


@dataclass
class Minutes:
    notebook: str
    words: int
    code_lines: int
    run_s: float | None
    exercises: int

    @property
    def total(self) -> float:
        return (self.words / WORDS_PER_MIN + self.code_lines / CODE_LINES_PER_MIN
                + (self.run_s or 0) / 60 + (EXERCISES_MIN if self.exercises else 0))


def notebooks() -> list[Path]:
    """The chapters and their "Going further" notebooks, in ``labkit run``'s order."""
    return chapters(REPO / "notebooks")


def count(path: Path, run_s: float | None) -> Minutes:
    """Words and code lines outside the exercises (from the "## Exercises" heading to the
    next "## " heading), and the exercises' solution cells (the code cells there)."""
    nb = nbformat.read(path, as_version=4)
    words = code = exercises = 0
    in_exercises = False
    for cell in nb.cells:
        lines = [ln.strip() for ln in cell.source.splitlines()]
        if cell.cell_type == "markdown":
            for ln in cell.source.splitlines():
                if ln.startswith("## "):
                    in_exercises = ln.startswith("## Exercises")
                if not in_exercises:
                    words += len(ln.split())
        elif cell.cell_type == "code":
            if in_exercises:
                exercises += 1
            else:
                code += sum(1 for ln in lines if ln and not ln.startswith("#"))
    return Minutes(path.stem, words, code, run_s, exercises)


def run_seconds(run: Path = RUN) -> dict[str, float]:
    """``{notebook: seconds}`` from docs/workshop-run.json or one run's run.json (the
    notebooks that ran to their end)."""
    data = json.loads(run.read_text(encoding="utf-8"))
    return {name: r["seconds"] for name, r in data["notebooks"].items() if r.get("ok", True)}


def record(run_json: Path, into: Path = RUN) -> dict:
    """Merge one ``labkit run``'s run.json into ``into``: its notebooks' seconds replace
    theirs, each labelled with its run (the folder's name) and the run's machine kept under
    ``runs``; notebooks that no longer exist are dropped."""
    new = json.loads(run_json.read_text(encoding="utf-8"))
    if new.get("scale") != "workshop":
        raise SystemExit(f"{run_json}: a run at scale {new.get('scale')!r}, not 'workshop'")
    data = (json.loads(into.read_text(encoding="utf-8")) if into.exists()
            else {"runs": {}, "notebooks": {}})
    label = run_json.parent.name
    data["runs"][label] = {k: v for k, v in new.items() if k != "notebooks"}
    for name, r in new["notebooks"].items():
        if r["ok"]:
            data["notebooks"][name] = {"seconds": r["seconds"], "run": label,
                                       "load_1min": r.get("load_1min")}
    names = {p.stem for p in notebooks()}
    data["notebooks"] = {k: v for k, v in sorted(data["notebooks"].items()) if k in names}
    used = {v["run"] for v in data["notebooks"].values()}
    data["runs"] = {k: v for k, v in data["runs"].items() if k in used}
    into.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def table(rows: list[Minutes]) -> str:
    out = [f"{'notebook':<36} {'words':>6} {'code':>5} {'run s':>6} {'ex':>3} {'min':>5}"]
    for r in rows:
        run = f"{r.run_s:6.0f}" if r.run_s is not None else "     ?"
        flag = "  over" if r.total > LIMIT else ""
        out.append(f"{r.notebook:<36} {r.words:6} {r.code_lines:5} {run} {r.exercises:3} "
                   f"{r.total:5.0f}{flag}")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--write"]:
        for run_json in argv[1:]:
            record(Path(run_json))
        argv = []
    run = Path(argv[0]) if argv else RUN
    secs = run_seconds(run) if run.exists() else {}
    print(table([count(p, secs.get(p.stem)) for p in notebooks()]))


if __name__ == "__main__":
    main(sys.argv[1:])
