"""labkit.tokens (chapter 11): corpus fixture, window samplers, packers, masks, epochs, resume."""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.tokens.corpus import synth_corpus, token_dtype
from labkit.tokens.windows import SAMPLERS, window_starts

CONTEXT = 64


def toy_corpus(tmp_path, lengths=(5, 70, 3, 130, 20, 64, 65, 1, 40), vocab=300, seed=0):
    """A small flat token file + index written by hand (each document ends with id 0)."""
    rng = np.random.default_rng(seed)
    docs = [np.append(rng.integers(1, vocab, n - 1), 0) for n in lengths]
    path = tmp_path / "tokens.bin"
    np.concatenate(docs).astype(np.uint16).tofile(path)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    np.save(tmp_path / "docs.npy", offsets)
    return lk.tokens.open_tokens(path, vocab=vocab, offsets=tmp_path / "docs.npy")


def test_token_dtype_by_vocab():
    assert token_dtype(50257) == np.uint16
    assert token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32


def test_corpus_fixture(ci_fixture):
    fx = ci_fixture("corpus")
    tc = lk.tokens.open_tokens(fx)
    assert tc.tokens.dtype == np.uint16 and len(tc.tokens) == fx.meta["tokens"]
    assert fx.samples == fx.meta["docs"] == len(tc.offsets) - 1
    assert tc.offsets[-1] == len(tc.tokens) and tc.docs == fx.meta["docs"]
    assert (tc.tokens[tc.offsets[1:] - 1] == tc.eos).all()  # every document ends with EOS
    assert int(tc.tokens.max()) < tc.vocab
    lengths, ctx = tc.lengths, fx.meta["context"]
    long_share = lengths[lengths > ctx].sum() / lengths.sum()
    assert 0.1 < long_share < 0.35  # "about a fifth" of tokens in documents past the context
    assert set(tc.sources.tolist()) == {0, 1, 2}
    medians = [np.median(lengths[tc.sources == s]) for s in range(3)]
    assert len(set(medians)) == 3  # three length profiles


def test_synth_corpus_is_seeded():
    spec = {"seed": 1, "docs": 50, "lexicon": 200, "zipf": 1.1, "max_words": 500,
            "sources": {"a": {"share": 0.5, "median_words": 10, "sigma": 1.0},
                        "b": {"share": 0.5, "median_words": 50, "sigma": 0.5}}}
    a, b = synth_corpus(spec), synth_corpus(spec)
    assert a[0] == b[0] and (a[1] == b[1]).all()
    assert synth_corpus({**spec, "seed": 2})[0] != a[0]


def test_window_samplers_agree(tmp_path):
    tc = toy_corpus(tmp_path)
    starts = window_starts(len(tc.tokens), 16, 8, np.random.default_rng(0))
    ref = SAMPLERS["python loop"](tc.tokens, starts, 16)
    for how, fn in SAMPLERS.items():
        x, y = fn(tc.tokens, starts, 16)
        assert x.shape == (8, 16), how
        x, y = x.long(), y.long()  # "slices, no cast" keeps the file's uint16
        assert torch.equal(x, ref[0]) and torch.equal(y, ref[1]), how
        assert torch.equal(x[:, 1:], y[:, :-1])
        assert torch.equal(x[0], torch.from_numpy(tc.tokens[starts[0]:starts[0] + 16]
                                                  .astype(np.int64)))
        last = fn(tc.tokens, np.array([len(tc.tokens) - 17]), 16)[1]  # the file's last window
        assert torch.equal(last[0].long(), torch.from_numpy(tc.tokens[-16:].astype(np.int64)))
    batches = list(lk.tokens.random_windows(tc.tokens, 16, 4, 3, how="plain copy"))
    assert len(batches) == 3 and batches[0].shape == (4, 17)


def test_tokens_needed():
    # 1e15 FLOP/s at 50% MFU for a 1e9-parameter model: 5e14 / 6e9 tokens/s
    assert lk.tokens.tokens_needed(1e9, 1e15, mfu=0.5) == pytest.approx(5e14 / 6e9)
    eight = lk.tokens.tokens_needed(1e9, 1e15, mfu=0.5, accelerators=8)
    assert eight == pytest.approx(8 * 5e14 / 6e9)


