"""Which loader for which situation: the decision table, with this machine's evidence (ch. 16).

Each row is one situation (data fits in RAM; larger than RAM on one node; terabytes on remote
storage with resume; decode-bound; distributed lazy loading), the recommendation, the
chapters that measured it, and the figure this machine measured there, read from the newest
checkpoint record of that chapter in the records folder. A chapter with no record says
"run chapter NN to measure it here" instead of inventing a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import RecordError
from .checkpoint import format_value, load_records


@dataclass(frozen=True)
class Evidence:
    """One figure to look up: an observation of a chapter's record (optionally by config)."""

    chapter: str          # the record's chapter, e.g. "02_mmap" (also the notebook's stem)
    observation: str      # the observation name
    label: str            # what the figure means, in a few words
    config: tuple = ()    # (key, value) pairs the observation's config must contain
    needs: str = ""       # an optional install the figure needs, e.g. "ray[data]"


@dataclass(frozen=True)
class Situation:
    """One row of the decision table."""

    situation: str
    recommendation: str
    evidence: tuple[Evidence, ...]


SITUATIONS: tuple[Situation, ...] = (
    Situation(
        "data fits in RAM",
        "load it once (np.load / a tensor) and slice batches; map-style Dataset, few or no "
        "workers; avoid one file per sample",
        (Evidence("02_mmap", "mmap_slices_sequential_warm.samples_per_s",
                  "memory-mapped slices, warm"),
         Evidence("02_mmap", "files_sequential_warm.samples_per_s", "one file per sample"))),
    Situation(
        "larger than RAM, one node",
        "np.memmap / np.load(mmap_mode='r') or Parquet row groups with column projection; "
        "read sequential slices; memory stays flat",
        (Evidence("02_mmap", "mmap_slices_random_cold.samples_per_s",
                  "memmap slices, cold cache"),
         Evidence("05_parquet_and_arrow", "rowgroups_0_workers.samples_per_s",
                  "Parquet row groups"))),
    Situation(
        "TB+ on remote storage, with resume",
        "tar shards (WebDataset) or HF datasets streaming, workers to hide latency, "
        "StatefulDataLoader / state_dict for exact resume; test resume with an audit",
        (Evidence("06_webdataset", "http_2_workers.samples_per_s",
                  "tar shards over HTTP, 2 workers"),
         Evidence("08_shuffling_and_resume", "resume.lost", "samples lost on resume, "
                  "StatefulDataLoader over lk.streams.TarShardStream",
                  (("loader", "SDL lk.streams.TarShardStream, 2 workers"),
                   ("run", "resumed twice"))))),
    Situation(
        "decode-bound (images)",
        "fastest decoder that gives the same pixels, workers up to the cores, then "
        "GPU decode (nvJPEG / DALI) where there is a GPU",
        (Evidence("10_decode_and_augment", "stage.bottleneck", "bounding stage"),
         Evidence("10_decode_and_augment", "decode.samples_per_s", "Pillow decode per core",
                  (("decoder", "pil"),)))),
    Situation(
        "decode-bound (video and audio)",
        "decode only the clip (seek + a few frames, torchcodec), short keyframe intervals "
        "when re-encoding for random access, decode at reduced size; workers or SPDL's "
        "threads up to the cores, with every failure counted; NVDEC where there is a GPU",
        (Evidence("15_video_and_audio", "clip.ms", "random 16-frame clip, 1 s keyframes",
                  (("backend", "torchcodec"), ("keyframe_interval", 25))),
         Evidence("15_video_and_audio", "keyframe_cost_ratio",
                  "clip cost, 10 s over 1-frame keyframes"))),
    Situation(
        "distributed, lazy (IterableDataset)",
        "split shards over rank x worker (get_worker_info + rank), set_epoch every epoch, "
        "audit exactly-once; DistributedSampler for map-style",
        (Evidence("04_scaling_out", "rank_worker.duplicates",
                  "duplicates, rank x worker split"),
         Evidence("04_scaling_out", "workers_only.duplicates",
                  "duplicates, split by worker only"))),
    Situation(
        "LLM pretraining (tokenized text)",
        "tokenize ahead into one flat token file + document index, memory-mapped (nanoGPT / "
        "Megatron layout); a document-shuffled epoch whose state is the order and a counter "
        "(exact resume); best-fit packing with document masks; tokenizing on the fly is the "
        "slow part, not reading",
        (Evidence("11_token_pipelines", "tokens_per_s", "memmap slices, tokens/s",
                  (("how", "memmap slices"),)),
         Evidence("11_token_pipelines", "tokenize_on_the_fly.tokens_per_s",
                  "tokenizing on the fly, tokens/s"),
         Evidence("11b_packing_and_masks", "packing.padding", "best-fit padding",
                  (("method", "best-fit decreasing"),)))),
    Situation(
        "random access to many small records",
        "one file with an index (a memmap, LMDB) instead of a file per sample; open handles "
        "lazily in each worker, never before the fork",
        (Evidence("12_storage_formats", "lmdb_random_0_workers.samples_per_s",
                  "LMDB random reads, one process"),
         Evidence("12_storage_formats", "file_per_sample_.npy_random_0_workers.samples_per_s",
                  "a file per sample, random, one process"))),
    Situation(
        "preprocessing-heavy, across machines",
        "Ray Data: read_parquet + map_batches on a cluster, iter_torch_batches into the "
        "training loop; measure it against the DataLoader on one machine first",
        # one machine only: the bake-off cannot show what a cluster adds, only Ray's overhead
        (Evidence("16_capstone", "bakeoff.ratio",
                  "Ray Data on ONE machine, x torch map-style (no cluster measured)",
                  (("loader", "Ray Data"),), needs="ray[data]"),)),
    Situation(
        "shards in an object store (S3 API)",
        "shards sized so transfer >> first-byte latency (lk.objstore.shard_bytes_for; 64-256 MB at "
        "~20 ms and ~100 MB/s), several GETs in flight per worker, a local shard cache that "
        "holds the data, botocore standard retries plus a retry of a body cut short; audit "
        "the epoch",
        (Evidence("14_object_stores", "latency_hidden",
                  "best in-flight setting, x the same reads with no latency"),
         Evidence("14b_cache_faults_clients", "faults_standard_exactly_once.missing",
                  "samples lost to 503/500/reset/stall, standard retries"))),
)


