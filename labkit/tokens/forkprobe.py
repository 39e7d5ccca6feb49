"""Tokenizer threads after fork: what HF ``tokenizers`` does in a forked child (chapter 11d).

Run as ``python -m labkit.tokens.forkprobe TOKENIZER_JSON CORPUS_JSONL DOCS``: it encodes
``DOCS`` documents in this process (``encode_batch`` uses the Rust thread pool unless
``TOKENIZERS_PARALLELISM=false``), forks with ``os.fork`` (what a fork-started DataLoader
worker is), encodes the same documents in the child, and prints one JSON line of both
rates. The library's warning, if any, goes to the child's output: the caller captures it.
A child that has not answered within ``deadline_s`` (a thread pool that cannot run after
fork: a deadlock) is killed and reported as hung. A separate process so that the probe's
fork cannot touch the caller's own thread pool.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import sys
import time

from tokenizers import Tokenizer


def _tokens_per_s(tok: Tokenizer, texts: list[str], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = sum(len(e.ids) for e in tok.encode_batch(texts))
        best = min(best, time.perf_counter() - t0)
    return n / best


def main(argv: list[str] | None = None, deadline_s: float = 2.0) -> dict:
    path, jsonl, docs = argv if argv is not None else sys.argv[1:]
    with open(jsonl) as f:
        texts = [json.loads(line)["text"] for line in itertools.islice(f, int(docs))]
    tok = Tokenizer.from_file(path)
    parent = _tokens_per_s(tok, texts)  # the pool has now run in this process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: as a fork-started worker would encode
        os.close(r)
        os.write(w, json.dumps(_tokens_per_s(tok, texts)).encode())
        os._exit(0)
    os.close(w)
    child = None
    if select.select([r], [], [], deadline_s)[0]:
        with os.fdopen(r) as f:
            child = json.loads(f.read())
    else:  # no answer: the child is stuck in the thread pool it inherited
        os.kill(pid, signal.SIGKILL)
        os.close(r)
    os.waitpid(pid, 0)
    out = {"TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM"),
           "parent_tokens_per_s": parent, "child_tokens_per_s": child,
           "child_hung": child is None, "docs": len(texts)}
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
