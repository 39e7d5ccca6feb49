"""``labkit bench prefetch``: data-wait of a naive loader vs a tuned one (chapter 09)."""

from __future__ import annotations

from torch.utils.data import DataLoader

from labkit.instruments.meter import measure, simulated_step
from labkit.instruments.stats import judge
from labkit.instruments.tuning import WorkDataset, suggest_loader, usable_cores
from labkit.loading.loaders import WORKER_TIMEOUT_S

from .registry import benchmark

CAPACITY_GOAL = 1.2
WAIT_GOAL = 0.05


@benchmark("prefetch", goal=f"loader capacity >= {CAPACITY_GOAL}x the step rate and tuned "
                            f"data-wait <= {WAIT_GOAL:.0%} of step time (medians over timed "
                            "passes of persistent workers, with intervals; on N cores the "
                            "capacity cannot exceed ~N x one worker's rate, and each batch "
                            "received costs the main process ~1-3 ms of wait)")
def prefetch(ms_per_sample: float = 2.0, batch_size: int = 32, batches: int = 24,
             repeats: int = 5) -> dict:
    """A naive loader vs the one :func:`suggest_loader` tunes; a busy machine that keeps the
    tuned capacity below 1.2x the step rate gets a step of capacity / 1.25 (``step_adjusted``)."""
    ds = WorkDataset(batch_size * batches, ms=ms_per_sample, kind="busy")
    naive = DataLoader(ds, batch_size=batch_size)
    alone = measure(naive, repeats=repeats, max_batches=max(10, batches // 3), name="naive alone")
    worker_rate = alone.best_samples_per_s / batch_size
    step = simulated_step(1e3 / worker_rate, "sleep")
    fixed = next(iter(naive))

    def step_rate_of(step) -> float:
        m = measure(lambda: [fixed] * 30, step=step, repeats=repeats, name="step alone")
        return m.best_samples_per_s / batch_size

    step_rate = step_rate_of(step)
    s = suggest_loader(worker_rate, step_rate, cores=usable_cores())
    tuned = DataLoader(ds, batch_size=batch_size, **s.loader_kwargs(),
                       timeout=WORKER_TIMEOUT_S if s.num_workers else 0)
    try:
        m_capacity = measure(tuned, repeats=repeats, name="tuned alone")
        capacity = m_capacity.best_samples_per_s / batch_size
        verified = capacity >= CAPACITY_GOAL * step_rate
        adjusted = not verified
        if adjusted:
            step = simulated_step(1e3 * 1.25 / capacity, "sleep")
            step_rate = step_rate_of(step)
        m_tuned = measure(tuned, step=step, repeats=repeats, name="tuned + step")
    finally:
        del tuned  # persistent workers live as long as their loader: stop them now
    m_naive = measure(naive, step=step, repeats=max(2, repeats // 2),
                      max_batches=max(8, batches // 2), name="naive + step")
    result = {
        "ms_per_sample": ms_per_sample, "batch_size": batch_size, "cores": usable_cores(),
        "repeats": repeats, "worker_batches_per_s": worker_rate, "step_ms": step.label,
        "step_batches_per_s": step_rate, "suggested_num_workers": s.num_workers,
        "suggested_prefetch_factor": s.prefetch_factor, "suggestion": s.reason,
        "expected_capacity_batches_per_s": s.expected_capacity,
        "tuned_capacity_batches_per_s": capacity, "suggestion_verified": bool(verified),
        "step_adjusted": bool(adjusted), "naive_wait_over_step": m_naive.wait_s / m_naive.compute_s,
        "naive_wait_fraction_of_loop": m_naive.wait_fraction,
        "tuned_wait_fraction_of_loop": m_tuned.wait_fraction,
        "tuned_batch_wait_p50_ms": m_tuned.latency_ms(50),
        "naive_samples_per_s": m_naive.samples_per_s, "tuned_samples_per_s": m_tuned.samples_per_s}
    result |= judge("capacity_over_step", [p.samples_per_s / batch_size / step_rate
                                           for p in m_capacity.passes], CAPACITY_GOAL)
    result |= judge("tuned_wait_over_step",
                    [float(p.wait.sum() / p.compute.sum()) for p in m_tuned.passes], WAIT_GOAL,
                    higher_is_better=False)
    return result
