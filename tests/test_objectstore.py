"""The loopback S3 store, its fault layer and the shard stream (chapter 14)."""

from __future__ import annotations

import numpy as np
import psutil
import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit.errors import DataFormatError
from labkit.objstore.s3proxy import s3_error_xml
from labkit.objstore.s3shards import (
    S3ShardStream,
    ShardCache,
    shard_bytes_for,
    shard_efficiency,
    write_s3_shards,
)

ROWS = np.hstack([np.arange(96, dtype=np.float32)[:, None],
                  np.random.default_rng(0).random((96, 15), dtype=np.float32)])


@pytest.fixture(scope="module")
def store():
    with lk.objstore.s3_store() as s:
        yield s


@pytest.fixture(scope="module")
def shards(store):
    return write_s3_shards(ROWS, store, "unit", shard_bytes=8 * 1024)


def ids_of(stream) -> list[int]:
    return [int(i) for _, i in stream]


def test_store_binds_loopback_and_stops_without_leftovers():
    with lk.objstore.s3_store() as s:
        pid, port = s.pid, int(s.direct_url.rsplit(":", 1)[1])
        proc = psutil.Process(pid)
        listening = [c.laddr for c in proc.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" for a in listening)
        assert s.endpoint_url.startswith("http://127.0.0.1:")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    taken = {c.laddr.port for c in psutil.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN}
    assert port not in taken and s.proxy.port not in taken


def test_every_sample_once_in_order_and_rows_intact(store, shards):
    got = list(S3ShardStream(store.endpoint_url, shards))
    assert [int(i) for _, i in got] == list(range(len(ROWS)))
    assert np.array_equal(np.stack([r.numpy() for r, _ in got]), ROWS)
    assert len(shards.keys) > 4 and shards.samples == len(ROWS)


@pytest.mark.parametrize("in_flight", [1, 4])
def test_workers_and_in_flight_split_exactly_once(store, shards, in_flight):
    ds = S3ShardStream(store.endpoint_url, shards, in_flight=in_flight, seed=3)
    loader = DataLoader(ds, batch_size=8, num_workers=2, timeout=60)
    a = lk.audit([("w", ids) for _, ids in loader], len(ROWS))
    assert a.ok, a.table()


def test_resume_mid_epoch_is_exact(store, shards):
    full = ids_of(S3ShardStream(store.endpoint_url, shards, seed=1, buffer_size=16))
    ds = S3ShardStream(store.endpoint_url, shards, seed=1, buffer_size=16)
    it = iter(ds)
    head = [int(next(it)[1]) for _ in range(37)]
    state = ds.state_dict()
    again = S3ShardStream(store.endpoint_url, shards, seed=1, buffer_size=16)
    again.load_state_dict(state)
    assert head + ids_of(again) == full


def test_faults_are_retried_and_nothing_is_lost(store, shards):
    k = shards.keys
    faults = [lk.Fault("status", path=f"unit/{k[0]}", method="GET", code=503, nth=(1, 2)),
              lk.Fault("status", path=f"unit/{k[1]}", method="GET", code=500, nth=1),
              lk.Fault("drop", path=f"unit/{k[2]}", method="GET", after_bytes=1000, nth=1),
              lk.Fault("stall", path=f"unit/{k[3]}", method="GET", stall_s=2.0, nth=1)]
    store.configure(faults=faults)
    try:
        ds = S3ShardStream(store.endpoint_url, shards, client={"read_timeout": 0.5})
        a = lk.audit([("main", ids_of(ds))], len(ROWS))
    finally:
        store.configure(faults=[])
    assert a.ok, a.table()
    assert ds.botocore_retries == 4          # 2 x 503, 1 x 500, 1 x read timeout
    assert ds.retried == [k[2]]              # the body cut short: the stream's own retry
    assert "<Key>k</Key>" in s3_error_xml("SlowDown", "b/k").decode()


def test_retries_off_fail_naming_bucket_and_key(store, shards):
    store.configure(faults=[lk.Fault("status", path=f"unit/{shards.keys[0]}", code=503)])
    try:
        ds = S3ShardStream(store.endpoint_url, shards, client={"max_attempts": 1})
        with pytest.raises(OSError, match=f"s3://unit/{shards.keys[0]}: SlowDown"):
            ids_of(ds)
    finally:
        store.configure(faults=[])


def test_missing_key_wrong_credentials_not_a_tar_truncated(store, shards):
    s3 = store.client(direct=True)
    store.make_bucket("bad", s3)
    body = s3.get_object(Bucket="unit", Key=shards.keys[0])["Body"].read()
    s3.put_object(Bucket="bad", Key="short.tar", Body=body[:3000])
    s3.put_object(Bucket="bad", Key="notatar.tar", Body=b"hello, not a tar\n" * 64)
    # cut exactly at a member boundary: tarfile itself stops without an error
    s3.put_object(Bucket="bad", Key="boundary.tar", Body=body[:2048])
    bad = lk.objstore.ShardSet("bad", ("gone.tar",), (1,), (1,))
    with pytest.raises(FileNotFoundError, match="s3://bad/gone.tar: no such key"):
        ids_of(S3ShardStream(store.endpoint_url, bad))
    creds = S3ShardStream(store.endpoint_url, shards, client={"access_key": "wrong"})
    with pytest.raises(PermissionError, match=f"s3://unit/{shards.keys[0]}.*InvalidAccessKeyId"):
        ids_of(creds)
    for key, what in (("short.tar", "truncated|cut short"), ("notatar.tar", "not a tar"),
                      ("boundary.tar", "truncated .no end-of-archive marker")):
        with pytest.raises(DataFormatError, match=f"s3://bad/{key}.*({what})"):
            one = lk.objstore.ShardSet("bad", (key,), (1,), (1,))
            ids_of(S3ShardStream(store.endpoint_url, one))
    first = lk.objstore.ShardSet("unit", shards.keys[:1], (1,), (3,))
    whole = S3ShardStream(store.endpoint_url, first)
    with pytest.raises(DataFormatError, match=f"s3://unit/{shards.keys[0]} holds .* says 3"):
        ids_of(whole)
    mixed = lk.objstore.ShardSet("bad", ("short.tar", "gone.tar", "notatar.tar"), (1, 1, 1),
                                 (1, 1, 1))
    skip = S3ShardStream(store.endpoint_url, mixed, on_error="skip")
    ids_of(skip)
    assert sorted(skip.skipped) == ["gone.tar", "notatar.tar", "short.tar"]


def test_cache_caps_bytes_and_counts_hits(tmp_path, store, shards):
    total = sum(shards.nbytes)
    cache = ShardCache(tmp_path / "c", max_bytes=total // 2)
    ds = S3ShardStream(store.endpoint_url, shards, cache=cache)
    ids_of(ds)
    assert cache.misses == len(shards.keys) and cache.bytes <= total // 2
    cache.reset_stats()
    ids_of(ds)   # a scan bigger than an LRU cache: every shard evicted before its turn
    assert cache.hits == 0 and cache.evictions > 0
    big = ShardCache(tmp_path / "big", max_bytes=2 * total)
    ds = S3ShardStream(store.endpoint_url, shards, cache=big)
    ids_of(ds)
    big.reset_stats()
    before = store.count("GET")
    assert ids_of(ds) == list(range(len(ROWS)))
    assert big.stats()["hit_rate"] == 1.0 and store.count("GET") == before


def test_efficiency_model():
    assert shard_efficiency(1e6, 0.01, 1e8) == pytest.approx(0.5)
    assert shard_bytes_for(0.5, 0.01, 1e8) == pytest.approx(1e6)
    with pytest.raises(ValueError):
        shard_bytes_for(1.0, 0.01, 1e8)


def test_clients_read_the_same_bytes(store, shards):
    """boto3, s3fs (fsspec) and pyarrow's own S3 client see the same object."""
    key = shards.keys[0]
    ref = store.client().get_object(Bucket="unit", Key=key)["Body"].read()
    assert store.filesystem().cat(f"unit/{key}") == ref
    with store.arrow_filesystem().open_input_stream(f"unit/{key}") as f:
        assert f.read() == ref
