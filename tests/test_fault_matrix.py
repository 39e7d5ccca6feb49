"""The fault matrix: every way data loading breaks in a workshop, one test per row.

Each row drives the kit's real readers, through torch's own DataLoader as the chapters type
it, into a fault and asserts the outcome exactly: the error's type and that its message names
the file (or the worker) and what is wrong, or a recovery counted sample by sample. Every wait
has a timeout; the per-test guard in conftest fails a row that leaves a worker behind. Rows
that kill a worker run it in a process of their own (``faulty_datasets.break_a_loader``):
torch's SIGCHLD handler raises wherever the main thread is, which must not be pytest. Damaged
data is always a copy (``lk.damaged_copy`` into ``tmp_path``); the fixture cache is never
touched.

==================  =================================  ===========================================
row                 checked on                         expected outcome
==================  =================================  ===========================================
truncated tar       streams.TarShardStream (2 wkrs);   DataFormatError: shard, its bytes, the member
                    chapter 06's webdataset pipeline,  cut and the bytes it needs; ReadError naming
                    default and warn_and_continue      the shard; skipping loses exactly the
                                                       samples from the cut on
truncated npy       lk.open_array (.npy, raw),         DataFormatError: file, bytes found vs bytes
                    streams.ShardStream, NpyFiles...   its header (dtype x shape) needs; a damaged
                    (2 workers)                        header is called "not a .npy file"
truncated Parquet   chapter 05's open_parquet and      DataFormatError: file, no footer; a damaged
                    RowGroups (2 workers)              row group: "row group g of n cannot be read"
corrupt JPEG        lk.ImageFolderDataset (2 workers)  DataFormatError: file, sample id, decoder;
                    raise / on_error="skip"            skip: exactly ids 10, 20 skipped, counted
missing fixture     lk.fixture: a deleted file, an     FixtureError naming the file and the repair
                    unknown name, never generated      command; repair/generation: exact digest
checksum mismatch   lk.fixture's verify: flipped       FixtureError: file, actual vs manifest
                    bytes (new mtime; mtime kept)      sha256; repair restores the digest; a flip
                                                       with the mtime kept needs verify_all
server faults       chapter 06's webdataset over       latency: every sample once, each request
                    lk.remote.serve: latency, a drop,  slowed; drop: error naming the shard URL;
                    connection, 503 once, 503 always,  503 once: retried, every sample once; 503
                    a stall                            always / stall: timeout= ends it in ~2 s
worker crash        torch's DataLoader, in a process   RuntimeError "DataLoader worker (pid(s) N)
                    of its own; a worker exits,        exited unexpectedly"; fork, spawn: in
                    segfaults, is SIGKILLed (fork,     seconds (SIGCHLD); forkserver: at the
                    spawn, forkserver)                 timeout; no worker left after del it
worker hang         torch's DataLoader(timeout=2)      RuntimeError "DataLoader timed out after
                                                       2 seconds" after ~2 s; no worker left
spawn, forkserver   streams.TarShardStream; a Dataset  every id exactly once; "exited unexpectedly"
                    class from __main__ (a notebook)   in seconds, the worker's AttributeError
                                                       on its stderr
interrupt, resume   StatefulDataLoader over            resumed == uninterrupted ids, same order:
                    TarShardStream, SIGINT mid-epoch   none lost, none repeated
                    (Jupyter interrupt; Ctrl-C)
notebook run twice  chapter 00, Run All twice in one   no error; no fixture file rewritten; a
                    kernel, same data and records      second record; no temp folder left
end of session      test_session_end.py, after the     no process the session started (worker,
                    notebooks (conftest), any worker   kernel, torchrun) and no new /dev/shm entry
==================  =================================  ===========================================
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import psutil
import pytest
from chapter_code import chapter_module
from contracts import epoch_ids
from faulty_datasets import break_a_loader
from torch.utils.data import DataLoader

import labkit as lk
from labkit.data.faults import damage
from labkit.data.fixtures import verify
from labkit.errors import FixtureError
from labkit.images.folder import skip_collate
from labkit.loading.loaders import worker_processes
from labkit.streams.tarshards import TarShardStream, index_shard

pytestmark = pytest.mark.filterwarnings("ignore:.set_vital. is deprecated")


def _ids(batch) -> list[int]:
    ids = batch["id"] if isinstance(batch, dict) else batch[1]
    return ids.tolist() if hasattr(ids, "tolist") else [int(ids)]


def _cut_samples(shard, cut: int) -> tuple[list[int], str, int]:
    """For ``shard`` cut to ``cut`` bytes: the ids of samples wholly before the cut, and the
    member the cut falls in with the bytes it needs."""
    whole, cut_member = [], None
    for key, members in index_shard(shard):
        for ext, (offset, size) in sorted(members.items(), key=lambda m: m[1][0]):
            if offset + size > cut and cut_member is None:
                cut_member = (f"{key}.{ext}", offset + size)
        if all(o + n <= cut for o, n in members.values()):
            whole.append(int(key))
    return whole, *cut_member


# -- truncated tar ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wds_fx(ci_fixture):
    return ci_fixture("wds")


@pytest.fixture
def cut_tar(wds_fx, tmp_path):
    """A copy of the wds fixture with shard 1 cut at half its bytes; what that cut loses."""
    shard = wds_fx.file_list(".tar")[1]
    bad = lk.damaged_copy(wds_fx, tmp_path / "wds", "truncate", file=shard.name, at=0.5)
    size = bad.stat().st_size
    whole, member, need = _cut_samples(shard, size)
    first, n = wds_fx.meta["shards"][1]["first_id"], wds_fx.meta["shards"][1]["samples"]
    lost = sorted(set(range(first, first + n)) - set(whole))
    return bad, size, member, need, whole, lost


def _wds_pipeline(urls, handler=None):
    """Chapter 06's pipeline: decode, then (jpg, cls, npy) tuples, batched."""
    import webdataset as wds

    kw = {"handler": handler} if handler else {}
    return (wds.WebDataset(urls, shardshuffle=False, **kw).decode("torchrgb8", **kw)
            .to_tuple("jpg", "cls", "npy", "__key__", **kw).batched(16))


