"""The ``labkit`` commands, from ``labkit fixtures`` to ``labkit room`` (ch. 00 on).

:mod:`labkit_tools.cli` parses the arguments, then imports this module (never the reverse).
Bad input (an unknown notebook or benchmark, a corrupted fixture, an unwritable folder)
prints one clear line and exits 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from labkit.ceilings import measure_ceilings
from labkit.data.fixtures import ensure_fixtures, load_specs, resolve_spec
from labkit.errors import LabkitError
from labkit.paths import notebooks_dir
from labkit.records.checkpoint import Checkpoint, load_records
from labkit.records.machine import environment, format_environment
from labkit.scale import resolve_scale

from .bench import BENCHMARKS, format_result, record_result, run_benchmark
from .checkup import doctor, format_doctor
from .diagnose import run_diagnose
from .report import baselines, chapter_table, comparison, report_format, write_report
from .room import serve, submit
from .runner import run_notebooks


def _cmd_fixtures(args) -> int:
    if args.list:
        for name, spec in load_specs().items():
            print(f"{name:<14}{spec['kind']:<12}{resolve_spec(spec, resolve_scale(args.scale))}")
        return 0
    ensure_fixtures(args.names or None, resolve_scale(args.scale), repair=args.repair,
                    verify_all=args.verify, progress=not args.no_progress)
    return 0


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
    results = run_notebooks(args.notebooks or None, args.scale, args.out, args.timeout)
    return 0 if all(r.ok for r in results) else 1


def _cmd_report(args) -> int:
    fmt = report_format(args.out, args.format)  # a bad --out/--format fails before any work
    records = load_records(args.dirs)
    wide = comparison(records)
    for chapter, base in baselines(records, args.baseline).items():
        print(f"== {chapter} ==\n"
              f"{chapter_table(records, chapter, base, wide).to_string(index=False)}\n")
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
    if args.records:
        print(f"record: {record_result(result, args.records)}", file=sys.stderr)
    return 0


def _cmd_roofline(args) -> int:
    scale = resolve_scale(args.scale)
    ceilings = measure_ceilings(args.names or None, scale)
    if args.json:
        print(json.dumps({k: {"label": c.label, "rate": c.rate, "lo": c.lo, "hi": c.hi,
                              "trials": len(c.trials), "unit": c.unit, "how": c.how,
                              "why": c.why} for k, c in ceilings.items()}, indent=2))
    else:
        print("\n".join(f"{k:<16}{c}" for k, c in ceilings.items()))
    ck = Checkpoint("roofline", scale=scale, records_dir=args.records).add(ceilings)
    ck.constraint("each ceiling measured alone, in one process")
    print(f"record: {ck.write(print_summary=False)}", file=sys.stderr)
    return 0


def _cmd_diagnose(args) -> int:
    d = run_diagnose(args.factory, step_ms=args.step_ms, batches=args.batches,
                     timeline=args.timeline, time_limit_s=args.time_limit)
    print(json.dumps(d.as_dict(), indent=2) if args.json else d)
    return 0


def _cmd_lab(args) -> int:
    scale = resolve_scale(args.scale)
    if importlib.util.find_spec("jupyterlab") is None:
        raise LabkitError("JupyterLab is not installed here; install the kit: pip install -e .")
    ensure_fixtures(scale=scale)

    for check in doctor():  # e.g. chapter 15 without FFmpeg's libraries: what to install
        if not check.ok:
            print(check)
    # this interpreter's own JupyterLab: `jupyter` need not be on PATH
    extra = args.lab_args[1:] if args.lab_args[:1] == ["--"] else args.lab_args
    argv = [sys.executable, "-m", "jupyterlab", str(notebooks_dir()), *extra]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in argv:
        argv.append("--allow-root")  # workshop containers often run as root; Lab refuses
        print("running as root (a container?): passing --allow-root to JupyterLab")
    print("starting:", " ".join(argv))
    os.environ["LABKIT_SCALE"] = scale  # the kernels inherit it: chapters run at this scale
    # labkit_tools/jupyter/labconfig: no Jupyter news prompt (nothing reaches the network);
    # a learner's own settings still win over these defaults
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [
        str(Path(__file__).parent / "jupyter"), os.environ.get("JUPYTER_CONFIG_PATH")]))
    os.execv(sys.executable, argv)  # replaces this process: Ctrl-C stops JupyterLab as usual
    return 0  # pragma: no cover


def _cmd_room_serve(args) -> int:
    serve(args.folder, args.host, args.port, args.code, args.body_seconds)
    return 0


def _cmd_room_submit(args) -> int:
    return submit(args.url, args.code, args.records)


COMMANDS = {  # the subcommand's name -> its function
    "fixtures": _cmd_fixtures,
    "env": _cmd_env,
    "doctor": _cmd_doctor,
    "run": _cmd_run,
    "report": _cmd_report,
    "bench": _cmd_bench,
    "roofline": _cmd_roofline,
    "diagnose": _cmd_diagnose,
    "lab": _cmd_lab,
    "room_serve": _cmd_room_serve,
    "room_submit": _cmd_room_submit,
}


def run(args) -> int:
    """Run the command :mod:`labkit_tools.cli` parsed, its errors as one line."""
    try:
        return COMMANDS[args.command_fn](args)
    except LabkitError as e:
        print(f"labkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"labkit {args.command}: interrupted", file=sys.stderr)
        return 130
