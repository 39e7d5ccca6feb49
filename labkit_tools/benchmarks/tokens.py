"""``labkit bench tokens``: random token windows vs a plain copy, packing, resume (chapter 11).

Three goals of a language model's loader, each measured on chapter 11's ``corpus`` fixture:

* **Windows at memory speed.** Random ``(T + 1)``-token windows (nanoGPT's ``get_batch``)
  from the corpus's page-cached token file by the fastest of chapter 11's samplers that
  make one C-level copy per batch or one per window (``view_batch``: rows of the window
  view; ``slice_batch``: a slice per window into a buffer; both without the cast), against
  one contiguous copy of as many bytes (``copy_batch``): the copy is the ceiling, the ratio
  says how much of it the windows reach.
* **Little padding.** Best-fit decreasing packing of the corpus fixture's documents.
* **Exact resume across worker counts.** ``lk.tokens.TokenBatches`` stopped mid-epoch with two
  workers and resumed with one: every sample once, in the uninterrupted order.
"""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np

from labkit.data.fixtures import fixture
from labkit.instruments.stats import FAIL, PASS, judge, overall, paired_trials
from labkit.instruments.timer import best_of
from labkit.scale import resolve_scale
from labkit.tokens.corpus import open_tokens
from labkit.tokens.epoch import TokenBatches
from labkit.tokens.packing import best_fit_decreasing
from labkit.tokens.windows import copy_batch, slice_batch, view_batch, window_starts

from .registry import benchmark

RATIO_GOAL, PADDING_GOAL = 0.5, 0.05


def _exact(name: str, value, ok: bool) -> dict:
    """A figure without noise (a count, a fraction of a fixed packing): its interval is the
    value itself, at level 1, beside :func:`judge`'s keys for the timed figure."""
    return {name: value, f"{name}_ci": [value, value], f"{name}_ci_level": 1.0,
            f"{name}_verdict": PASS if ok else FAIL}


def _resume_across_workers(corpus, context: int, batch_size: int, stop_after: int) -> dict:
    """Uninterrupted (0 workers) vs stopped after ``stop_after`` batches with 2 workers and
    resumed from the pickled state with 1: samples lost and repeated, same order or not."""
    ref = [s for b in TokenBatches(corpus, context, batch_size) for s in b["sample"].tolist()]
    first = TokenBatches(corpus, context, batch_size, num_workers=2)
    got = []
    for i, b in enumerate(first):
        got += b["sample"].tolist()
        if i + 1 == stop_after:
            break
    state = pickle.loads(pickle.dumps(first.state_dict()))
    second = TokenBatches(corpus, context, batch_size, num_workers=1)
    second.load_state_dict(state)
    got += [s for b in second for s in b["sample"].tolist()]
    seen = Counter(got)
    return {"resume_samples": len(ref), "resume_lost": len(set(ref) - set(seen)),
            "resume_repeated": sum(c - 1 for c in seen.values() if c > 1),
            "resume_same_order": got == ref}


@benchmark("tokens", goal=f"random (T+1)-token windows (T=2048, batch 64, uint16, page cache) "
                          f">= {RATIO_GOAL}x a plain contiguous copy of the same bytes (median "
                          f"of paired ratios, 95% interval); best-fit packing padding < "
                          f"{PADDING_GOAL:.0%} of the corpus fixture; resume across worker "
                          "counts: 0 samples lost, 0 repeated")
def token_windows(scale: str | None = None, context: int = 2048, batch_size: int = 64,
                  batches: int = 128, pairs: int = 9, pack_context: int = 1024,
                  resume_batch: int = 8) -> dict:
    """The three figures; see the module docstring.

    ``scale`` (``LABKIT_SCALE``; default workshop) sizes the corpus: about 1.4 MB of tokens
    at ci, which sits in the CPU's caches, about 20 MB at workshop and 340 MB at full, which
    do not. Each trial is ``batches`` batches (fresh random starts each batch, the same seed for
    both sides), on the process CPU clock. The packing runs on the corpus fixture at
    ``pack_context`` (chapter 11's context; the fixture's document lengths are tuned to it).
    """
    scale = resolve_scale(scale)
    corpus = open_tokens(fixture("corpus", scale, progress=False))
    tokens = corpus.tokens
    n, span = len(tokens), batch_size * (context + 1)
    np.asarray(tokens).sum()  # warm: the whole file into the page cache

    def run(sample):
        def go():
            rng = np.random.default_rng(0)
            for _ in range(batches):
                sample(rng)
        return go

    def copy(rng):
        copy_batch(tokens, int(rng.integers(0, n - span)), batch_size, context)

    candidates = {
        "window view, no cast":
            lambda rng: view_batch(tokens, window_starts(n, context, batch_size, rng), context),
        "slices, no cast":
            lambda rng: slice_batch(tokens, window_starts(n, context, batch_size, rng), context,
                                    cast=False),
    }
    quick = {k: best_of(run(f), repeats=3, clock="cpu").best_s for k, f in candidates.items()}
    best = min(quick, key=quick.get)
    trials = paired_trials(run(copy), run(candidates[best]), pairs, clock="cpu")
    gb = batches * span * tokens.itemsize / 1e9
    result = {"context": context, "batch_size": batch_size, "dtype": str(tokens.dtype),
              "tokens_in_file": n, "batches_per_trial": batches, "pairs": pairs,
              "sampler": best,
              "candidates_best_s": {k: round(v, 6) for k, v in quick.items()},
              "copy_gb_per_s": gb / min(c for c, _ in trials),
              "windows_gb_per_s": gb / min(w for _, w in trials),
              "windows_tokens_per_s": batches * span / min(w for _, w in trials)}
    result |= judge("ratio", [c / w for c, w in trials], RATIO_GOAL)

    padding = best_fit_decreasing(corpus.lengths, pack_context).stats(corpus.lengths)["padding"]
    result |= {"packing_context": pack_context, "packing_documents": corpus.docs,
               **_exact("padding", padding, padding < PADDING_GOAL)}

    resume = _resume_across_workers(corpus, pack_context, resume_batch, stop_after=3)
    wrong = resume["resume_lost"] + resume["resume_repeated"]
    result |= resume | _exact("resume_lost_plus_repeated", wrong,
                              wrong == 0 and resume["resume_same_order"])
    verdict = overall(result["ratio_verdict"], result["padding_verdict"],
                      result["resume_lost_plus_repeated_verdict"])
    return result | {"verdict": verdict, "goal_met": verdict == PASS}