def _wds_ids(pipeline) -> list[int]:
    return [int(k) for *_, keys in pipeline for k in keys]


def _raised(exc_type, fn, *args, match: str | None = None) -> str:
    """The message of the ``exc_type`` that ``fn(*args)`` raises. Its traceback is dropped
    here: it holds the loader's iterator, whose workers torch stops when that goes. torch's
    ``ExceptionWrapper.reraise`` keeps the exception in a local of a frame its own traceback
    holds, a reference cycle: left to the collector, which finalizes the queues first, each
    worker's join timed out (5 s a worker, after every such test)."""
    with pytest.raises(exc_type, match=match) as info:
        fn(*args)
    msg = str(info.value)
    info.value.__traceback__ = None
    del info
    return msg


def test_truncated_tar_kit_stream_names_shard_and_sizes(cut_tar):
    bad, size, member, need, whole, _ = cut_tar
    loader = DataLoader(TarShardStream(bad.parent, shuffle_shards=False), batch_size=32,
                        num_workers=2, timeout=30)
    msg = _raised(lk.DataFormatError, epoch_ids, loader)
    assert (f"{bad}: the shard is truncated ({size} bytes, member {member} needs {need}); "
            f"{len(whole)} samples readable before the cut") in msg


def test_truncated_tar_webdataset_default_handler_raises_naming_the_shard(cut_tar):
    import tarfile

    bad, *_ = cut_tar
    urls = sorted(str(p) for p in bad.parent.glob("*.tar"))
    with pytest.raises(tarfile.ReadError) as info:
        _wds_ids(_wds_pipeline(urls))
    assert "unexpected end of data" in str(info.value) and str(bad) in str(info.value)


