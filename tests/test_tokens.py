"""labkit.tokens (chapter 11): the corpus fixture, open_tokens and its bad-input errors, and the
window samplers the ceilings tool still imports. The chapter's subject (packers, masks, epochs,
resume, mixing) is typed in notebooks 11-11d, whose checked cells pin it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import labkit as lk
from labkit.tokens.corpus import synth_corpus, token_dtype


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