def _newest(records: list[dict], chapter: str, scale: str | None) -> dict | None:
    mine = [r for r in records if r.get("chapter") == chapter]
    if scale is not None and any(r.get("scale") == scale for r in mine):
        mine = [r for r in mine if r.get("scale") == scale]
    return max(mine, key=lambda r: str(r.get("created"))) if mine else None


def _find(record: dict, ev: Evidence):
    for obs in record.get("observations", []):
        cfg = obs.get("config") or {}
        if obs.get("name") == ev.observation and all(cfg.get(k) == v for k, v in ev.config):
            return obs
    return None


def decision_table(records=None, *, records_dir=None, scale: str | None = None) -> list[dict]:
    """The decision table's rows, each with its evidence looked up in the records.

    Args:
        records: loaded records (:func:`~labkit.load_records`); default: every record in
            ``records_dir`` (default: the kit's records folder). A missing or empty
            folder means no evidence yet, not an error.
        scale: prefer records of this scale (e.g. the current one) when a chapter has some.

    Returns:
        ``[{"situation", "recommendation", "chapters", "notebooks", "evidence": [{"chapter",
        "label", "observation", "value", "unit", "scale", "text"}]}]``; ``value`` is None
        where no record (or no such observation) exists, and ``text`` says which notebook to
        run. ``notebooks`` are the records' notebooks (``14_object_stores``,
        ``14b_cache_faults_clients``); ``chapters`` one of them per chapter (a "Going
        further" notebook is its chapter's).
    """
    if records is None:
        try:
            records = load_records(Path(records_dir) if records_dir else paths.records_dir())
        except RecordError:
            records = []
    rows = []
    for s in SITUATIONS:
        found = []
        for ev in s.evidence:
            rec = _newest(records, ev.chapter, scale)
            obs = _find(rec, ev) if rec else None
            nn = ev.chapter.partition("_")[0]   # "14", or "14b" for a Going-further notebook
            if obs is None:
                text = (f"run chapter {nn} to measure it here" if rec is None else
                        f"chapter {nn}'s record has no {ev.observation}; rerun chapter {nn}")
                if ev.needs:
                    text += f" with {ev.needs} installed"
                found.append({"chapter": ev.chapter, "label": ev.label,
                              "observation": ev.observation, "value": None, "unit": None,
                              "scale": None, "text": text, "needs": ev.needs})
                continue
            unit = obs.get("unit") or ""
            text = f"{ev.label}: {format_value(obs['value'])} {unit}".rstrip()
            found.append({"chapter": ev.chapter, "label": ev.label,
                          "observation": ev.observation, "value": obs["value"], "unit": unit,
                          "scale": rec.get("scale"), "text": text, "needs": ev.needs})
        notebooks = list(dict.fromkeys(ev.chapter for ev in s.evidence))
        chapters: dict[str, str] = {}
        for nb in notebooks:   # a Going-further notebook (14b_...) counts as its chapter's
            chapters.setdefault(paths.chapter_of(nb), nb)
        rows.append({"situation": s.situation, "recommendation": s.recommendation,
                     "chapters": list(chapters.values()), "notebooks": notebooks,
                     "evidence": found})
    return rows


def _chapter_link(chapter: str) -> str:
    nn, _, rest = chapter.partition("_")
    return f"[{nn} {rest.replace('_', ' ')}]({paths.notebook_path(chapter)}.ipynb)"


def format_decision_table(rows: list[dict], figures: bool = True) -> str:
    """The rows as a Markdown table; each chapter a link to its notebook.

    ``figures=False`` leaves the measured figures out (a deterministic table, e.g. for a
    checked notebook cell); with figures, each one names the observation it came from.
    """
    head = ["situation", "recommendation", "measured in"] + (["this machine"] if figures
                                                              else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["situation"], r["recommendation"],
                 ", ".join(_chapter_link(c) for c in r["notebooks"])]
        if figures:
            # dict.fromkeys: one "run chapter NN" line per chapter, not one per figure
            cells.append("<br>".join(dict.fromkeys(
                e["text"] + (f" (`{e['observation']}`, {e['scale']})" if e["value"] is not None
                             else "") for e in r["evidence"])))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
