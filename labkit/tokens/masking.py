"""Document masks for packed rows, and a tiny model that proves they work (chapter 11b).

A packed row holds several documents. Without a mask, causal attention lets every token see
the documents before it in the row, and learned positions keep counting across them. With
``position_ids`` restarting at each document and a block-diagonal causal mask (the dense
form of FlashAttention's ``cu_seqlens``), each document is computed exactly as if alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def cu_seqlens(seg_lengths) -> torch.Tensor:
    """Cumulative segment boundaries ``[0, l0, l0 + l1, ...]`` (int32, as varlen kernels take)."""
    lengths = torch.as_tensor(list(seg_lengths), dtype=torch.int32)
    return torch.cat([torch.zeros(1, dtype=torch.int32), lengths.cumsum(0, dtype=torch.int32)])


def position_ids(seg_lengths) -> torch.Tensor:
    """Positions restarting at 0 for every segment of the row."""
    return torch.cat([torch.arange(int(n)) for n in seg_lengths])


def document_ids(seg_lengths) -> torch.Tensor:
    """Which segment each position belongs to."""
    return torch.repeat_interleave(torch.arange(len(seg_lengths)),
                                   torch.as_tensor(list(seg_lengths)))


def document_mask(seg_lengths) -> torch.Tensor:
    """Block-diagonal causal mask, ``(n, n)`` bool, True = may attend (SDPA's convention)."""
    doc = document_ids(seg_lengths)
    n = len(doc)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return causal & (doc[:, None] == doc[None, :])


class TinyLM(nn.Module):
    """One attention layer between an embedding and a head: enough to show mask effects.

    ``forward(ids, positions, attn_mask)`` takes one row ``(n,)``; ``attn_mask=None`` means
    plain causal attention over the whole row.
    """

    def __init__(self, vocab: int, dim: int = 32, heads: int = 2, max_len: int = 4096,
                 seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)
        with torch.no_grad():  # seeded without touching the global RNG
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
        self.double()

    def forward(self, ids, positions, attn_mask=None):
        n = len(ids)
        h = self.tok(ids) + self.pos(positions)
        q, k, v = self.qkv(h).view(n, 3, self.heads, -1).permute(1, 2, 0, 3)
        if attn_mask is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        h = h + self.out(a.transpose(0, 1).reshape(n, -1))
        return self.head(h)


def per_token_loss(model: TinyLM, ids, positions, attn_mask=None) -> torch.Tensor:
    """Cross-entropy of predicting ``ids[i + 1]`` at every position ``i`` but the last."""
    with torch.no_grad():
        logits = model(ids, positions, attn_mask)
    return F.cross_entropy(logits[:-1], ids[1:], reduction="none")


def packed_vs_alone(model: TinyLM, docs: list[torch.Tensor]) -> dict:
    """Per-token losses of ``docs`` packed in one row (three ways) against each run alone.

    Only the positions whose label lies in the same document are compared (the label after
    a document's last token belongs to the next one). Returns the largest absolute
    difference for: document mask + restarted positions; causal only with row positions
    (packing without a mask); document mask with row positions.
    """
    lengths = [len(d) for d in docs]
    row = torch.cat(docs)
    alone = torch.cat([per_token_loss(model, d, torch.arange(len(d))) for d in docs])
    same_doc = (document_ids(lengths)[:-1] == document_ids(lengths)[1:])
    ways = {"document mask + position_ids": (position_ids(lengths), document_mask(lengths)),
            "no mask (causal over the row)": (torch.arange(len(row)), None),
            "document mask, row positions": (torch.arange(len(row)), document_mask(lengths))}
    out = {}
    for name, (pos, mask) in ways.items():
        packed = per_token_loss(model, row, pos, mask)[same_doc]
        out[name] = float((packed - alone).abs().max())
    return out
