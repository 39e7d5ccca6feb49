"""Chapter 12's formats: round trips, lazy opening across fork and spawn, the trap, bad input."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import labkit as lk
from labkit.formats.ahead import read_decode_rate
from labkit.formats.moreformats import write_array_record
from labkit.formats.tensorfiles import TensorFiles
from labkit.formats.tfrecords import masked_crc, read_record
from labkit.formats.trap import EagerHdf5Rows, EagerLmdbRows

lmdb = pytest.importorskip("lmdb", reason="lmdb is a dependency of chapter 12")
h5py = pytest.importorskip("h5py", reason="h5py is a dependency of chapter 12")
tfrecord = pytest.importorskip("tfrecord", reason="tfrecord is a dependency of chapter 12")

N, F = 200, 16


def through(ds, method="fork", num_workers=2, batch_size=64):
    """A trap trial's loader: every sample once, shuffled, through workers started with
    ``method``; the timeout turns a worker stuck on an inherited lock into an error."""
    return DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      timeout=30, multiprocessing_context=method)


@pytest.fixture(scope="module")
def rows():
    r = np.random.default_rng(0).standard_normal((N, F), dtype=np.float32)
    r[:, 0] = np.arange(N)  # column 0 is the id, as in the array fixture
    return r


@pytest.fixture(scope="module")
def stored(rows, tmp_path_factory):
    return {f.name: f for f in lk.formats.write_formats(rows, tmp_path_factory.mktemp("formats"),
                                                chunk_rows=16)}


def test_every_format_gives_back_the_source_bytes(rows, stored):
    want = hashlib.sha256(rows.tobytes()).hexdigest()
    assert len(stored) == 8
    for f in stored.values():
        assert lk.formats.read_back(f) == (N, want), f.name
        x, i = f.make()[N - 1]
        assert i == N - 1 and torch.equal(x, torch.from_numpy(rows[N - 1]))


def test_table_measures_every_format(rows, stored):
    def loader_for(ds, num_workers=0, shuffle=False):
        return DataLoader(ds, batch_size=50, shuffle=shuffle, num_workers=num_workers,
                          timeout=60 if num_workers > 0 else 0)

    table = lk.formats.measure_formats(list(stored.values())[:3], loader_for, num_workers=1,
                               repeats=1, warmup=0, max_batches=2, reference=rows)
    text = lk.formats.format_formats(table)
    assert all(r.random[0].samples > 0 and r.random[1].samples > 0 for r in table)
    assert [(r.fork, r.spawn) for r in table] == [("ok", "pickles")] * 3
    assert "LMDB" in text and "object store" in text


@pytest.mark.parametrize("name", ["LMDB", "HDF5 chunked + gzip", "TFRecord + index"])
def test_lazy_readers_pickle_without_their_handle(stored, name):
    ds = stored[name].make()
    ds[0]  # the handle is open in this process now
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._handle is None
    assert torch.equal(clone[3][0], ds[3][0])


@pytest.mark.parametrize("name", ["LMDB", "HDF5 chunked + gzip", "TFRecord + index"])
def test_lazy_readers_after_the_parent_read_work_in_forked_workers(rows, stored, name):
    ds = stored[name].make()
    ds[0]
    out = lk.formats.trap_trial(through(ds, batch_size=32), rows)
    assert (out.outcome, out.delivered, out.wrong) == ("ok", N, 0), out.line()


def test_the_trap_forked_lmdb_environment_fails_here(rows, stored, tmp_path):
    """What py-lmdb 3 does with an environment opened before the fork: an error, not silence.

    (h5py read-only happens to read right here; the chapter states that, not a guarantee.)
    """
    path = shutil.copytree(stored["LMDB"].path, tmp_path / "eager.lmdb")
    out = lk.formats.trap_trial(through(EagerLmdbRows(path)), rows)
    assert out.outcome != "wrong data", out.line()
    eager_h5 = EagerHdf5Rows(stored["HDF5 contiguous"].path)
    hdf5 = lk.formats.trap_trial(through(eager_h5), rows)
    assert hdf5.outcome in ("ok", "error"), hdf5.line()  # never silently wrong here


@pytest.mark.filterwarnings("ignore:Got pickle error:UserWarning")
def test_eager_datasets_cannot_go_to_spawned_workers(rows, stored, tmp_path):
    path = shutil.copytree(stored["LMDB"].path, tmp_path / "eager.lmdb")
    for ds in (EagerLmdbRows(path),
               EagerHdf5Rows(stored["HDF5 contiguous"].path)):
        out = lk.formats.trap_trial(through(ds, "spawn", num_workers=1), rows)
        assert out.outcome == "error" and "pickle" in out.error, out.line()


@pytest.mark.slow
def test_lazy_readers_work_in_spawned_workers(rows, stored):
    for name in ("LMDB", "HDF5 chunked + gzip"):
        out = lk.formats.trap_trial(through(stored[name].make(), "spawn", num_workers=1), rows)
        assert out.outcome == "ok" and out.delivered == N, out.line()


def test_tfrecord_without_an_index_duplicates_across_workers(rows, stored):
    from tfrecord.torch.dataset import TFRecordDataset

    path = str(stored["TFRecord + index"].path)

    def ids(index):
        ds = TFRecordDataset(path, index, {"id": "int"})
        loader = DataLoader(ds, batch_size=32, num_workers=2, timeout=60)
        return torch.cat([b["id"].reshape(-1) for b in loader])

    assert lk.audit(ids(None), N).duplicates == N
    assert lk.audit(ids(path + ".index"), N).ok


# -- bad input: clear errors naming the file and the record ---------------------------------

def _error(fn) -> str:
    with pytest.raises(lk.DataFormatError) as e:
        fn()
    return str(e.value)


def test_truncated_lmdb_is_refused_before_any_read(stored, tmp_path):
    bad = lk.damaged_copy(stored["LMDB"].path, tmp_path / "short.lmdb", "truncate",
                          file="data.mdb")
    msg = _error(lambda: lk.formats.LmdbRows(bad.parent))
    assert str(bad) in msg and "truncated" in msg


def test_missing_lmdb_key_names_the_sample(stored, tmp_path):
    path = shutil.copytree(stored["LMDB"].path, tmp_path / "missing.lmdb")
    size = 2 * (path / "data.mdb").stat().st_size  # the default 10 MiB map may be too small
    with lmdb.open(str(path), map_size=size) as env, env.begin(write=True) as txn:
        txn.delete(b"00000007")
    ds = lk.formats.LmdbRows(path)
    msg = _error(lambda: ds[7])
    assert str(path) in msg and "sample 7" in msg and "00000007" in msg


def test_not_an_lmdb(tmp_path):
    (tmp_path / "x").write_bytes(b"nothing here")
    assert "x" in _error(lambda: lk.formats.LmdbRows(tmp_path / "x"))


def test_truncated_hdf5(stored, tmp_path):
    bad = lk.damaged_copy(stored["HDF5 contiguous"].path, tmp_path / "short.h5", "truncate")
    msg = _error(lambda: lk.formats.Hdf5Rows(bad))
    assert str(bad) in msg and "truncated" in msg


def test_missing_hdf5_dataset(stored):
    msg = _error(lambda: lk.formats.Hdf5Rows(stored["HDF5 contiguous"].path, key="images"))
    assert "'images'" in msg and "rows" in msg


def test_truncated_tfrecord_with_its_old_index(stored, tmp_path):
    src = stored["TFRecord + index"].path
    bad = lk.damaged_copy(src, tmp_path / "short.tfrecord", "truncate", at=0.7)
    shutil.copy(f"{src}.index", f"{bad}.index")
    msg = _error(lambda: lk.formats.TFRecordRows(bad))
    assert str(bad) in msg and "truncated" in msg


def test_truncated_tfrecord_record_named_when_read(stored, tmp_path):
    src = stored["TFRecord + index"].path
    bad = lk.damaged_copy(src, tmp_path / "short.tfrecord", "truncate", at=0.7)
    with open(bad, "rb") as f:
        k, msg = 0, ""
        try:
            while read_record(f, bad, k) is not None:
                k += 1
        except lk.DataFormatError as e:
            msg = str(e)
    assert f"record {k}" in msg and "truncated" in msg and 0 < k < N


def test_tfrecord_bad_crc_names_the_record(rows, stored, tmp_path):
    src = stored["TFRecord + index"].path
    offsets = np.loadtxt(f"{src}.index", dtype=np.int64)[:, 0]
    k = N // 2
    bad = lk.damaged_copy(src, tmp_path / "flip.tfrecord", "flip", length=4,
                          at=(offsets[k] + 40) / src.stat().st_size)
    shutil.copy(f"{src}.index", f"{bad}.index")
    ds = lk.formats.TFRecordRows(bad)
    assert torch.equal(ds[k - 1][0], torch.from_numpy(rows[k - 1]))
    msg = _error(lambda: ds[k])
    assert str(bad) in msg and f"record {k}" in msg and "CRC" in msg


def test_tfrecord_missing_index(stored, tmp_path):
    path = shutil.copy(stored["TFRecord + index"].path, tmp_path / "noindex.tfrecord")
    assert "no index" in _error(lambda: lk.formats.TFRecordRows(path))


def test_masked_crc_matches_the_tfrecord_writer():
    from tfrecord import TFRecordWriter

    assert masked_crc(b"abc").to_bytes(4, "little") == TFRecordWriter.masked_crc(b"abc")


def test_missing_tensor_file(stored, tmp_path):
    folder = shutil.copytree(stored["torch.save per sample"].path, tmp_path / "pt")
    ds = TensorFiles(folder)
    (folder / "0000005.pt").unlink()
    assert "sample 5" in _error(lambda: ds[5])


# -- preprocessing ahead -----------------------------------------------------------------------

def test_break_even_is_where_the_rates_meet():
    jpeg, raw = (1000.0, 1000.0), (100000.0, 12000.0)
    bw = lk.formats.break_even(jpeg, raw)
    a = read_decode_rate(*jpeg, bw)
    b = read_decode_rate(*raw, bw)
    assert a == pytest.approx(b)
    assert lk.formats.break_even(jpeg, (10.0, 2000.0)) is None  # slower and bigger: never wins


ORIG, RESIZED, RAW = "original JPEG", "JPEG resized ahead", "raw uint8 ahead"


def _break_even_model(**kw):
    # measured at 64 px: decode rates and bytes per sample, as the chapter's cell gives them
    return lk.formats.BreakEven({ORIG: (800.0, 40_000.0), RESIZED: (3000.0, 3_000.0),
                         RAW: (50_000.0, 3 * 64 * 64 + 128)}, 64, fixed=[ORIG], **kw)


def test_break_even_model_moves_with_size_and_disk_speed():
    m = _break_even_model()
    assert m.disk_bytes_per_s == lk.formats.BreakEven.default_disk_bytes_per_s  # none measured
    assert m.choices() == m.measured  # at the measured size, nothing is rescaled
    m.set(size=128)
    ch = m.choices()
    assert ch[ORIG] == m.measured[ORIG]  # the originals cost the same at every size
    assert ch[RAW] == (pytest.approx(50_000.0 / 4), pytest.approx(4 * (3 * 64 * 64 + 128)))
    assert ch[RESIZED] == (pytest.approx(750.0), pytest.approx(12_000.0))
    # the winner flips across the resized-vs-raw break-even, and the rates meet there
    bw = m.break_evens()[(RESIZED, RAW)]
    assert bw is not None
    m.set(disk_mb_per_s=bw / 1e6)
    rates = m.rates()
    assert rates[RESIZED] == pytest.approx(rates[RAW])
    assert m.set(disk_mb_per_s=bw / 1e6 / 10).best() != RAW
    assert m.set(disk_mb_per_s=bw / 1e6 * 10).best() == RAW
    assert f"{m.size} px" in m.summary() and "best raw uint8 ahead" in m.summary()


def test_break_even_model_refuses_nonsense():
    with pytest.raises(ValueError, match="disk_mb_per_s=0"):
        _break_even_model().set(disk_mb_per_s=0)
    with pytest.raises(ValueError, match="size=-8"):
        _break_even_model().set(size=-8)
    with pytest.raises(ValueError, match="fixed=\\['nope'\\]"):
        lk.formats.BreakEven({RAW: (1.0, 1.0)}, 64, fixed=["nope"])
    with pytest.raises(ValueError, match="choice 'raw uint8 ahead'"):
        lk.formats.BreakEven({RAW: (0.0, 1.0)}, 64)


def test_break_even_widget_wires_sliders_to_the_model_without_a_browser():
    pytest.importorskip("ipywidgets")
    m = _break_even_model(disk_bytes_per_s=2e9)
    w = lk.formats.BreakEvenWidget(m)
    assert w.disk.value == pytest.approx(2000.0) and w.size.value == 64
    first = w.plot.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    w.size.value = 128                      # the learner drags the size slider
    assert m.size == 128 and w.plot.value != first and "128 px" in w.text.value
    w.disk.value = 50.0                     # and the disk slider
    assert m.disk_bytes_per_s == pytest.approx(50e6)
    m.set(size=100, disk_mb_per_s=300)      # moved from code: the sliders follow
    assert w.size.value == 100 and w.disk.value == pytest.approx(300.0)
    assert "300 MB/s" in w.text.value


def test_resize_and_raw_ahead_agree(ci_fixture, tmp_path):
    images = ci_fixture("images")
    size = images.meta["size"] // 2
    resized = lk.ImageFolderDataset(lk.formats.resize_ahead(images, tmp_path / "r", size))
    raw = lk.MemmapRows(lk.formats.raw_ahead(images, tmp_path / "raw.npy", size))
    orig = lk.ImageFolderDataset(images, transform=lk.formats.ResizeTo(size))
    assert len(resized) == len(raw) == len(orig) == images.samples
    assert raw[3][0].shape == resized[3]["image"].shape == (3, size, size)
    assert torch.equal(raw[3][0], orig[3]["image"])
    # a re-encoded JPEG of noisy pixels is lossy per pixel; its mean brightness stays
    assert abs(resized[3]["image"].float().mean() - raw[3][0].float().mean()) < 8


def test_bench_formats_is_registered_and_reports_its_ratio(ci_fixture):
    from labkit.tools.bench import BENCHMARKS

    ci_fixture("array")
    assert "formats" in BENCHMARKS
    out = lk.tools.run_benchmark("formats", scale="ci", rows=256, trials=1, num_workers=1)
    assert out["rows"] == 256 and out["lmdb_vs_memmap"] > 0
    assert isinstance(out["goal_met"], bool) and out["hdf5_chunked_vs_contiguous"] > 0


# -- tf.data, the optional extra ---------------------------------------------------------------

_TF_OK, _TF_WHY = lk.status("tfdata")


def test_tfdata_status_says_why_when_tensorflow_is_absent():
    if _TF_OK:
        assert _TF_WHY.startswith("tensorflow ") and "unknown" not in _TF_WHY
    else:
        assert "not installed" in _TF_WHY and "labkit[tfdata]" in _TF_WHY
        with pytest.raises(RuntimeError, match="not installed"):
            lk.formats.tfdata_measure("nothing.tfrecord")


@pytest.mark.slow
@pytest.mark.skipif(not _TF_OK, reason=_TF_WHY)
def test_tfdata_reads_every_record_once_with_the_same_bytes(rows, stored, tmp_path,
                                                           monkeypatch):
    # with bytecode written (a learner's default), nothing stays in the temp folder: AutoGraph
    # imports the code it generates from there, and Python would leave a __pycache__ beside it
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    out = lk.formats.tfdata_measure(stored["TFRecord + index"].path, passes=1, warmup=0, shuffle=64)
    assert (out.samples, out.unique) == (N, N)
    assert out.sha256 == hashlib.sha256(rows.tobytes()).hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_one_tensor_files_read_back_fork_and_pickle(rows, tmp_path):
    fmts, note = lk.formats.write_tensor_formats(rows, tmp_path / "one")
    names = [f.name for f in fmts]
    assert names[0] == "torch.load(mmap=True)"
    assert ("safetensors" in names) == (note == ""), note
    want = hashlib.sha256(rows.tobytes()).hexdigest()
    for f in fmts:
        assert lk.formats.read_back(f) == (N, want), f.name
        ds = f.make()
        ds[0]  # the parent reads first
        assert lk.formats.trap_trial(through(ds), rows).outcome == "ok", f.name
        assert pickle.loads(pickle.dumps(ds)).path == ds.path


def test_one_tensor_files_refuse_a_bad_file(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a tensor file")
    with pytest.raises(lk.DataFormatError, match="bad.pt"):
        lk.formats.TorchMmapRows(bad)
    pytest.importorskip("safetensors")
    with pytest.raises(lk.DataFormatError, match="bad.pt"):
        lk.formats.SafetensorsRows(bad)


def test_hdf5_rows_hold_the_dataset_and_take_a_chunk_cache(rows, tmp_path):
    p = tmp_path / "c.h5"
    lk.formats.write_hdf5(p, rows, chunk_rows=16, compression="gzip")
    ds = lk.formats.Hdf5Rows(p, rdcc_nbytes=4096)
    ds[3]
    assert ds.handle.id.get_access_plist().get_chunk_cache()[1] == 4096
    assert ds.handle is ds.handle  # one open dataset per process, its cache kept


def test_lmdb_lock_is_one_choice_per_file_per_process(rows, tmp_path):
    p = tmp_path / "l.lmdb"
    lk.formats.write_lmdb(p, rows)
    lk.formats.LmdbRows(p, lock=True)[0]
    with pytest.raises(ValueError, match="lock"):
        lk.formats.LmdbRows(p)
    eager = EagerLmdbRows(shutil.copytree(p, tmp_path / "e.lmdb"), lock=False)
    assert eager.env.flags()["lock"] is False


def _no_readers(env) -> bool:
    return env.readers().strip().splitlines()[1:] == []   # the header line only


def test_lmdb_lock_true_parent_reads_on_after_forked_workers_close_its_copy(rows, tmp_path):
    """open_env closes an inherited environment in each forked worker, then opens its own.
    With lock=True that is safe because the parent holds no reader slot at the fork."""
    p = tmp_path / "parent.lmdb"
    lk.formats.write_lmdb(p, rows)
    ds = lk.formats.LmdbRows(p, lock=True)
    ds[0]
    assert _no_readers(ds.handle)   # nothing cached, nothing held open across the fork
    out = lk.formats.trap_trial(through(ds), rows)
    assert (out.outcome, out.delivered, out.wrong) == ("ok", N, 0), out.line()
    for i in (1, 2, 3):   # the parent reads on through the environment its workers closed
        assert torch.equal(ds[i][0], torch.from_numpy(rows[i]))


def test_why_open_env_caches_no_lmdb_transaction(rows, tmp_path):
    """The hazard open_env avoids: a read transaction cached at the fork keeps the parent's
    reader slot; the child's close aborts it and frees that slot in the shared lock.mdb, so
    the parent's next read fails (py-lmdb 3.0, LMDB 0.9.36)."""
    p = tmp_path / "spare.lmdb"
    lk.formats.write_lmdb(p, rows)
    env = lmdb.open(str(p), readonly=True, lock=True, max_spare_txns=1)
    with env.begin() as txn:
        txn.get(b"00000000")
    del txn   # the transaction goes back to py-lmdb's cache, keeping its slot
    if _no_readers(env):
        env.close()
        pytest.skip(f"py-lmdb {lmdb.__version__} caches no read transaction")
    pid = os.fork()
    if pid == 0:   # the child: close the inherited environment, as open_env does
        code = 1
        try:
            env.close()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert _no_readers(env)   # the parent's slot is gone
    with pytest.raises(lmdb.BadRslotError):
        env.begin()
    with env.begin() as txn:   # the failed renew dropped the cached one; a new one works
        assert txn.get(b"00000001") is not None
    env.close()