@pytest.mark.parametrize("method", list(lk.tokens.PACKERS))
def test_packers_cover_and_fit(method):
    lengths = np.random.default_rng(0).integers(1, 3 * CONTEXT, 300)
    p = lk.tokens.pack(lengths, CONTEXT, method)
    assert all(sum(s[2] for s in row) <= n <= CONTEXT for row, n in zip(p.rows, p.row_lengths,
                                                                        strict=True))
    covered = np.zeros(lengths.sum(), int)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for row in p.rows:
        for d, start, n in row:
            assert 0 <= start and start + n <= lengths[d]
            covered[offsets[d] + start:offsets[d] + start + n] += 1
    assert covered.max() == 1
    st = p.stats(lengths)
    if method.startswith("pad to"):  # one document per row, cropped at the context
        assert st["cropped"] == pytest.approx(1 - np.minimum(lengths, CONTEXT).sum()
                                              / lengths.sum())
        assert st["cross_attention_pairs"] == 0 and st["mid_document_rows"] == 0
    else:  # nothing cropped
        assert (covered == 1).all() and st["cropped"] == 0


def test_packing_figures():
    lengths = np.random.default_rng(1).integers(1, 2 * CONTEXT, 2000)
    st = {m: lk.tokens.pack(lengths, CONTEXT, m).stats(lengths) for m in lk.tokens.PACKERS}
    assert st["best-fit decreasing"]["padding"] < 0.05
    assert st["best-fit decreasing"]["padding"] <= st["greedy pad"]["padding"]
    assert st["pad to longest in batch"]["padding"] <= st["pad to max"]["padding"]
    assert st["concatenate, split"]["padding"] < 1 / 2000 * 2
    assert st["concatenate, split"]["cross_attention_pairs"] > 0
    assert "best-fit decreasing" in lk.tokens.format_packing(list(st.values()))
    with pytest.raises(ValueError, match="unknown packing method"):
        lk.tokens.pack(lengths, CONTEXT, "magic")


def test_masks():
    assert lk.tokens.cu_seqlens([3, 2]).tolist() == [0, 3, 5]
    assert lk.tokens.position_ids([3, 2]).tolist() == [0, 1, 2, 0, 1]
    m = lk.tokens.document_mask([2, 1])
    assert m.tolist() == [[True, False, False], [True, True, False], [False, False, True]]


def test_packed_loss_equals_documents_alone():
    """The chapter's proof: with the document mask and restarted positions, equal; else not."""
    g = torch.Generator().manual_seed(0)
    docs = [torch.randint(0, 50, (n,), generator=g) for n in (7, 1, 12, 5)]
    diff = lk.tokens.packed_vs_alone(lk.tokens.TinyLM(50, seed=3), docs)
    assert diff["document mask + position_ids"] < 1e-10
    assert diff["no mask (causal over the row)"] > 1e-3
    assert diff["document mask, row positions"] > 1e-3


def test_epoch_is_exactly_once_and_seeded(tmp_path):
    tc = toy_corpus(tmp_path)
    ix = lk.tokens.DocumentEpoch(tc, 16, seed=0, epoch=0)
    assert ix.samples == (len(tc.tokens) - 1) // 16
    assert ix.remainder == len(tc.tokens) - ix.samples * 16 and 0 < ix.remainder <= 16
    batches = list(lk.tokens.TokenBatches(tc, 16, 5))
    pos = torch.cat([b["pos"].flatten() for b in batches]).numpy()
    counts = np.bincount(pos, minlength=len(tc.tokens))
    assert (counts <= 1).all() and (counts == 0).sum() == ix.remainder
    for b in batches:
        assert torch.equal(b["x"], torch.from_numpy(tc.tokens[b["pos"].numpy()]
                                                    .astype(np.int64)))
    again = list(lk.tokens.TokenBatches(tc, 16, 5))
    assert all(torch.equal(a["x"], b["x"]) for a, b in zip(batches, again, strict=True))
    other = lk.tokens.DocumentEpoch(tc, 16, seed=0, epoch=1)
    assert not np.array_equal(other.doc_order, ix.doc_order)


