"""The capstone's pipeline, tuned one measured change at a time (chapter 16).

An image-classification-shaped loop: JPEGs in, a small CNN's train step out. The naive
version reads one file per sample with Pillow in the main process; each :class:`TuningStep`
changes exactly one thing (the format, the workers, persistent workers, prefetch, the
decoder, the batch size), and :func:`run_tuning` measures every step with the meter, the same
train step and the same samples, and audits that each step still delivers every sample
exactly once. It tunes the way an engineer does: a change is tried on top of the best
configuration so far and kept only if it made the pass faster *beyond the noise*: the
candidate and the best configuration run in interleaved pairs of passes, and the change is
kept only when the whole interval of the paired ratios (the benchmarks' sign-test interval)
lies above ``min_gain``. A change that did not help, or whose gain the noise could explain, is
reported as such and reverted. Nothing here assumes a change helps. :func:`save_tuning`
writes the result as JSON; :func:`load_tuning` gives back the tuned config.

labkit measures, the learner loads: the chapter writes the function that turns a step's
``config`` into its DataLoader (torch's own, in the cell) and hands it to :func:`run_tuning`.
The packed format it tunes towards lives in :mod:`labkit.images.packed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from .. import paths
from ..errors import LabkitError
from ..images.decode import DECODERS
from ..instruments.audits import Audit, audit
from ..instruments.measurement import Measurement
from ..instruments.meter import measure
from ..instruments.stats import PASS, median_interval, verdict
from ..records.table import text_table
from ..scale import resolve_scale

# -- the train step -------------------------------------------------------------------------

def image_train_step(classes: int = 10, seed: int = 0, channels: int = 16,
                     device: str | torch.device = "cpu") -> Callable:
    """A real train step for ``{"image": uint8 NCHW, "label"}`` batches: a small CNN + SGD.

    A 4x4 patchify convolution, a strided one, global pooling, a linear layer,
    cross-entropy, one SGD step. Same seed, same initial weights. The callable's ``model``
    attribute is the model. ``device="cuda"`` runs the step on a GPU (the batch is copied
    there each step, as a training loop does; ``loss.item()`` waits for the GPU, so the
    step's time is the GPU's).
    """
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(
        # a 4x4 patchify convolution first (as vision transformers and ConvNeXt start):
        # cheap enough on a CPU that loading, not the step, is what the capstone tunes
        torch.nn.Conv2d(3, channels, 4, stride=4), torch.nn.ReLU(),
        torch.nn.Conv2d(channels, channels, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, classes))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch) -> float:
        x = batch["image"].to(device, non_blocking=True).float().div_(255).sub_(0.5)
        y = batch["label"].to(device, non_blocking=True)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step.label = f"small CNN ({channels} channels) + SGD on {device.type}"
    step.model = model
    return step


# -- the steps ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TuningStep:
    """One change to the pipeline: its ``knobs``, and the ``config`` with every change before
    it applied (what the step runs if every earlier change is kept)."""

    name: str
    change: str
    config: dict = field(default_factory=dict)
    knobs: dict = field(default_factory=dict)


#: The naive starting point: one file per sample, Pillow, everything in the main process.
NAIVE = {"format": "files", "decoder": "pil", "num_workers": 0, "prefetch_factor": None,
         "persistent_workers": False, "batch_size": 32}


def tuning_steps(*, num_workers: int = 2, decoder: str = "simplejpeg",
                 prefetch_factor: int = 4, batch_size: int = 32,
                 big_batch_size: int = 128) -> list[TuningStep]:
    """The naive pipeline, then one change per step, each on top of the last.

    Args:
        num_workers: the workers of the "workers" step (e.g. :func:`~labkit.usable_cores`).
        decoder: the decoder of the "decode" step (e.g. :func:`fastest_decoder`'s pick).
        prefetch_factor: batches queued per worker in the "prefetch" step.
        batch_size, big_batch_size: before and after the "batching" step.
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder={decoder!r}: choose one of {', '.join(DECODERS)}")
    changes = [
        ("naive", "one JPEG file per sample, Pillow, num_workers=0", {}),
        ("format", "packed file: one memory map + offset index instead of a file per sample",
         {"format": "packed"}),
        ("workers", f"num_workers=0 -> {num_workers}", {"num_workers": num_workers}),
        # num_workers rides along: persistent workers and prefetch mean nothing without
        # workers, so if the "workers" change was reverted these try them together. Two
        # steps, not one: each knob's gain (or loss) is then its own
        ("persistent", "persistent_workers=True",
         {"num_workers": num_workers, "persistent_workers": True}),
        ("prefetch", f"prefetch_factor=2 (torch's default) -> {prefetch_factor}",
         {"num_workers": num_workers, "prefetch_factor": prefetch_factor}),
        ("decode", f"decoder pil -> {decoder}", {"decoder": decoder}),
        ("batching", f"batch_size {batch_size} -> {big_batch_size}",
         {"batch_size": big_batch_size}),
    ]
    steps, config = [], {**NAIVE, "batch_size": batch_size}
    for name, change, knobs in changes:
        config = {**config, **knobs}
        steps.append(TuningStep(name, change, dict(config), dict(knobs)))
    return steps


# -- measuring ------------------------------------------------------------------------------

def measure_audited(make: Callable[[], object], step: Callable, expected, *,
                    repeats: int = 2, warmup: int = 1, name: str | None = None,
                    config: dict | None = None) -> tuple[Measurement, Audit]:
    """Measure a loader with a train step, and audit the ids of its last pass.

    ``make()`` returns the loader for one pass (the same re-iterable object, or a fresh one);
    batches are dicts with an ``"id"`` tensor. The ids are collected inside the step, so the
    meter times the loader and the step exactly as they would run in training.
    """
    seen: list[int] = []

    def fresh():
        seen.clear()
        return make()

    def audited_step(batch):
        seen.extend(batch["id"].tolist())
        return step(batch)

    audited_step.label = getattr(step, "label", None) or getattr(step, "__name__", "step")
    m = measure(fresh, step=audited_step, repeats=repeats, warmup=warmup, name=name,
                config=config)
    return m, audit(list(seen), expected)


@dataclass
class TuningResult:
    """One measured step: the step, its measurement and its exactly-once audit."""

    step: TuningStep
    measurement: Measurement
    audit: Audit
    config: dict = field(default_factory=dict)  # what ran: the kept changes plus this one
    kept: bool = True  # faster than the best configuration before it, beyond the noise
    gain: float = 1.0  # median of the paired ratios: this pass over the best config's pass
    gain_ci: tuple[float, float] = (1.0, 1.0)  # the sign-test interval of those ratios
    gain_level: float = 1.0  # the interval's coverage (below 0.95 with fewer than 6 pairs)
    verdict: str = "baseline"  # pass / fail / inconclusive against min_gain
    ratios: tuple[float, ...] = ()  # each interleaved pair's ratio (change / best so far)

    @property
    def samples_per_s(self) -> float:
        """Whole-pass samples/s: start-up and first batch included (``epoch_samples_per_s``)."""
        return self.measurement.epoch_samples_per_s

    def as_observations(self, name: str | None = None, config: dict | None = None) -> list:
        """Observations for a checkpoint record (``ckpt.add(results)``): ``tuning.``
        ``samples_per_s``, ``kept``, ``gain`` (its pairs, verdict, interval and coverage in
        the config) and ``exactly_once``, each with the step's name in its config."""
        key, cfg = name or "tuning", {"step": self.step.name, **(config or {})}
        gain_cfg = {**cfg, "pairs": len(self.measurement.passes), "verdict": self.verdict,
                    "interval": [round(x, 4) for x in self.gain_ci],
                    "coverage": round(self.gain_level, 4)}
        rows = [("samples_per_s", round(self.samples_per_s, 1), "samples/s",
                 {**cfg, **self.config}),
                ("kept", self.kept, "", cfg),
                ("gain", round(self.gain, 4), "x best so far", gain_cfg),
                ("exactly_once", self.audit.ok, "", cfg)]
        return [{"name": f"{key}.{n}", "value": v, "unit": u, "config": c, "note": None}
                for n, v, u, c in rows]


def _paired_passes(candidate, best, step: Callable, n: int, pairs: int, name: str,
                   config: dict):
    """Interleaved whole passes of two loaders (C B, B C, ...): the candidate's measurement
    and last audit, and each pair's ratio of whole-pass rates (candidate / best)."""
    passes, ratios, a = [], [], None
    for i in range(pairs):
        order = ("c", "b") if i % 2 == 0 else ("b", "c")
        rate = {}
        for side in order:
            if side == "c":
                m, a = measure_audited(lambda: candidate, step, n, repeats=1, warmup=0,
                                       name=name, config=config)
                passes += m.passes
            else:
                m = measure(best, step=step, repeats=1, warmup=0)
            rate[side] = m.epoch_samples_per_s
        ratios.append(rate["c"] / rate["b"])
    step_label = getattr(step, "label", None) or getattr(step, "__name__", "step")
    return Measurement(name, dict(config), passes, step_label), a, ratios


def run_tuning(steps: list[TuningStep], loader_for: Callable[[dict], Iterable],
               step: Callable, *, samples: int, pairs: int = 3, warmup: int = 1,
               min_gain: float = 1.0, level: float = 0.95,
               on_step: Callable | None = None) -> list[TuningResult]:
    """Measure every step on the same samples with the same train step; audit each.

    ``loader_for(config)`` is the learner's: it returns the loader a step's ``config``
    describes (chapter 16 writes it in a cell, torch's ``DataLoader`` with the knobs spelled
    out). Every loader it returns must deliver the samples with ids ``0 .. samples - 1``
    (each batch a dict with an ``"id"`` tensor) once per pass: the audit checks exactly that.
    A loader is built per step and iterated once per pass, so persistent workers outlive a
    pass as they would in training; both loaders of a step are dropped when it ends, which
    stops their workers before the next step starts.

    The first step is measured alone (``warmup`` untimed, then ``pairs`` passes). Every
    later change runs on top of the best configuration so far, in ``pairs`` interleaved
    pairs of whole passes with that configuration (so drift in the machine's load hits both
    alike; no warm-up: the first step warmed the cache and imports); its ``gain`` is the
    median of the paired ratios, with the sign-test interval of
    :func:`~labkit.instruments.stats.median_interval`. It is kept when its audit is
    clean and the whole interval lies at or above ``min_gain`` (verdict ``pass``); otherwise
    it is reverted (``kept=False``) and the next change builds on the configuration before
    it. Up to 8 pairs the interval is the full range of the ratios (75 % coverage with 3
    pairs, 97 % with 6), so a change is kept only if *every* pair was faster.
    :func:`tuned_result` gives the last kept step. ``on_step(result)`` is called after
    each step.
    """
    if pairs < 1:
        raise ValueError(f"pairs={pairs}: at least one pair of passes")
    out: list[TuningResult] = []
    best_config = None
    for s in steps:
        config = dict(s.config) if best_config is None else {**best_config, **s.knobs}
        loader = best = None
        try:
            loader = loader_for(config)
            if best_config is None:
                m, a = measure_audited(lambda loader=loader: loader, step, samples,
                                       repeats=pairs, warmup=warmup, name=s.name,
                                       config=config)
                result = TuningResult(s, m, a, config)
            else:
                best = loader_for(best_config)
                # no warm-up here: the first step warmed the page cache and the imports,
                # and a pass that starts workers pays their start-up, as an epoch does
                m, a, ratios = _paired_passes(loader, best, step, samples, pairs, s.name,
                                              config)
                med, lo, hi, achieved = median_interval(ratios, level)
                v = verdict(lo, hi, min_gain)
                result = TuningResult(s, m, a, config, kept=a.ok and v == PASS, gain=med,
                                      gain_ci=(lo, hi), gain_level=achieved, verdict=v,
                                      ratios=tuple(ratios))
        finally:
            # persistent workers live as long as their DataLoader: the last references go
            # here, so torch stops them now, not beside the next step's workers
            del loader, best
        if result.kept:
            best_config = config
        out.append(result)
        if on_step is not None:
            on_step(result)
    return out


def tuned_result(results: list[TuningResult]) -> TuningResult:
    """The tuned pipeline: the last step whose change was kept."""
    return [r for r in results if r.kept][-1]


def format_tuning(results: list[TuningResult]) -> str:
    """A table: each step's samples/s, its paired gain over the best so far with the interval
    and verdict, its rate over naive's (across the run: drift included), kept or not."""
    columns = {"step": "<", "samples/s": ">,.0f", "x best": ">.2f", "interval": ">",
               "verdict": ">", "x naive": ">.2f", "waiting": ">.0%", "kept": "<", "change": "<"}
    base = results[0].samples_per_s
    lines = [text_table(columns, [
        [r.step.name, r.samples_per_s, r.gain,
         f"{r.gain_ci[0]:.2f}-{r.gain_ci[1]:.2f}" if r.verdict != "baseline" else "",
         r.verdict, r.samples_per_s / base, r.measurement.wait_fraction,
         "yes" if r.kept else "no", r.step.change] for r in results], rule=True)]
    if len(results) > 1 and results[1].verdict != "baseline":
        lines.append(f"(x best: median of {len(results[1].measurement.passes)} paired ratios; "
                     f"interval at {results[1].gain_level:.0%} coverage; kept only on pass)")
    return "\n".join(lines)


# -- the tuning result, reusable ------------------------------------------------------------

TUNING_SCHEMA = "labkit.tuning/1"


def _tuning_path(path, scale: str | None):
    from pathlib import Path

    if path is not None:
        return Path(path)
    # beside the fixtures (machine-local, git-ignored), not in the records folder, whose
    # *.json files are all checkpoint records
    return paths.data_dir() / "tuned" / f"image_pipeline-{resolve_scale(scale)}.json"


def save_tuning(results: list[TuningResult], path=None, *, scale: str | None = None,
                samples: int | None = None, extra: dict | None = None):
    """Write the tuned configuration and every step's figures as JSON; returns the path.

    Default path: ``<LABKIT_DATA>/tuned/image_pipeline-<scale>.json``. ``lk.capstone.load_tuning()``
    gives the config back for the loader built from the same knobs (chapter 16's
    ``make_loader``), so a later notebook or script starts from what this machine measured
    instead of from the naive pipeline.
    """
    import json

    best = tuned_result(results)
    record = {
        "schema": TUNING_SCHEMA, "config": best.config, "tuned_step": best.step.name,
        "samples_per_s": round(best.samples_per_s, 1),
        "speedup_vs_naive": round(best.samples_per_s / results[0].samples_per_s, 3),
        "samples": samples, **(extra or {}),
        "steps": [{"step": r.step.name, "change": r.step.change, "config": r.config,
                   "samples_per_s": round(r.samples_per_s, 1), "gain": round(r.gain, 4),
                   "gain_ci": [round(x, 4) for x in r.gain_ci],
                   "gain_level": round(r.gain_level, 4), "verdict": r.verdict,
                   "kept": r.kept, "exactly_once": r.audit.ok} for r in results],
    }
    path = _tuning_path(path, scale)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def load_tuning(path=None, *, scale: str | None = None) -> dict:
    """The tuned config a :func:`save_tuning` file holds (the knobs of the tuned loader).

    Default path: the one :func:`save_tuning` writes for ``scale``.

    Raises:
        LabkitError: the file is missing, not JSON, or not a tuning record (says which).
    """
    import json


    path = _tuning_path(path, scale)
    try:
        record = json.loads(path.read_text())
    except OSError as e:
        raise LabkitError(f"{path}: cannot read the tuning record: {e.strerror or e} (run "
                          "chapter 16's tuning, or lk.capstone.save_tuning, first)") from None
    except json.JSONDecodeError as e:
        raise LabkitError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(record, dict) or record.get("schema") != TUNING_SCHEMA:
        raise LabkitError(f"{path}: not a tuning record (schema "
                          f"{record.get('schema') if isinstance(record, dict) else None!r}, "
                          f"expected {TUNING_SCHEMA!r}); write one with lk.capstone.save_tuning")
    missing = sorted(set(NAIVE) - set(record.get("config") or {}))
    if missing:
        raise LabkitError(f"{path}: the tuned config lacks {', '.join(missing)}")
    return dict(record["config"])
