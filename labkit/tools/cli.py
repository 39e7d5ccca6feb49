"""The ``labkit`` command, from ``labkit fixtures`` to ``labkit lab`` (ch. 00 on).

Subcommands: fixtures, env, doctor, run, report, bench, diagnose, helpers, lab.

Every subcommand has ``--help``; bad arguments and bad input (unknown scale, notebook,
benchmark, corrupted fixture, unwritable folder) print one clear line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys

from ..data.fixtures import ensure_fixtures, load_specs, resolve_spec
from ..errors import LabkitError
from ..paths import notebooks_dir
from ..records.checkpoint import load_records
from ..records.machine import environment, format_environment
from ..scale import SCALES, resolve_scale
from .bench import BENCHMARKS, format_result, run_benchmark
from .checkup import doctor, format_doctor
from .diagnose import run_diagnose
from .helpers import chapter_helpers, format_helpers
from .render import report_format, write_report
from .report import comparison_rows, format_table
from .runner import run_notebooks


def _cmd_fixtures(args) -> int:
    if args.list:
        for name, spec in load_specs().items():
            print(f"{name:<14}{spec['kind']:<12}{resolve_spec(spec, _scale(args))}")
        return 0
    ensure_fixtures(args.names or None, _scale(args), repair=args.repair,
                    verify_all=args.verify, progress=not args.no_progress)
    return 0


def _scale(args) -> str:
    return resolve_scale(args.scale)


def _cmd_env(args) -> int:
    env = environment(data_path=args.data)
    print(json.dumps(env, indent=2) if args.json else format_environment(env))
    return 0


def _cmd_doctor(args) -> int:
    checks = doctor()
    if args.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        print(format_doctor(checks))
    return 0 if all(c.ok for c in checks) else 1


def _cmd_run(args) -> int:
    results = run_notebooks(args.notebooks or None, _scale(args), args.out, args.timeout)
    return 0 if all(r.ok for r in results) else 1


def _cmd_report(args) -> int:
    fmt = report_format(args.out, args.format)  # a bad --out/--format fails before any work
    records = load_records(args.dirs)
    print(format_table(comparison_rows(records)))
    path = write_report(args.dirs, args.out, fmt, args.baseline, records=records)
    if fmt == "html":
        print(f"\nreport: {path} (one file, plots inside; open it in a browser)")
    else:
        print(f"\nreport: {path}\nplot:   {path.with_suffix('.png')}")
    return 0


def _cmd_bench(args) -> int:
    if args.list or not args.name:
        for name, fn in sorted(BENCHMARKS.items()):
            print(f"{name:<18}{fn.goal}")
        if not args.list:
            raise LabkitError("name a benchmark to run (the ones above), e.g. labkit bench "
                              f"{min(BENCHMARKS)}")
        return 0
    try:
        result = run_benchmark(args.name)
    except KeyError as e:
        raise LabkitError(e.args[0]) from None
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0


def _cmd_helpers(args) -> int:
    rows = chapter_helpers(args.chapter)
    print(json.dumps(rows, indent=1) if args.json else format_helpers(rows))
    return 0


def _cmd_diagnose(args) -> int:
    d = run_diagnose(args.factory, step_ms=args.step_ms, batches=args.batches,
                     timeline=args.timeline, time_limit_s=args.time_limit)
    print(json.dumps(d.as_dict(), indent=2) if args.json else d)
    return 0


def _cmd_lab(args) -> int:
    scale = _scale(args)
    if importlib.util.find_spec("jupyterlab") is None:
        raise LabkitError("JupyterLab is not installed here; install the kit: pip install -e .")
    ensure_fixtures(scale=scale)

    for check in doctor():  # e.g. chapter 15 without FFmpeg's libraries: what to install
        if not check.ok:
            print(check)
    # This interpreter's own JupyterLab: `jupyter` need not be on PATH (make calls
    # .venv/bin/labkit without activating the virtual environment).
    extra = args.lab_args[1:] if args.lab_args[:1] == ["--"] else args.lab_args
    argv = [sys.executable, "-m", "jupyterlab", str(notebooks_dir()), *extra]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in argv:
        argv.append("--allow-root")  # workshop containers often run as root; Lab refuses
        print("running as root (a container?): passing --allow-root to JupyterLab")
    print("starting:", " ".join(argv))
    os.environ["LABKIT_SCALE"] = scale  # the kernels inherit it: chapters run at this scale
    os.execv(sys.executable, argv)  # replaces this process: Ctrl-C stops JupyterLab as usual
    return 0  # pragma: no cover


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="labkit",
        description="Just-in-time data loading in PyTorch, measured on your machine.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def scale_opt(sp):
        sp.add_argument("--scale", choices=SCALES, default=None,
                        help="ci, workshop or full (default: LABKIT_SCALE, else workshop)")

    f = sub.add_parser("fixtures", help="generate and verify the synthetic fixtures")
    f.add_argument("names", nargs="*", metavar="NAME", help="fixtures to make (default: all)")
    scale_opt(f)
    f.add_argument("--repair", action="store_true",
                   help="regenerate fixtures whose files fail verification")
    f.add_argument("--verify", action="store_true", help="hash every file, not just changed ones")
    f.add_argument("--list", action="store_true", help="list the specs and exit")
    f.add_argument("--no-progress", action="store_true", help="no progress bars")
    f.set_defaults(fn=_cmd_fixtures)

    e = sub.add_parser("env", help="this machine's hardware, versions and data path")
    e.add_argument("--json", action="store_true", help="print the full record as JSON")
    e.add_argument("--data", default=None, help="data path to describe (default: fixture cache)")
    e.set_defaults(fn=_cmd_env)

    dr = sub.add_parser("doctor", help="what this machine gives the chapters, and what to fix "
                        "(exit 1 if something needs fixing)")
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.set_defaults(fn=_cmd_doctor)

    r = sub.add_parser("run", help="execute chapters headless and write their records")
    r.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="chapters: 01, 01_measuring_a_loader or a path (default: all)")
    scale_opt(r)
    r.add_argument("--out", default=None, help="output folder (default: runs/<time>-<host>)")
    r.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    r.set_defaults(fn=_cmd_run)

    rp = sub.add_parser("report", help="compare checkpoint records across runs and machines")
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="folders of records")
    rp.add_argument("--out", default=None,
                    help="report path; .html or .md picks the format (default: report.md)")
    rp.add_argument("--format", choices=("html", "md"), default=None,
                    help="html: one self-contained file, plots embedded; md: Markdown + a PNG "
                         "(default: from --out's suffix, else md)")
    rp.add_argument("--baseline", default=None, metavar="RUN",
                    help="ratios against this run: a hostname, a run label or part of a "
                         "records folder (default: each chapter's first run)")
    rp.set_defaults(fn=_cmd_report)

    b = sub.add_parser("bench", help="run a named benchmark and print its figures")
    b.add_argument("name", nargs="?", metavar="NAME", help="benchmark name (see --list)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.add_argument("--list", action="store_true", help="list the benchmarks")
    b.set_defaults(fn=_cmd_bench)

    d = sub.add_parser("diagnose", help="find what bounds your own DataLoader, and a fix")
    d.add_argument("factory", metavar="MODULE:FACTORY",
                   help="a zero-argument callable returning a DataLoader or any iterable of "
                        "batches: mypkg.data:make_loader or path/to/train.py:make_loader")
    d.add_argument("--step-ms", type=float, default=None, metavar="MS",
                   help="the training step the loader must feed, in ms (default: no step)")
    d.add_argument("--batches", type=int, default=40, metavar="N",
                   help="batches per measured pass (default 40)")
    d.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    d.add_argument("--timeline", default=None, metavar="PATH",
                   help="also draw a per-batch worker timeline to this PNG")
    d.add_argument("--time-limit", type=float, default=300, metavar="S",
                   help="give up after this many seconds, naming the phase (default 300)")
    d.set_defaults(fn=_cmd_diagnose)

    h = sub.add_parser("helpers", help="the labkit helpers a chapter calls, file and line")
    h.add_argument("chapter", metavar="NN", help="the chapter's number, e.g. 08")
    h.add_argument("--json", action="store_true", help="print the rows as JSON")
    h.set_defaults(fn=_cmd_helpers)

    lab = sub.add_parser("lab", help="make the fixtures, then open JupyterLab on the chapters")
    scale_opt(lab)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(fn=_cmd_lab)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a usage message on bad arguments
    try:
        return args.fn(args)
    except LabkitError as e:
        print(f"labkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"labkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