# -- Lance and ArrayRecord, the optional moreformats extra -------------------------------------

_LANCE_OK, _LANCE_WHY = lk.status("lance")
_AR_OK, _AR_WHY = lk.status("array_record")


def _in_a_fresh_process(body: str) -> None:
    """Run ``body`` in its own Python: lance, once imported, makes every later fork of this
    pytest process unsafe (labkit/formats/moreformats.py's "lance" check says why)."""
    code = ("import hashlib, pickle, numpy as np, labkit as lk\n"
            "from labkit.formats.moreformats import write_lance\n"
            f"N, F = {N}, {F}\n"
            "rows = np.random.default_rng(0).standard_normal((N, F), dtype=np.float32)\n"
            "rows[:, 0] = np.arange(N)\n" + textwrap.dedent(body))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_more_formats_are_written_where_installed_and_say_why_where_not(tmp_path):
    _in_a_fresh_process(f"""
        fmts, notes = lk.formats.write_more_formats(rows, {str(tmp_path / "more")!r})
        names = [f.name for f in fmts]
        assert ("Lance" in names) == {_LANCE_OK} and ("ArrayRecord" in names) == {_AR_OK}
        assert len(notes) == 2 - len(fmts)
        for note in notes:
            assert note.split(":")[0] in ("Lance not run", "ArrayRecord not run")
            assert 'pip install -e ".[moreformats]"' in note
        want = hashlib.sha256(rows.tobytes()).hexdigest()
        for f in fmts:
            assert lk.formats.read_back(f) == (N, want), f.name
            assert pickle.loads(pickle.dumps(f.make())).path == f.path
        """)


