"""The capstone's pipeline, tuned one measured change at a time (chapter 16).

An image-classification-shaped loop: JPEGs in, a small CNN's train step out. The naive
version reads one file per sample with Pillow in the main process; each :class:`TuningStep`
changes exactly one thing (the format, the workers, prefetch and persistent workers, the
decoder, the batch size), and :func:`run_tuning` measures every step with the meter, the same
train step and the same samples, and audits that each step still delivers every sample
exactly once. It tunes the way an engineer does: a change is tried on top of the best
configuration so far and kept only if it made the pass faster; a change that did not help on
this machine is reported as such and reverted, so the tuned pipeline is never slower than
the best step. Nothing here assumes a change helps.

The packed format it tunes towards lives in :mod:`labkit.images.packed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils.data import Subset

from ..images.decode import DECODERS
from ..images.packed import PackedImages
from ..instruments.audits import Audit, audit
from ..instruments.measurement import Measurement
from ..instruments.meter import measure
from ..loading.loaders import make_loader, shutdown

# -- the train step -------------------------------------------------------------------------

def image_train_step(classes: int = 10, seed: int = 0, channels: int = 16) -> Callable:
    """A real train step for ``{"image": uint8 NCHW, "label"}`` batches: a small CNN + SGD.

    A 4x4 patchify convolution, a strided one, global pooling, a linear layer,
    cross-entropy, one SGD step. Same seed, same initial weights. The callable's ``model``
    attribute is the model.
    """
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
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch) -> float:
        x = batch["image"].float().div_(255).sub_(0.5)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), batch["label"])
        loss.backward()
        opt.step()
        return loss.item()

    step.label = f"small CNN ({channels} channels) + SGD"
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
        # num_workers rides along: prefetch and persistent workers mean nothing without
        # workers, so if the "workers" change was reverted this one tries them together
        ("prefetch", f"persistent_workers=True, prefetch_factor={prefetch_factor}",
         {"num_workers": num_workers, "persistent_workers": True,
          "prefetch_factor": prefetch_factor}),
        ("decode", f"decoder pil -> {decoder}", {"decoder": decoder}),
        ("batching", f"batch_size {batch_size} -> {big_batch_size}",
         {"batch_size": big_batch_size}),
    ]
    steps, config = [], {**NAIVE, "batch_size": batch_size}
    for name, change, knobs in changes:
        config = {**config, **knobs}
        steps.append(TuningStep(name, change, dict(config), dict(knobs)))
    return steps




def image_pipeline(config: dict, images, packed, samples: int | None = None, seed: int = 0):
    """The DataLoader a step's ``config`` describes, over the first ``samples`` images.

    ``images`` is the ``images`` fixture (the ``files`` format), ``packed`` the folder
    :func:`pack_images` wrote (the ``packed`` format). Shuffled with a seeded generator.
    """
    from ..images.folder import ImageFolderDataset

    if config["format"] == "files":
        ds = ImageFolderDataset(images, decoder=config["decoder"])
    elif config["format"] == "packed":
        ds = PackedImages(packed, decoder=config["decoder"])
    else:
        raise ValueError(f"format={config['format']!r}: 'files' or 'packed'")
    if samples is not None:
        ds = Subset(ds, range(min(samples, len(ds))))
    return make_loader(ds, batch_size=config["batch_size"], num_workers=config["num_workers"],
                       prefetch_factor=config["prefetch_factor"],
                       persistent_workers=config["persistent_workers"], shuffle=True,
                       generator=torch.Generator().manual_seed(seed))


# -- measuring ------------------------------------------------------------------------------

def epoch_rate(m: Measurement) -> float:
    """Samples per second of a whole pass, start-up and first batch included (median).

    The meter's ``samples_per_s`` is the steady state; an epoch also pays worker start-up,
    which is what persistent workers remove, so the capstone compares whole passes.
    """
    return m.epoch_samples_per_s


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
    kept: bool = True  # faster than the best configuration before it (the naive one: True)
    gain: float = 1.0  # whole-pass rate over the best configuration before it

    @property
    def samples_per_s(self) -> float:
        """Whole-pass samples/s (see :func:`epoch_rate`)."""
        return epoch_rate(self.measurement)


def run_tuning(steps: list[TuningStep], images, packed, step: Callable, *,
               samples: int | None = None, repeats: int = 2, warmup: int = 1,
               min_gain: float = 1.0, on_step: Callable | None = None) -> list[TuningResult]:
    """Measure every step on the same samples with the same train step; audit each.

    Each change runs on top of the best configuration so far and is kept when its whole-pass
    rate is at least ``min_gain`` times the best rate so far and its audit is clean;
    otherwise it is reverted (``kept=False``) and the next change builds on the configuration
    before it. :func:`tuned_result` gives the result of the last kept step. ``on_step(result)`` is
    called after each step (e.g. to print progress).
    """
    out: list[TuningResult] = []
    n = min(samples, len(PackedImages(packed))) if samples else len(PackedImages(packed))
    best_config, best_rate = None, 0.0
    for s in steps:
        config = dict(s.config) if best_config is None else {**best_config, **s.knobs}
        loader = image_pipeline(config, images, packed, samples=n)
        try:
            m, a = measure_audited(lambda loader=loader: loader, step, n, repeats=repeats,
                                   warmup=warmup, name=s.name, config=config)
        finally:
            shutdown(loader)  # persistent workers: stop them now, not at garbage collection
        result = TuningResult(s, m, a, config)
        if best_config is not None:
            result.gain = result.samples_per_s / best_rate
            result.kept = a.ok and result.gain >= min_gain
        if result.kept:
            best_config, best_rate = config, result.samples_per_s
        out.append(result)
        if on_step is not None:
            on_step(result)
    return out


def tuned_result(results: list[TuningResult]) -> TuningResult:
    """The tuned pipeline: the last step whose change was kept."""
    return [r for r in results if r.kept][-1]


def format_tuning(results: list[TuningResult]) -> str:
    """A table: each step's samples/s, its gain over the best so far and over naive, kept?"""
    head = (f"{'step':<10}{'samples/s':>11}{'x best':>8}{'x naive':>9}{'waiting':>9}"
            f"{'first ms':>10}  {'kept':<5} change")
    lines = [head, "-" * (len(head) + 20)]
    base = results[0].samples_per_s
    for r in results:
        rate = r.samples_per_s
        lines.append(f"{r.step.name:<10}{rate:>11,.0f}{r.gain:>8.2f}{rate / base:>9.2f}"
                     f"{r.measurement.wait_fraction:>9.0%}"
                     f"{r.measurement.first_batch_s * 1e3:>10.1f}  "
                     f"{'yes' if r.kept else 'no':<5} {r.step.change}")
    return "\n".join(lines)