def test_stopping_mid_epoch_stops_the_workers_now(tmp_path, live_workers):
    """A consumer that stops early closes the generator: its DataLoader's workers end then."""
    tc = toy_corpus(tmp_path)
    before = {p.pid for p in live_workers()}
    batches = iter(lk.tokens.TokenBatches(tc, 16, 2, num_workers=2, timeout=30))
    next(batches)
    assert len([p for p in live_workers() if p.pid not in before]) == 2
    batches.close()
    assert [p for p in live_workers() if p.pid not in before] == []


def test_resume_exact_across_worker_counts(tmp_path):
    tc = toy_corpus(tmp_path, lengths=tuple(range(3, 200, 7)))
    workers = itertools.cycle([2, 0, 1])
    trial = lk.resume_trial(lambda: lk.tokens.TokenBatches(tc, 16, 4, num_workers=next(workers),
                                                    timeout=30),
                            (3, 4), ids_of=lambda b: b["sample"].tolist())
    assert trial.ok, lk.instruments.format_resume_table([trial])


def test_resume_with_another_batch_size_or_context(tmp_path):
    tc = toy_corpus(tmp_path)
    ref = torch.cat([b["sample"] for b in lk.tokens.TokenBatches(tc, 16, 4)])
    first = lk.tokens.TokenBatches(tc, 16, 4)
    got = [b["sample"] for b in itertools.islice(first, 2)]
    state = first.state_dict()
    assert state["samples_yielded"] == 8
    bigger = lk.tokens.TokenBatches(tc, 16, 3)
    bigger.load_state_dict(state)
    got += [b["sample"] for b in bigger]
    assert torch.equal(torch.cat(got), ref)
    with pytest.raises(ValueError, match="context"):
        lk.tokens.TokenBatches(tc, 32, 4).load_state_dict(state)
    with pytest.raises(ValueError, match="epoch 1"):
        lk.tokens.TokenBatches(tc, 16, 4, epoch=1).load_state_dict(state)


def ranks_run(tc, world_size, global_batch, steps=None, state=None, num_workers=0):
    """Every rank of a world simulated in this process: its batches and its saved state."""
    got, states = {}, []
    for rank in range(world_size):
        tb = lk.tokens.TokenBatches(tc, 16, global_batch // world_size, rank=rank,
                             world_size=world_size, num_workers=num_workers, timeout=30)
        if state is not None:
            tb.load_state_dict(state)
        got[rank] = list(itertools.islice(tb, steps))
        states.append(tb.state_dict())
    return got, states


def test_resume_exact_across_world_sizes(tmp_path):
    tc = toy_corpus(tmp_path, lengths=tuple(range(3, 300, 7)))
    ix = lk.tokens.DocumentEpoch(tc, 16)
    ref = [b["sample"] for b in lk.tokens.TokenBatches(tc, 16, 12)]  # one process, global batches
    before, states = ranks_run(tc, 2, 12, steps=3, num_workers=2)
    assert all(s == states[0] for s in states) and states[0]["samples_yielded"] == 36
    for world in (1, 3, 4):
        after, _ = ranks_run(tc, world, 12, state=states[0])
        steps = [torch.cat([b[s]["sample"] for b in before.values()]) for s in range(3)]
        steps += [torch.cat([got[s]["sample"] for got in after.values() if s < len(got)])
                  for s in range(len(after[0]))]
        assert all(torch.equal(a, b) for a, b in zip(steps, ref, strict=True)), world
        pos = torch.cat([b["pos"].flatten() for run in (before, after)
                         for got in run.values() for b in got]).numpy()
        counts = np.bincount(pos, minlength=len(tc.tokens))
        assert (counts <= 1).all() and (counts == 0).sum() == ix.remainder, world
    with pytest.raises(ValueError, match="outside"):
        lk.tokens.TokenBatches(tc, 16, 4, rank=2, world_size=2)