def test_truncated_tar_webdataset_warn_and_continue_loses_exactly_the_cut_samples(cut_tar,
                                                                                    wds_fx):
    import webdataset as wds

    bad, _, _, _, whole, lost = cut_tar
    urls = sorted(str(p) for p in bad.parent.glob("*.tar"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one warning per skipped error
        got = _wds_ids(_wds_pipeline(urls, handler=wds.warn_and_continue))
    result = lk.audit(got, wds_fx.samples)
    # the sample the cut falls in arrives without its .npy member; to_tuple drops it too
    assert result.duplicates == 0 and list(result.missing_ids) == lost, result.table()
    assert len(lost) == 128 - len(whole) and lost[0] == whole[-1] + 1


# -- truncated npy ----------------------------------------------------------------------------


def test_truncated_npy_open_array_says_bytes_found_and_needed(ci_fixture, tmp_path):
    fx = ci_fixture("array")
    bad = lk.damaged_copy(fx, tmp_path / "array", "truncate", file="array.npy", at=0.5)
    rows, features = fx.meta["shape"]
    need = fx.manifest["files"]["array.npy"]["bytes"]
    for open_it in (lambda: lk.open_array(bad), lambda: lk.MemmapRows(bad)):
        with pytest.raises(lk.DataFormatError) as info:
            open_it()
        assert str(info.value) == (
            f"{bad}: {bad.stat().st_size} bytes, but its header says float32 "
            f"({rows}, {features}) ({need} bytes); the file is truncated or was overwritten")
    raw = bad.parent / "array.raw"
    damage(raw, "truncate", at=0.75)
    with pytest.raises(lk.DataFormatError, match=re.escape(
            f"{raw}: {raw.stat().st_size} bytes, expected {rows * features * 4} for float32 "
            f"({rows}, {features})")):
        lk.open_array(raw, "float32", (rows, features))


def test_truncated_npy_shard_fails_when_the_stream_is_built(ci_fixture, tmp_path):
    fx = ci_fixture("array_shards")
    bad = lk.damaged_copy(fx, tmp_path / "shards", "truncate", file="shard-00001.npy", at=0.3)
    copy = type(fx)(**{**fx.__dict__, "path": bad.parent})  # the fixture, moved to the copy
    size = bad.stat().st_size
    with pytest.raises(lk.DataFormatError,
                       match=rf"^{re.escape(str(bad))}: {size} bytes, but its header says"):
        lk.streams.ShardStream(copy)


def test_truncated_npy_sample_file_through_workers(ci_fixture, tmp_path):
    fx = ci_fixture("sample_files")
    bad = lk.damaged_copy(fx, tmp_path / "files", "truncate", file="samples/0000005.npy", at=0.5)
    loader = DataLoader(lk.data.NpyFilesDataset(bad.parents[1]), batch_size=4, num_workers=2,
                        timeout=30)
    msg = _raised(lk.DataFormatError, epoch_ids, loader)
    assert f"{bad}: cannot read sample 5" in msg and "Expected (256,) = 256 elements" in msg


def test_npy_sample_with_a_damaged_header_is_called_what_it_is(ci_fixture, tmp_path):
    bad = lk.damaged_copy(ci_fixture("sample_files"), tmp_path / "files", "flip",
                          file="samples/0000005.npy", at=0.0, length=8)
    with pytest.raises(lk.DataFormatError, match=re.escape(
            f"{bad}: sample 5 is not a .npy file (starts with b'l")) as info:
        lk.data.NpyFilesDataset(bad.parents[1])[5]
    assert "expected b'\\x93NUMPY'" in str(info.value) and "pickle" not in str(info.value)


# -- truncated Parquet ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pq_fx(ci_fixture):
    return ci_fixture("parquet")


@pytest.fixture(scope="module")
def ch05(tmp_path_factory):
    """Chapter 05's own ``rowgroups.py`` (its ``%%writefile`` cell): open_parquet, RowGroups."""
    return chapter_module("05", "rowgroups.py", tmp_path_factory.mktemp("ch05"))


def test_truncated_parquet_fails_on_open_naming_the_file(ch05, pq_fx, tmp_path):
    bad = lk.damaged_copy(pq_fx, tmp_path / "pq", "truncate", file="shard-00001.parquet", at=0.5)
    files = sorted(bad.parent.glob("*.parquet"))
    for open_it in (lambda: ch05.open_parquet(bad), lambda: ch05.RowGroups(files, 256)):
        with pytest.raises(lk.DataFormatError) as info:
            open_it()
        assert str(info.value).startswith(f"{bad}: not a readable Parquet file (Parquet magic "
                                          "bytes not found in footer")


def test_damaged_parquet_row_group_fails_naming_file_and_row_group(ch05, pq_fx, tmp_path):
    import pyarrow.parquet as pq

    src = pq_fx.file("shard-00001.parquet")
    meta = pq.ParquetFile(src).metadata
    features = [meta.row_group(1).column(j) for j in range(meta.num_columns)
                if meta.row_group(1).column(j).path_in_schema.startswith("features")][0]
    at = features.data_page_offset / src.stat().st_size  # the data page header of group 1
    bad = lk.damaged_copy(pq_fx, tmp_path / "pq", "flip", file=src.name, at=at, length=64)
    ch05.open_parquet(bad)  # the footer is intact: the file opens
    loader = DataLoader(ch05.RowGroups(sorted(bad.parent.glob("*.parquet")), 512),
                        batch_size=None, num_workers=2, timeout=30)
    _raised(lk.DataFormatError, epoch_ids, loader,
            match=re.escape(f"{bad}: row group 1 of {meta.num_row_groups} cannot be read ("))


# -- corrupt JPEG -----------------------------------------------------------------------------


@pytest.fixture
def bad_images(ci_fixture, tmp_path):
    """A copy of the images fixture with samples 10 and 20 truncated."""
    folder = tmp_path / "images"
    lk.damaged_copy(ci_fixture("images"), folder, "truncate", file="images/0000010.jpg", at=0.2)
    damage(folder / "images/0000020.jpg", "truncate", at=0.1)
    return folder


def test_corrupt_jpeg_raises_naming_file_sample_and_decoder(bad_images):
    loader = DataLoader(lk.ImageFolderDataset(bad_images), batch_size=8, num_workers=2,
                        timeout=30)
    msg = _raised(lk.DataFormatError, epoch_ids, loader)
    # batch 1 (ids 8-15) comes before batch 2 (ids 16-23): sample 10's error is raised
    assert (f"{bad_images / 'images/0000010.jpg'}: sample 10 is not a decodable JPEG (pil: "
            "OSError: ") in msg


def test_corrupt_jpeg_skipped_and_counted(bad_images):
    ds = lk.ImageFolderDataset(bad_images, on_error="skip")
    loader = DataLoader(ds, batch_size=16, num_workers=2, timeout=30,
                        collate_fn=skip_collate)
    skipped, ids = 0, []
    for batch in loader:  # a whole epoch: torch stops the workers at its end
        skipped += batch["skipped"]
        ids += batch["id"].tolist()
    assert skipped == 2 and len(ids) == len(ds) - 2 == len(set(ids))
    assert sorted(set(range(len(ds))) - set(ids)) == [10, 20]


# -- missing fixture, checksum mismatch --------------------------------------------------------


def test_missing_fixture_file_names_it_and_repair_restores_the_digest(ci_fixture, own_data):
    good = ci_fixture("jsonl")
    gone = lk.damaged_copy(good, own_data / "ci" / "jsonl", "delete", file="shard-00001.jsonl")
    with pytest.raises(FixtureError) as info:
        lk.fixture("jsonl", "ci", progress=False)
    msg = str(info.value)
    assert f"{gone}: missing" in msg and "labkit fixtures jsonl --scale ci --repair" in msg
    fixed = lk.fixture("jsonl", "ci", progress=False, repair=True)
    assert (fixed.status, fixed.digest) == ("repaired", good.digest) and gone.is_file()
    assert verify(fixed, full=True) == []


def test_unknown_fixture_lists_the_known_ones():
    with pytest.raises(FixtureError) as info:
        lk.fixture("imagez", "ci")
    msg = str(info.value)
    assert msg.startswith("no fixture named 'imagez' in ") and "fixtures.toml" in msg
    assert "images" in msg.split("known: ")[1]


def test_never_generated_fixture_is_generated_once(ci_fixture, own_data):
    first = lk.fixture("array", "ci", progress=False)
    again = lk.fixture("array", "ci", progress=False)
    assert (first.status, again.status) == ("generated", "cached")
    assert first.digest == again.digest == ci_fixture("array").digest
    assert first.path.parent.parent == own_data


def test_checksum_mismatch_says_actual_and_expected_and_repair_restores(ci_fixture, own_data):
    good = ci_fixture("array")
    rel = next(iter(good.manifest["files"]))
    bad = lk.damaged_copy(good, own_data / "ci" / "array", "flip", file=rel, at=0.5, length=8)
    actual = hashlib.sha256(bad.read_bytes()).hexdigest()
    with pytest.raises(FixtureError) as info:
        lk.fixture("array", "ci", progress=False)
    assert (f"{bad}: sha256 {actual[:12]}... does not match the manifest's "
            f"{good.manifest['files'][rel]['sha256'][:12]}...") in str(info.value)
    fixed = lk.fixture("array", "ci", progress=False, repair=True)
    assert (fixed.status, fixed.digest) == ("repaired", good.digest)


def test_checksum_mismatch_with_mtime_restored_needs_verify_all(ci_fixture, own_data):
    good = ci_fixture("array")
    rel = next(iter(good.manifest["files"]))
    bad = lk.damaged_copy(good, own_data / "ci" / "array", "flip", file=rel, at=0.5, length=8)
    os.utime(bad, ns=(bad.stat().st_atime_ns, good.manifest["files"][rel]["mtime_ns"]))
    # the fast check trusts size + mtime (documented); only a full check hashes every byte
    assert lk.fixture("array", "ci", progress=False).status == "cached"
    with pytest.raises(FixtureError, match=re.escape(f"{bad}: sha256 ")):
        lk.fixture("array", "ci", progress=False, verify_all=True)


# -- server latency, dropped connection, 5xx ---------------------------------------------------


def _curls(url: str) -> list:
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if p.info["name"] == "curl" and any(url in a for a in p.info["cmdline"] or ()):
                out.append(p)
        except psutil.Error:
            pass
    return out


def _no_curl_left(url: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _curls(url) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _curls(url)


def test_server_latency_every_sample_once_every_request_slowed(wds_fx):
    with lk.remote.serve(wds_fx, latency_s=0.1) as srv:
        got = _wds_ids(_wds_pipeline(srv.urls("*.tar")))
        log = srv.log
    assert lk.audit(got, wds_fx.samples).ok
    assert [r.status for r in log] == [200] * 4 and all(r.seconds >= 0.1 for r in log)


def test_dropped_connection_raises_naming_the_shard_url(wds_fx):
    import tarfile

    fault = lk.Fault("drop", path="shard-00001.tar", after_bytes=20_000)
    with lk.remote.serve(wds_fx, faults=[fault]) as srv:
        # which comes first varies: tarfile finding the stream short, or curl's exit 18
        # ("partial file") when webdataset checks it
        with pytest.raises((tarfile.ReadError, OSError)) as info:
            _wds_ids(_wds_pipeline(srv.urls("*.tar")))
        dropped = [(r.path, r.bytes_sent, r.fault) for r in srv.log if r.fault]
        url = srv.url_for("shard-00001.tar")
    assert re.search(r"unexpected end of data|exit 18", str(info.value)), str(info.value)
    assert url in info.value.args  # webdataset appends the URL it was reading
    assert dropped == [("shard-00001.tar", 20_000, "drop after 20000 B")]
    assert _no_curl_left(url)


def test_transient_503_is_retried_and_every_sample_arrives_once(wds_fx):
    fault = lk.Fault("status", path="shard-00000.tar", code=503, nth=1)
    with lk.remote.serve(wds_fx, faults=[fault]) as srv:
        got = _wds_ids(_wds_pipeline(srv.urls("*.tar")))
        statuses = [r.status for r in srv.log if r.path == "shard-00000.tar"]
    assert lk.audit(got, wds_fx.samples).ok and statuses == [503, 200]  # one retry, counted


@pytest.mark.parametrize("fault", [lk.Fault("status", path="shard-00001.tar", code=503),
                                   lk.Fault("stall", path="shard-00001.tar", stall_s=60)],
                         ids=["503-always", "stall"])
def test_server_that_never_answers_is_ended_by_the_loader_timeout(wds_fx, fault):
    """curl retries a 503 for a minute, and waits on a stall for as long: timeout= ends both."""
    with lk.remote.serve(wds_fx, faults=[fault]) as srv:
        loader = DataLoader(_wds_pipeline(srv.urls("*.tar")), batch_size=None, num_workers=1,
                            timeout=2)
        got, it = [], iter(loader)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError) as info:
            for batch in it:
                got += [int(k) for k in batch[-1]]
                t0 = time.monotonic()
        waited, msg = time.monotonic() - t0, str(info.value)
        del info, it  # the last references: torch stops the worker (joined 5 s, then killed)
        left = _none_left()
        url = srv.url_for("shard-00001.tar")
    hits = [r.fault for r in srv.log if r.path == "shard-00001.tar"]  # a stall is logged at stop
    # shard 0 but its last batch: sample 127 is complete only when the next key arrives
    assert got == list(range(112))
    assert msg == "DataLoader timed out after 2 seconds"
    assert 2 <= waited < 6 and left == []
    assert hits and set(hits) == {str(fault)}
    assert _no_curl_left(url)  # the orphaned curl ends with the server


def _none_left(within_s: float = 15.0) -> list:
    """The worker processes still alive once they have had ``within_s`` to end."""
    deadline = time.monotonic() + within_s
    while (left := worker_processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# -- worker crash, worker hang ----------------------------------------------------------------

# torch's words for a dead worker: its own check ("pid(s)"), which also wraps its SIGCHLD
# handler's error ("exited unexpectedly with exit code 3", "is killed by signal: ...")
_DEAD = r"^DataLoader worker \(pid(\(s\))? \d+\) (exited unexpectedly|is killed by signal)"


@pytest.mark.parametrize("context, how, timeout", [
    ("fork", "exit", 30), ("fork", "SIGSEGV", 30), ("fork", "SIGKILL", 30),
    ("spawn", "SIGKILL", 30), ("forkserver", "exit", 8),
])
def test_worker_crash_is_a_runtime_error_and_del_it_leaves_no_worker(context, how, timeout):
    """A worker dies reading its first item (no batch of its in flight). fork and spawn
    workers are this process's children: SIGCHLD reports the death in seconds. A forkserver
    worker is the fork server's child: torch finds it dead only when timeout= runs out.

    The worker dies 1 s in, with the main thread waiting for a batch: a death in the first
    milliseconds can hang ``del it`` for good (see ``BreaksAt``; 03b)."""
    r = break_a_loader(context, how, timeout, after_s=1.0)
    assert r["error"] and r["error"]["type"] == "RuntimeError", r
    assert re.search(_DEAD, r["error"]["message"]), r
    if context == "forkserver":
        assert r["noticed_s"] > timeout / 2, r  # at the timeout, not before
    else:
        assert r["noticed_s"] < timeout / 2, r  # in seconds, not the timeout
    assert r["left"] == 0, r  # del it: torch stopped the other worker


def test_worker_hang_ends_at_the_timeout_and_del_it_leaves_no_worker():
    r = break_a_loader("fork", "hang", 2, bad=10)  # index 10: batch 2, worker 0's second
    assert r["error"] == {"type": "RuntimeError",
                          "message": "DataLoader timed out after 2 seconds"}, r
    assert r["got"] == [0, 1, 2, 3, 4, 5, 6, 7]  # batches 0 and 1
    assert 1.5 <= r["noticed_s"] < 10 and r["left"] == 0, r


# -- spawn and forkserver ---------------------------------------------------------------------


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_start_method_kit_stream_exactly_once(wds_fx, context):
    loader = DataLoader(TarShardStream(wds_fx, seed=0, buffer_size=16), batch_size=64,
                        num_workers=2, timeout=60, multiprocessing_context=context)
    result = lk.audit(epoch_ids(loader), wds_fx.samples)
    assert result.ok, result.table()


_NOTEBOOK_CELL = """
import json, time
from torch.utils.data import DataLoader, Dataset

class CellDataset(Dataset):  # defined in __main__, as in a notebook cell
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return i

t0 = time.monotonic()
try:
    next(iter(DataLoader(CellDataset(), batch_size=4, num_workers=1, timeout=60,
                         multiprocessing_context="spawn")))
    out = {"error": None}
except Exception as e:
    out = {"error": type(e).__name__, "message": str(e)}
out["seconds"] = time.monotonic() - t0
print(json.dumps(out))
"""


def test_spawn_worker_cannot_import_a_notebook_cell_class():
    """In a process of its own: the worker dies (exit code 1), this is a worker death."""
    import json
    import subprocess

    r = subprocess.run([sys.executable, "-c", _NOTEBOOK_CELL], capture_output=True, text=True,
                       timeout=120)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"] == "RuntimeError" and re.search(_DEAD, out["message"]), out
    assert out["seconds"] < 30, out  # SIGCHLD, not the timeout
    # the worker's own traceback, on the stderr it shares with its parent
    assert "AttributeError: Can't get attribute 'CellDataset' on <module '__main__'" in r.stderr


# -- interrupt mid-epoch, then resume ---------------------------------------------------------

# SIGINT's handler when this process started: Python's own, or SIG_IGN when the run was launched
# in the background of a shell without job control (`make test &`, nohup): Python then keeps
# the inherited "ignore", and a Ctrl-C could never reach the test
SIGINT_AT_START = signal.getsignal(signal.SIGINT)


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for one test, as a terminal or a Jupyter kernel has it.

    Anything but that handler or the one inherited at start was left by an earlier test's
    library (litdata.optimize did: see labkit/remote/leftovers.py), and fails here by name."""
    found = signal.getsignal(signal.SIGINT)
    assert found in (signal.default_int_handler, SIGINT_AT_START), (
        f"SIGINT handler left by an earlier test: {found!r}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, found)


@pytest.mark.parametrize("who", ["kernel", "terminal"])
def test_interrupt_mid_epoch_then_resume_loses_and_repeats_nothing(wds_fx, who, python_sigint):
    """SIGINT after batch 3: to the main process only (Jupyter's interrupt button), or to the
    workers too (Ctrl-C in a terminal signals the whole foreground process group)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make():
        return StatefulDataLoader(TarShardStream(wds_fx, seed=3, buffer_size=64),
                                  batch_size=32, num_workers=2, timeout=30)

    reference = epoch_ids(make())
    loader, before = make(), []
    it = iter(loader)
    try:
        with pytest.raises(KeyboardInterrupt):
            for batch in it:
                before += _ids(batch)
                if len(before) == 3 * 32:
                    if who == "terminal":  # the reference pass's workers were shut down
                        for w in lk.worker_processes():
                            os.kill(w.pid, signal.SIGINT)
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(5)  # the KeyboardInterrupt arrives before this ends
        state = pickle.loads(pickle.dumps(loader.state_dict()))  # what a restart keeps
    finally:
        del it, loader  # a StatefulDataLoader keeps its iterator: both go, then its workers
    resumed = make()
    resumed.load_state_dict(state)
    after = epoch_ids(resumed)
    got = before + after
    lost, repeated = Counter(reference) - Counter(got), Counter(got) - Counter(reference)
    assert (sum(lost.values()), sum(repeated.values())) == (0, 0) and got == reference
    assert len(before) == 96 and len(reference) == wds_fx.samples


# -- a notebook run twice ---------------------------------------------------------------------


def test_notebook_run_twice_in_one_kernel(labkit_env, tmp_path, monkeypatch):
    """Chapter 00, Run All twice in the same kernel (what a learner does), on the session's
    fixture cache and one records folder."""
    import nbformat
    from nbclient import NotebookClient

    from labkit import paths
    from labkit.data.fixtures import load_specs

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the kernel's temporary folders land here
    # torch's compile cache (made at import of torch._dynamo, e.g. by torchcodec in labkit doctor)
    # is a per-user cache, not the chapter's leftover; where it goes otherwise depends on
    # whether an earlier test in this process already imported it (torch then sets this)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch-cache"))
    monkeypatch.setenv("LABKIT_SCALE", "ci")
    records = tmp_path / "records"  # both runs' records, and nothing else
    monkeypatch.setenv("LABKIT_RECORDS", str(records))
    nb = nbformat.read(paths.notebooks_dir() / "00_start_here.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(paths.notebooks_dir())}})
    data = labkit_env["data"] / "ci"
    stamps = []
    with client.setup_kernel():
        for _ in range(2):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)  # raises CellExecutionError on any error
            stamps.append({p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()
                           and not p.name.startswith(".")})
    # records are named by the second they were written; one in the same second gets "-1"
    new = sorted(p.name for p in records.glob("*.json"))
    assert len(new) == 2 and all(n.startswith("00_start_here--") for n in new), new
    assert stamps[1] == stamps[0]  # the second run regenerated and rewrote nothing
    # the cells hold the second run's outputs: its fixture table says every one was cached
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    statuses = re.findall(r"^(\w+) +(cached|generated|repaired) ", text, re.MULTILINE)
    assert sorted(statuses) == sorted((name, "cached") for name in load_specs()), statuses
    leftovers = [p.name for p in data.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == [] and list(scratch.iterdir()) == []


# -- the end of the session (the check itself: test_session_end.py) ---------------------------


def copy_conftest(folder) -> None:
    """This suite's conftest.py and the modules it imports, for a pytest run in ``folder``."""
    for name in ("conftest.py", "gpu_gate.py", "matrix.py"):
        shutil.copy(Path(__file__).parent / name, Path(folder) / name)


def test_session_leftovers_check_fails_on_a_deliberate_leak(tmp_path, request):
    """A pytest run with this conftest, a test that leaks a process and a /dev/shm entry,
    and the session-last check: the run must fail and name both."""
    import subprocess

    copy_conftest(tmp_path)
    shm = f"labkit-leaktest-{os.getpid()}"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_session_end.py").write_text(  # sorts first: the hook must move it last
        "import pytest\n\n\n"
        "@pytest.mark.session_last\n"
        "def test_last(session_leftovers):\n"
        "    problems = session_leftovers()\n"
        "    assert not problems, '\\n'.join(problems)\n")
    (tmp_path / "test_z_leak.py").write_text(
        "import subprocess, sys\nfrom pathlib import Path\nimport pytest\n\n\n"
        "@pytest.fixture(scope='session')\n"
        "def sleeper():\n"  # session-scoped: the per-test guard does not own it
        "    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        f"    Path({str(tmp_path / 'pid')!r}).write_text(str(p.pid))\n"
        "    return p\n\n\n"
        "def test_leaks(sleeper):\n"
        f"    Path('/dev/shm/{shm}').write_bytes(b'x')\n")
    # no third-party plugins (nbval, jupyter): only the conftest under test, and quick
    env = {**os.environ, "LABKIT_LEAK_GRACE_S": "0.5", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:randomly", str(tmp_path)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        pid = (tmp_path / "pid").read_text() if (tmp_path / "pid").exists() else None
        if pid:
            try:
                psutil.Process(int(pid)).kill()
            except psutil.Error:
                pass
        if os.path.exists(f"/dev/shm/{shm}"):
            os.unlink(f"/dev/shm/{shm}")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 failed, 1 passed" in out and "test_last" in out, out
    assert f"pid {pid}" in out and shm in out, out


def test_a_file_left_in_the_sessions_temp_folder_fails_the_run(tmp_path):
    """Every process of a session writes its temp files in the session's own folder; what a
    run leaves there, besides the few expected names, fails it and is named. A clean run's
    folder is removed."""
    import subprocess

    copy_conftest(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_temp.py").write_text(
        "import os, subprocess, sys, tempfile\n\n\n"
        "def test_leaves_a_file():\n"   # by a child process: TMPDIR reaches it
        "    subprocess.run([sys.executable, '-c', 'import tempfile; "
        "tempfile.mkstemp(prefix=\"lockfile-\")'], check=True)\n"
        f"    open({str(tmp_path / 'root')!r}, 'w').write(tempfile.gettempdir())\n")
    env = {**os.environ, "LABKIT_LEAK_GRACE_S": "0.5", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def run():
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)

    r = run()
    root = Path((tmp_path / "root").read_text())
    try:
        out = r.stdout + r.stderr
        assert r.returncode == 1 and "left in the session's temp folder" in out, out
        assert "lockfile-" in out and root.is_dir(), out
    finally:
        shutil.rmtree(root, ignore_errors=True)
    (tmp_path / "test_temp.py").write_text(
        "import tempfile\n\n\ndef test_clean():\n"
        f"    open({str(tmp_path / 'root')!r}, 'w').write(tempfile.gettempdir())\n")
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert not Path((tmp_path / "root").read_text()).exists()


def test_under_xdist_the_session_end_runs_alone_last_and_sees_any_workers_orphan(tmp_path):
    """`make test`'s two xdist workers: the session-end file waits for every other worker to
    end its session (a slow session-fixture teardown on the other worker included), and a
    process orphaned by either worker (a shell's background child, reparented away from
    pytest) is still named, by the session's tag."""
    pytest.importorskip("xdist")
    import subprocess

    copy_conftest(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    stamp = f"(Path({str(tmp_path)!r}) / name).write_text(str(time.time()))"
    head = "import subprocess, time\nfrom pathlib import Path\nimport pytest\n\n\n"
    (tmp_path / "test_session_end.py").write_text(  # two tests: a worker holds back only its last
        head + "@pytest.mark.session_last\ndef test_first():\n"
        f"    name = 'end_started'; {stamp}\n\n\n"
        "@pytest.mark.session_last\ndef test_last(session_leftovers):\n"
        "    problems = session_leftovers()\n"
        "    assert not problems, '\\n'.join(problems)\n")
    (tmp_path / "test_a_orphan.py").write_text(
        head + "def test_orphans_a_sleeper():\n"
        f"    subprocess.run(['sh', '-c', 'sleep 30 & echo $! > {tmp_path / 'pid'}'],\n"
        "                   check=True)\n")
    (tmp_path / "test_b_slow.py").write_text(  # the worker's end: a slow session teardown
        head + "@pytest.fixture(scope='session')\ndef server():\n    yield\n    time.sleep(2)\n"
        f"    name = 'slow_ended'; {stamp}\n\n\n"
        "def test_slow(server):\n    time.sleep(1)\n")
    env = {**os.environ, "LABKIT_LEAK_GRACE_S": "0.5", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "xdist.plugin", "-n", "2", "--dist", "loadfile", str(tmp_path)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        pid = (tmp_path / "pid").read_text().strip() if (tmp_path / "pid").exists() else None
        if pid:
            try:
                psutil.Process(int(pid)).kill()
            except psutil.Error:
                pass
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed, 3 passed" in out, out
    assert f"pid {pid}" in out and "sleep" in out, out
    ended, started = ((tmp_path / n).read_text() for n in ("slow_ended", "end_started"))
    assert float(started) >= float(ended)
