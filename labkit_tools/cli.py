"""The ``labkit`` command line, read before torch is imported (issue 33).

The parser alone, so ``--help`` and a usage error answer at once, not after the 3.6 s
``import labkit`` takes; a command's work then imports :mod:`labkit_tools.commands`.
"""

from __future__ import annotations

import argparse
import sys

SCALES = ("ci", "workshop", "full")   # labkit.scale.SCALES (tests/test_cli.py checks)


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
    f.set_defaults(command_fn="fixtures")

    e = sub.add_parser("env", help="this machine's hardware, versions and data path")
    e.add_argument("--json", action="store_true", help="print the full record as JSON")
    e.add_argument("--data", default=None, help="data path to describe (default: fixture cache)")
    e.set_defaults(command_fn="env")

    dr = sub.add_parser("doctor", help="what this machine gives the chapters, and what to fix "
                        "(exit 1 if something needs fixing)")
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.set_defaults(command_fn="doctor")

    r = sub.add_parser("run", help="execute chapters headless and write their records")
    r.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="chapters: 01, 01_measuring_a_loader or a path (default: all)")
    scale_opt(r)
    r.add_argument("--out", default=None, help="output folder (default: runs/<time>-<host>)")
    r.add_argument("--cell-timeout", "--timeout", dest="timeout", type=int, default=None,
                   metavar="SECONDS", help="how long one cell may run before the chapter "
                   "stops (a hang guard; default by scale: ci 600, workshop 1800, full 7200)")
    r.set_defaults(command_fn="run")

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
    rp.set_defaults(command_fn="report")

    b = sub.add_parser("bench", help="run a named benchmark and print its figures")
    b.add_argument("name", nargs="?", metavar="NAME", help="benchmark name (see --list)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.add_argument("--list", action="store_true", help="list the benchmarks")
    b.add_argument("--records", default=None, metavar="DIR",
                   help="also write the figures as a record bench_NAME in DIR (labkit report)")
    b.set_defaults(command_fn="bench")

    rl = sub.add_parser("roofline", help="measure this machine's data-loading ceilings "
                        "(read, copy, fetch, hand-over, decode, GPU), each with its spread")
    rl.add_argument("names", nargs="*", metavar="CEILING",
                    help="ceilings to measure (default: all): page_cache_read, memcpy, "
                         "sample_fetch, handover, jpeg_decode, h2d")
    scale_opt(rl)
    rl.add_argument("--json", action="store_true", help="print the ceilings as JSON")
    rl.add_argument("--records", default=None, metavar="DIR",
                    help="write the record 'roofline' here (default: LABKIT_RECORDS, "
                         "else records/)")
    rl.set_defaults(command_fn="roofline")

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
    d.set_defaults(command_fn="diagnose")

    room = sub.add_parser("room", help="the workshop room: every laptop's records gathered "
                          "live on the instructor's machine (docs/room.md)")
    rs = room.add_subparsers(dest="room_command", metavar="serve|submit", required=True)
    sv = rs.add_parser("serve", help="run the room here; prints its code and address")
    sv.add_argument("--folder", default=None, help="where the records are kept "
                    "(default: runs/room/)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only; "
                         "0.0.0.0 opens it to the network)")
    sv.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    sv.add_argument("--code", default=None, help="the room code (default: the folder's, "
                    "else a new one)")
    sv.add_argument("--body-seconds", type=float, default=5.0, metavar="S",
                    help="how long a record's body may take to arrive (default 5)")
    sv.set_defaults(command_fn="room_serve")
    sm = rs.add_parser("submit", help="send your records to a room")
    sm.add_argument("url", metavar="URL", help="the room's address, e.g. http://10.0.0.5:8765")
    sm.add_argument("--code", required=True, help="the room code the instructor shows")
    sm.add_argument("records", nargs="*", metavar="RECORDS",
                    help="record files or folders (default: LABKIT_RECORDS, else records/)")
    sm.set_defaults(command_fn="room_submit")

    lab = sub.add_parser("lab", help="make the fixtures, then open JupyterLab on the chapters")
    scale_opt(lab)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(command_fn="lab")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)  # exits 2 with a usage message on bad ones
    # `room submit URL --code C RECORDS...`: argparse ends a positional list at an option
    if extra and getattr(args, "command_fn", "") == "room_submit" and not any(
            e.startswith("-") for e in extra):
        args.records += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from .commands import run  # torch and the rest, only now

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
