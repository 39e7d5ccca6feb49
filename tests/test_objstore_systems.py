"""MosaicML Streaming, LitData and Ray Data, for real, on the loopback bucket (chapter 14).

``.ci/run`` installs them with ``.ci/install-objstore-systems``. Under ``CI=true`` a system
that does not run fails its test (the install recipe broke); on a developer's machine without
them it is skipped with the reason. The one workaround (a torchvision stand-in while
``import streaming`` runs) has tests that fail when it becomes unnecessary or stops working.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import labkit as lk
from labkit.remote.leftovers import start_ray

ROWS = np.hstack([np.arange(512, dtype=np.float32)[:, None],
                  np.random.default_rng(1).random((512, 31), dtype=np.float32)])
CHECKS = {"MosaicML Streaming": "mosaicml_streaming", "LitData": "litdata",
          "Ray Data": "ray_data"}


def need(name: str) -> None:
    ok, why = lk.status(CHECKS[name])
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} must run in CI: {why}")
        pytest.skip(why)


def ids_of(batches) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]


def epoch_and_resume(make, half: int) -> tuple[list[int], list[int]]:
    """One epoch's ids; then a fresh loader stopped after ``half`` batches, its state given
    to another fresh one: the ids of that interrupted-and-resumed epoch (chapter 14b's run)."""
    ids = ids_of(make(0, None))
    dl = make(1, None)
    it = iter(dl)
    head = [int(i) for _ in range(half) for i in next(it)["id"]]
    state = dl.state_dict()
    for _ in it:   # Mosaic's download threads end while the credentials are set
        pass
    return ids, head + ids_of(make(2, state))


def run_mosaic(store, work):
    from labkit.objstore.systems import import_streaming

    import_streaming()
    from streaming import MDSWriter, StreamingDataLoader, StreamingDataset

    with MDSWriter(out=str(work / "mds"), columns={"id": "int64", "row": "bytes"},
                   size_limit=1 << 20) as w:
        for r in ROWS:
            w.write({"id": int(r[0]), "row": r.tobytes()})
    store.put_files("mosaic", sorted((work / "mds").rglob("*")), prefix="mds", root=work / "mds")
    with store.cleanup("mosaic") as shm:

        def make(n, state):
            ds = StreamingDataset(remote="s3://mosaic/mds", local=str(work / f"cache-{n}"),
                                  shuffle=True, shuffle_seed=7, batch_size=64)
            dl = StreamingDataLoader(shm.track(ds), batch_size=64, num_workers=0)
            if state is not None:
                dl.load_state_dict(state)
            return dl

        return epoch_and_resume(make, 4)


def _litdata_item(row):
    return {"id": int(row[0]), "row": np.asarray(row, dtype=np.float32)}


def run_litdata(store, work):
    import litdata as ld

    out = work / "litdata"
    with store.cleanup("litdata"):
        ld.optimize(fn=_litdata_item, inputs=list(ROWS), output_dir=str(out), chunk_bytes="1MB",
                    num_workers=1, mode="overwrite")
    store.put_files("litdata", sorted(p for p in out.rglob("*") if p.is_file()), prefix="opt",
                    root=out)
    opts = {"endpoint_url": store.endpoint_url, "aws_access_key_id": "labkit",
            "aws_secret_access_key": "labkit-secret", "region_name": "us-east-1"}

    def make(n, state):
        ds = ld.StreamingDataset("s3://litdata/opt", cache_dir=str(work / f"cache-{min(n, 1)}"),
                                 shuffle=True, seed=7, storage_options=opts)
        dl = ld.StreamingDataLoader(ds, batch_size=64, num_workers=0)
        if state is not None:
            dl.load_state_dict(state)
        return dl

    return epoch_and_resume(make, 4)


@pytest.fixture(scope="module")
def store():
    with lk.remote.serve(s3=True) as s:
        yield s


CHILD = """
import importlib.util, sys
try:
    import streaming
    print("PLAIN-IMPORT-WORKS")
except Exception as e:
    print("PLAIN-IMPORT-FAILS", type(e).__name__, e)
for k in [k for k in sys.modules if k.startswith(("streaming", "torchvision"))]:
    del sys.modules[k]
from labkit.objstore.systems import import_streaming
s = import_streaming()
left = [k for k in sys.modules if k.startswith("torchvision")]
print("STAND-IN-WORKS", s.__version__, "LEFT", left, importlib.util.find_spec("torchvision"))
"""


def test_the_torchvision_stand_in_is_still_needed_and_still_works():
    """The workaround's reason: a plain ``import streaming`` fails on torchvision. When
    upstream makes torchvision optional (or a torchvision that imports is installed here),
    this fails: then drop the stand-in (labkit/objstore/systems.py:import_streaming). It also fails
    when the stand-in stops getting ``import streaming`` through, or leaves torchvision in
    ``sys.modules`` (kornia, albumentations and datasets would find it)."""
    need("MosaicML Streaming")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-800:]
    assert "PLAIN-IMPORT-FAILS" in out.stdout and "torchvision" in out.stdout, (
        "`import streaming` works without the stand-in now: remove it "
        f"(labkit/objstore/systems.py:import_streaming)\n{out.stdout[-500:]}")
    assert "STAND-IN-WORKS" in out.stdout and "LEFT [] None" in out.stdout, out.stdout[-500:]


