"""The token corpus of chapter 11: synthetic text, a BPE tokenizer trained on it, a flat token file.

nanoGPT's ``train.bin`` layout: every document's ids, each ended by an end-of-text id, back to
back (uint16 when the vocabulary fits, else uint32), with a document index of offsets
(``docs.npy``) and each document's source. The BPE (HF ``tokenizers``) is trained locally, so
the token bytes depend on its version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.writers import Writer
from ..errors import DataFormatError

EOS = "<|endoftext|>"
_SYLLABLES = ("ka to ri mu se na lo pe ti ra vo du ge shi an el or un is at "
              "ex om ba ce di fo gu he ji ku ly mo ny pa qu re so tu vi wo xa ye zo").split()


def token_dtype(vocab: int) -> np.dtype:
    """uint16 when every id fits in 16 bits (vocab <= 65536, GPT-2's 50257 does), else uint32."""
    return np.dtype(np.uint16 if vocab <= 1 << 16 else np.uint32)


def _lexicon(rng: np.random.Generator, words: int) -> np.ndarray:
    """``words`` distinct made-up words of 1-4 syllables (Zipf ranks follow the order)."""
    seen, out = set(), []
    while len(out) < words:
        n = int(rng.integers(1, 5))
        w = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return np.array(out, dtype=object)


def synth_corpus(spec: dict) -> tuple[list[str], np.ndarray, list[str]]:
    """The documents' texts, each one's source number, and the source names: each source has
    its own lognormal document length and Zipf word frequencies (over its own shuffled lexicon),
    so the mix has many short documents and a long tail far past the context length."""
    rng = np.random.default_rng(spec["seed"])
    lexicon = _lexicon(rng, spec["lexicon"])
    names = list(spec["sources"])
    profiles = [spec["sources"][s] for s in names]
    weights = np.array([p["share"] for p in profiles], float)
    src = rng.choice(len(names), size=spec["docs"], p=weights / weights.sum()).astype(np.uint8)
    zipf = np.arange(1, len(lexicon) + 1, dtype=float) ** -spec["zipf"]
    zipf /= zipf.sum()
    perms = [rng.permutation(len(lexicon)) for _ in names]
    lengths = np.array([1 + int(rng.lognormal(np.log(profiles[s]["median_words"]),
                                              profiles[s]["sigma"])) for s in src], np.int64)
    lengths = np.minimum(lengths, spec["max_words"])
    texts = [""] * spec["docs"]
    for s, perm in enumerate(perms):  # one vectorized draw per source, cut into its documents
        mine = np.flatnonzero(src == s)
        words = lexicon[perm[rng.choice(len(lexicon), size=int(lengths[mine].sum()), p=zipf)]]
        cuts = np.split(words, np.cumsum(lengths[mine])[:-1])  # one piece even for no docs
        for i, w in zip(mine, cuts, strict=False):
            texts[i] = " ".join(w)
    return texts, src, names


def train_tokenizer(texts, vocab: int, sample_docs: int | None = None):
    """A byte-level BPE tokenizer with ``vocab`` ids trained on ``texts`` (id 0 = EOS)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts[:sample_docs] if sample_docs else texts, trainer=trainer)
    return tok


@dataclass(frozen=True)
class TokenCorpus:
    """A flat token file mapped read-only: document ``d`` is ``tokens[offsets[d]:offsets[d + 1]]``
    (its last id ``eos``), from source ``source_names[sources[d]]`` (chapter 11)."""

    path: Path
    tokens: np.ndarray   # np.memmap, read-only
    offsets: np.ndarray  # int64, len docs + 1
    sources: np.ndarray  # uint8 per document
    vocab: int
    eos: int
    source_names: tuple[str, ...] = ()

    @property
    def docs(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:  # tokens per document, end-of-text included
        return np.diff(self.offsets)

    def document(self, d: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[d]:self.offsets[d + 1]])


def open_tokens(source, *, dtype=None, vocab: int | None = None, offsets=None) -> TokenCorpus:
    """Map a flat token file and check it against its index; errors name the file and offset.

    ``source``: a ``corpus`` fixture, or a token file's path (then give ``vocab``). ``offsets``:
    the document index (an array or a ``.npy`` path; default the fixture's, or one document).
    Every id is scanned once for ``id >= vocab``.
    """
    sources, eos, names = None, 0, ()
    if hasattr(source, "manifest"):  # a Fixture
        meta = source.meta
        path = source.file(meta["files"]["tokens"])
        dtype, vocab, eos, names = meta["dtype"], meta["vocab"], meta["eos"], meta["sources"]
        offsets = source.file(meta["files"]["docs"]) if offsets is None else offsets
        sources = np.load(source.file(meta["files"]["sources"]))
    else:
        path = Path(source)
        if vocab is None:
            raise ValueError(f"{path}: give vocab= for a plain token file")
    dtype = np.dtype(dtype) if dtype is not None else token_dtype(vocab)
    size = path.stat().st_size
    if size % dtype.itemsize:
        whole = size - size % dtype.itemsize
        raise DataFormatError(
            f"{path}: {size} bytes is not a whole number of {dtype.name} tokens "
            f"({dtype.itemsize} bytes each); the file ends mid-token at byte offset {whole} "
            "(truncated, or written with another dtype)")
    n = size // dtype.itemsize
    tokens = np.memmap(path, dtype=dtype, mode="r", shape=(n,)) if n else np.empty(0, dtype)
    where = Path(offsets) if isinstance(offsets, str | Path) else None
    offsets = np.load(offsets) if where else (np.array([0, n]) if offsets is None else offsets)
    offsets = np.asarray(offsets, dtype=np.int64)
    label = where or "the document index"
    if len(offsets) < 1 or offsets[0] != 0:
        raise DataFormatError(f"{label}: the first offset must be 0 (index for {path})")
    bad = np.flatnonzero(np.diff(offsets) < 0)
    if len(bad):
        d = int(bad[0])
        raise DataFormatError(f"{label}: document {d + 1} starts at token {offsets[d + 1]}, "
                              f"before document {d} ({offsets[d]}); offsets must not decrease")
    if offsets[-1] > n:
        d = int(np.argmax(offsets > n)) - 1
        raise DataFormatError(
            f"{label}: document {d} ends at token offset {int(offsets[d + 1])}, past the end of "
            f"{path} ({n} tokens); the index belongs to another (or a truncated) token file")
    for lo in range(0, n, 1 << 22):
        over = np.flatnonzero(np.asarray(tokens[lo:lo + (1 << 22)]) >= vocab)
        if len(over):
            i = lo + int(over[0])
            raise DataFormatError(f"{path}: token id {int(tokens[i])} at token offset {i} (byte "
                                  f"{i * dtype.itemsize}) is >= the vocabulary size {vocab}")
    if sources is None:
        sources = np.zeros(len(offsets) - 1, np.uint8)
    return TokenCorpus(path, tokens, offsets, sources, int(vocab), int(eos), tuple(names))


class CorpusWriter(Writer):
    """Chapter 11's text corpus, its BPE tokenizer and the flat token file (labkit.tokens)."""

    required = ("seed", "docs", "vocab", "context", "sources", "lexicon", "zipf", "max_words")

    def estimate_bytes(self, spec):
        return spec["docs"] * 400  # ~200 tokens of 2 bytes per document, on average

    def write(self, spec, dest, update):
        """corpus.jsonl, tokenizer.json, tokens.bin, docs.npy, sources.npy."""
        texts, src, names = synth_corpus(spec)
        with open(dest / "corpus.jsonl", "w") as fh:
            fh.writelines(json.dumps({"id": i, "source": names[s], "text": t}) + "\n"
                          for i, (t, s) in enumerate(zip(texts, src, strict=True)))
        tok = train_tokenizer(texts, spec["vocab"], spec.get("train_docs"))
        tok.save(str(dest / "tokenizer.json"))
        eos = tok.token_to_id(EOS)
        dtype = token_dtype(tok.get_vocab_size())
        lengths = np.empty(len(texts), np.int64)
        with open(dest / "tokens.bin", "wb") as fh:
            for lo in range(0, len(texts), 4096):  # encode_batch runs on the tokenizer's threads
                enc = tok.encode_batch(texts[lo:lo + 4096])
                ids = [e.ids + [eos] for e in enc]
                lengths[lo:lo + len(ids)] = [len(x) for x in ids]
                arr = np.fromiter((t for x in ids for t in x), dtype=dtype)
                fh.write(arr.tobytes())
                update(arr.nbytes)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        np.save(dest / "docs.npy", offsets)
        np.save(dest / "sources.npy", src)
        meta = {"dtype": dtype.name, "tokens": int(offsets[-1]), "docs": len(texts),
                "vocab": tok.get_vocab_size(), "eos": eos, "sources": names,
                "context": spec["context"], "files": {
                    "tokens": "tokens.bin", "docs": "docs.npy", "sources": "sources.npy",
                    "tokenizer": "tokenizer.json", "text": "corpus.jsonl"}}
        # samples = documents: a count that does not depend on the tokenizers version (tokens do)
        return meta, len(texts)
