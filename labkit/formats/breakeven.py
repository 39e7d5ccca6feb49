"""The break-even of preprocessing ahead, moved by image size and disk speed (chapter 12c).

:class:`BreakEven` holds the logic in plain Python (tests drive it without a browser):
the choices measured at one training size, rescaled to another, and their samples/s at a
chosen disk bandwidth. :class:`~labkit.BreakEvenWidget` only wires two sliders and a plot
to it.

The rescaling is a model, stated so it can be checked: a choice stored at the training size
(a JPEG resized ahead, raw pixels) reads bytes and spends CPU in proportion to the pixels,
``(size / measured_size) ** 2``; a choice that reads the original files (``fixed``) reads
the same bytes and decodes the same originals at every size (its final resize is a small
part of its cost and is left out).
"""

from __future__ import annotations

from collections.abc import Callable

from .ahead import break_even, draw_break_even, read_decode_rate


class BreakEven:
    """Choices ``name -> (cpu samples/s, bytes per sample)`` measured at ``size`` pixels
    square; :meth:`set` moves the image size and the disk speed, the figures follow.

    ``fixed`` names the choices that read the original files (their cost does not follow the
    size). ``disk_bytes_per_s`` is where the disk slider starts (a measured bandwidth, or
    ``default_disk_bytes_per_s`` when none was measured).
    """

    default_disk_bytes_per_s = 500e6  # a SATA SSD's sequential read, roughly

    def __init__(self, choices: dict[str, tuple[float, float]], size: int, *, fixed=(),
                 disk_bytes_per_s: float | None = None):
        if not choices:
            raise ValueError("no choices: give name -> (cpu samples/s, bytes per sample)")
        for name, (cpu, nbytes) in choices.items():
            if not (cpu > 0 and nbytes > 0):
                raise ValueError(f"choice {name!r}: cpu samples/s and bytes per sample must "
                                 f"be > 0 (got {cpu!r}, {nbytes!r})")
        unknown = set(fixed) - set(choices)
        if unknown:
            raise ValueError(f"fixed={sorted(unknown)}: not among the choices {list(choices)}")
        self.measured = {k: (float(c), float(b)) for k, (c, b) in choices.items()}
        self.measured_size, self.fixed = self._positive("size", size), frozenset(fixed)
        self.size = self.measured_size
        self.measured_disk = disk_bytes_per_s
        self.disk_bytes_per_s = self._positive(
            "disk_bytes_per_s", disk_bytes_per_s or self.default_disk_bytes_per_s)
        self._listeners: list[Callable[[BreakEven], None]] = []

    @staticmethod
    def _positive(what: str, value):
        if not value > 0:
            raise ValueError(f"{what}={value!r}: must be > 0")
        return value

    def on_change(self, fn: Callable[[BreakEven], None]) -> None:
        """Call ``fn(model)`` after every :meth:`set` (the widget redraws)."""
        self._listeners.append(fn)

    def set(self, *, size: int | None = None, disk_mb_per_s: float | None = None) -> BreakEven:
        """Move the image size (pixels square) and/or the disk speed (MB/s)."""
        if size is not None:
            self.size = int(self._positive("size", size))
        if disk_mb_per_s is not None:
            self.disk_bytes_per_s = self._positive("disk_mb_per_s", disk_mb_per_s) * 1e6
        for fn in self._listeners:
            fn(self)
        return self

    def choices(self) -> dict[str, tuple[float, float]]:
        """Each choice's ``(cpu samples/s, bytes per sample)`` at the current size."""
        scale = (self.size / self.measured_size) ** 2
        return {k: (c, b) if k in self.fixed else (c / scale, b * scale)
                for k, (c, b) in self.measured.items()}

    def rates(self) -> dict[str, float]:
        """Samples/s of one reading process for each choice at the current disk speed."""
        return {k: float(read_decode_rate(c, b, self.disk_bytes_per_s))
                for k, (c, b) in self.choices().items()}

    def best(self) -> str:
        rates = self.rates()
        return max(rates, key=rates.get)

    def break_evens(self) -> dict[tuple[str, str], float | None]:
        """For each pair of choices, the disk bandwidth (B/s) where they meet, or None."""
        ch, names = self.choices(), list(self.measured)
        return {(a, b): break_even(ch[a], ch[b])
                for i, a in enumerate(names) for b in names[i + 1:]}

    def summary(self) -> str:
        rates, best = self.rates(), self.best()
        lines = [f"{self.size} px, disk {self.disk_bytes_per_s / 1e6:,.0f} MB/s: best {best} "
                 f"({rates[best]:,.0f} samples/s)"]
        lines += [f"  {k}: {r:,.0f} samples/s" for k, r in rates.items()]
        for (a, b), bw in self.break_evens().items():
            lines.append(f"  {a} = {b} at " + (f"{bw / 1e6:,.0f} MB/s" if bw else
                                                "no bandwidth (one wins everywhere)"))
        return "\n".join(lines)

    def draw(self, ax) -> None:
        """The curves at the current size, the chosen disk speed as a line."""
        draw_break_even(ax, self.choices(), disk_bytes_per_s=self.disk_bytes_per_s,
                        disk_label="disk", title=f"preprocessing ahead at {self.size} px "
                        f"(measured at {self.measured_size} px)")
