"""Token pipelines for language models (chapters 11, 11b-11d): a tokenized corpus, windows,
document epochs with exact resume, packing, document masks, source mixing.

Its public names are reached as ``lk.tokens.NAME`` (``import labkit as lk``); its
modules' other names are for labkit and tests.
"""

from __future__ import annotations

from .batching import batch_padding, budget_batches
from .corpus import open_tokens, token_dtype
from .epoch import DocumentEpoch, TokenBatches
from .masking import TinyLM, cu_seqlens, document_mask, packed_vs_alone, position_ids
from .mixing import blended_index, prefix_error, random_mix
from .packing import PACKERS, format_packing, pack
from .plots import plot_doc_lengths, plot_packing, plot_token_rates
from .windows import random_windows, tokens_needed

__all__ = [
    "DocumentEpoch",
    "PACKERS",
    "TinyLM",
    "TokenBatches",
    "batch_padding",
    "blended_index",
    "budget_batches",
    "cu_seqlens",
    "document_mask",
    "format_packing",
    "open_tokens",
    "pack",
    "packed_vs_alone",
    "plot_doc_lengths",
    "plot_packing",
    "plot_token_rates",
    "position_ids",
    "prefix_error",
    "random_mix",
    "random_windows",
    "token_dtype",
    "tokens_needed",
]