def test_budget_batches_cover_once_within_budget():
    lengths = np.random.default_rng(0).integers(1, 200, 500)
    batches = lk.tokens.budget_batches(lengths, 800, buffer_size=128, seed=1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    assert all(len(b) * lengths[b].max() <= 800 for b in batches)
    for lo in range(0, 500, 128):  # a batch never leaves its buffer
        assert all(b.min() >= lo or b.max() < lo for b in batches)
    fixed = [np.arange(i, min(i + 8, 500)) for i in range(0, 500, 8)]
    budget = lk.tokens.batch_padding(lengths, batches)
    plain = lk.tokens.batch_padding(lengths, fixed)
    assert budget["padding"] < plain["padding"] and budget["slots_max"] <= 800
    assert plain == {"batches": 63, "padding": plain["padding"], "rows_min": 4, "rows_max": 8,
                     "slots_max": plain["slots_max"]}
    again = lk.tokens.budget_batches(lengths, 800, buffer_size=128, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))
    with pytest.raises(ValueError, match="max_tokens"):
        lk.tokens.budget_batches([10, 900], 800)


def test_bad_token_file_sizes_and_indices(tmp_path):
    tc = toy_corpus(tmp_path)
    odd = tmp_path / "odd.bin"
    shutil.copy(tc.path, odd)
    with open(odd, "ab") as f:
        f.write(b"\x01")  # one stray byte: not a whole number of uint16 tokens
    with pytest.raises(lk.DataFormatError, match=r"odd\.bin.*byte offset 796"):
        lk.tokens.open_tokens(odd, vocab=300)
    offsets = tc.offsets.copy()
    offsets[-1] += 10
    np.save(tmp_path / "long.npy", offsets)
    with pytest.raises(lk.DataFormatError, match=r"long\.npy: document 8 ends at token offset "
                                                 r"408, past the end of .*tokens\.bin"):
        lk.tokens.open_tokens(tc.path, vocab=300, offsets=tmp_path / "long.npy")
    with pytest.raises(lk.DataFormatError, match="offsets must not decrease"):
        lk.tokens.open_tokens(tc.path, vocab=300, offsets=np.array([0, 10, 5, 445]))


def test_token_id_outside_vocab(tmp_path):
    tc = toy_corpus(tmp_path)
    data = np.fromfile(tc.path, np.uint16)
    data[123] = 300
    data.tofile(tmp_path / "bad.bin")
    with pytest.raises(lk.DataFormatError, match=r"bad\.bin: token id 300 at token offset 123 "
                                                 r"\(byte 246\) is >= the vocabulary size 300"):
        lk.tokens.open_tokens(tmp_path / "bad.bin", vocab=300)
    # the same file read as uint32 by mistake: odd size or huge ids, named either way
    with pytest.raises(lk.DataFormatError, match=r"bad\.bin"):
        lk.tokens.open_tokens(tmp_path / "bad.bin", vocab=300, dtype="uint32")


def test_blended_index_tracks_weights_on_every_prefix():
    weights = [0.6, 0.3, 0.1]
    source, within = lk.tokens.blended_index(weights, 5000)
    err = lk.tokens.prefix_error(source, weights)
    assert err[-1] < 1e-3 and err[100:].max() < 0.01  # every prefix within a sample or so
    for s in range(3):  # within counts each source's samples 0, 1, 2, ... in order
        assert (within[source == s] == np.arange((source == s).sum())).all()
    assert np.array_equal(lk.tokens.blended_index(weights, 5000)[0], source)  # no randomness
    rand = lk.tokens.random_mix(weights, 5000, seed=0)
    assert lk.tokens.prefix_error(rand, weights)[100:].max() > err[100:].max()
    with pytest.raises(ValueError, match="non-negative"):
        lk.tokens.blended_index([0.5, -0.1], 10)


def test_first_fit_decreasing_is_first_fit():
    """The segment tree finds the same row as a plain scan for the leftmost row with room."""
    lengths = np.random.default_rng(2).integers(1, 3 * CONTEXT, 500)
    chunks = sorted(((d, s, min(CONTEXT, n - s)) for d, n in enumerate(lengths.tolist())
                     for s in range(0, n, CONTEXT)), key=lambda c: -c[2])
    rows, room = [], []
    for c in chunks:
        r = next((i for i, left in enumerate(room) if left >= c[2]), len(rows))
        if r == len(rows):
            rows.append([])
            room.append(CONTEXT)
        rows[r].append(c)
        room[r] -= c[2]
    assert lk.tokens.pack(lengths, CONTEXT, "first-fit decreasing").rows == rows
