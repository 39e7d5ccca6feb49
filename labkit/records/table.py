"""Text tables: the one renderer behind every fixed-width table labkit prints (every chapter).

Each column is a heading and a ``format()`` spec: ``"<"`` left or ``">"`` right, an optional
least width, then how a number is written (``">.2f"``, ``">,.0f"``, ``">.1%"``).
"""

from __future__ import annotations

import re

_SPEC = re.compile(r"([<>]?)(\d*)(.*)")


def _cell(value, number: str) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else format(value, number)


def text_table(columns: dict[str, str], rows, *, header: bool = True, rule: bool = False,
               sep: str = "  ") -> str:
    """``rows`` as fixed-width lines, under a heading line (``header``) and its rule of dashes.

    A string cell is only aligned, a number written by its column's spec, None blank; a short
    row's last cell runs on as it is (``skipped: not installed``). No line ends with spaces.
    """
    specs = [_SPEC.fullmatch(spec).groups() for spec in columns.values()]
    cells = []
    for row in rows:
        if len(row) > len(specs):
            raise ValueError(f"a row of {len(row)} cells for {len(specs)} columns: {row!r}")
        cells.append([_cell(v, number) for v, (_, _, number) in zip(row, specs, strict=False)])
    widths = []
    for j, ((_, least, _), head) in enumerate(zip(specs, columns, strict=True)):
        # a short row's last cell runs on, so it does not widen its column
        sized = [len(r[j]) for r in cells if j < len(r) - 1 or len(r) == len(specs)]
        widths.append(max([int(least or 0), len(head) if header else 0, *sized]))

    def line(row):
        padded = [f"{c:{align or '<'}{w}}"
                  for c, (align, _, _), w in zip(row, specs, widths, strict=False)]
        if len(row) < len(specs):
            padded[-1] = row[-1]
        return sep.join(padded).rstrip()

    lines = [line(list(columns))] if header else []
    if header and rule:
        lines.append("-" * len(lines[0]))
    return "\n".join(lines + [line(r) for r in cells])