@pytest.mark.parametrize("name", ["MosaicML Streaming", "LitData"])
def test_system_streams_from_the_bucket_exactly_once_and_resumes(name, store, tmp_path,
                                                                 own_tmp, shm_since):
    need(name)
    method = multiprocessing.get_start_method(allow_none=True)
    on_interrupt = signal.getsignal(signal.SIGINT)
    work = tmp_path / "work"
    work.mkdir()
    ids, resumed = (run_mosaic if name == "MosaicML Streaming" else run_litdata)(store, work)
    # litdata.optimize() sets spawn and a SIGINT handler for the whole process; the kit puts
    # both back (its handler would end this process, exit status 0, on the next SIGINT)
    assert multiprocessing.get_start_method(allow_none=True) == method
    assert signal.getsignal(signal.SIGINT) is on_interrupt
    assert sorted(ids) == list(range(len(ROWS))), "not every sample exactly once"
    assert resumed == ids, "the resumed epoch differs from the uninterrupted one"
    assert shm_since.left() == [], "shared memory left behind"
    # Mosaic's two lock files per run, LitData's chunks/ and data/ staging folders
    assert own_tmp.left() == [], "left in the temp folder"


@pytest.mark.slow
def test_ray_data_reads_parquet_from_the_bucket(store):
    need("Ray Data")
    import psutil
    import pyarrow as pa
    import pyarrow.parquet as pq

    store.make_bucket("tables")
    pq.write_table(pa.table({"id": ROWS[:, 0].astype(np.int64), "row": list(ROWS)}),
                   "tables/rows.parquet", filesystem=store.arrow_filesystem())
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with store.cleanup("ray", num_cpus=1) as ray:
        ds = ray.data.read_parquet("s3://tables/rows.parquet",
                                   filesystem=store.arrow_filesystem())
        ids = ids_of(ds.iter_torch_batches(batch_size=64))
    assert sorted(ids) == list(range(len(ROWS)))
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
            and p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"ray left processes behind: {[p.name() for p in left]}"


class _SlowRay:
    """A stand-in for ``ray`` whose first start times out after starting a child process."""

    def __init__(self, failures: int, message: str = "The current node timed out during "
                 "startup. This could happen because ..."):
        self.failures, self.message = failures, message
        self.inits = self.shutdowns = 0
        self.children: list[subprocess.Popen] = []

    def init(self, **kwargs):
        self.inits += 1
        if self.inits <= self.failures:
            self.children.append(subprocess.Popen([sys.executable, "-c",
                                                   "import time; time.sleep(60)"]))
            raise Exception(self.message)  # what Ray raises

    def shutdown(self):
        self.shutdowns += 1


def test_cleanup_names_the_systems_it_knows(store):
    with pytest.raises(ValueError, match="'mosaic', 'litdata' or 'ray'"), \
            store.cleanup("petastorm"):
        pass


def test_a_slow_ray_start_is_stopped_and_tried_once_more():
    ray = _SlowRay(failures=1)
    start_ray(ray, num_cpus=1)
    assert ray.inits == 2 and ray.shutdowns == 1
    assert ray.children[0].wait(timeout=5) is not None   # the failed start's process stopped


def test_a_ray_start_that_keeps_failing_raises_and_leaves_nothing():
    ray = _SlowRay(failures=5)
    with pytest.raises(Exception, match="timed out during startup"):
        start_ray(ray, num_cpus=1)
    assert ray.inits == 2
    assert all(p.wait(timeout=5) is not None for p in ray.children)


def test_another_ray_start_error_is_not_retried():
    ray = _SlowRay(failures=1, message="num_cpus must be positive")
    with pytest.raises(Exception, match="num_cpus"):
        start_ray(ray, num_cpus=1)
    assert ray.inits == 1
    assert ray.children[0].wait(timeout=5) is not None