@pytest.mark.skipif(not _LANCE_OK, reason=_LANCE_WHY)
def test_lance_rows_by_position_and_a_bad_dataset(tmp_path):
    _in_a_fresh_process(f"""
        import pytest
        p = {str(tmp_path / "r.lance")!r}
        write_lance(p, rows)
        x, i = lk.formats.LanceRows(p)[17]
        assert i == 17 and np.array_equal(x.numpy(), rows[17])
        bad = {str(tmp_path / "not.lance")!r}
        __import__("os").mkdir(bad)
        with pytest.raises(lk.DataFormatError, match="not.lance"):
            lk.formats.LanceRows(bad)
        """)


@pytest.mark.skipif(not _AR_OK, reason=_AR_WHY)
def test_array_record_rows_fork_and_refuse_a_damaged_file(rows, tmp_path):
    p = tmp_path / "r.array_record"
    write_array_record(p, rows)
    ds = lk.formats.ArrayRecordRows(p)
    ds[0]  # the parent reads first
    trial = lk.formats.trap_trial(through(ds), rows)
    assert trial.outcome == "ok", trial  # once "error" beside a loaded machine: its message
    short = lk.damaged_copy(p, tmp_path / "short.array_record", "truncate")
    with pytest.raises(lk.DataFormatError, match="short.array_record"):
        lk.formats.ArrayRecordRows(short)
