"""The loopback S3 store and its fault layer (chapter 14).

The stream over the bucket is typed in chapters 14 and 14b; their checked cells pin it,
its bad objects included (14 section 4: truncated, missing, not a tar; 14b: wrong
credentials, a missing key, 503 SlowDown past the retries). Here: what stays in labkit, the
store, its fault layer's answers (which name the object) and its filling.
"""

from __future__ import annotations

import io
import tarfile

import boto3
import fsspec
import numpy as np
import psutil
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import labkit as lk
from labkit.remote.stores import s3_error_xml

ROWS = np.hstack([np.arange(96, dtype=np.float32)[:, None],
                  np.random.default_rng(0).random((96, 15), dtype=np.float32)])


@pytest.fixture(scope="module")
def store():
    with lk.remote.serve(s3=True) as s:
        yield s


@pytest.fixture(scope="module")
def shards(store):
    return store.put_tar_shards("unit", ROWS, shard_bytes=8 * 1024)


def client(store, attempts=5, key="labkit", read_timeout=10.0):
    cfg = Config(retries={"mode": "standard", "total_max_attempts": attempts},
                 read_timeout=read_timeout, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=store.endpoint_url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key="labkit-secret",
                        config=cfg)


def requests_for(store, path, since):
    return sum(1 for r in store.log[since:] if r.path == path)


def test_store_binds_loopback_and_stops_without_leftovers():
    with lk.remote.serve(s3=True) as s:
        pid, port = s.pid, int(s.direct_url.rsplit(":", 1)[1])
        proc = psutil.Process(pid)
        listening = [c.laddr for c in proc.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" for a in listening)
        assert s.endpoint_url.startswith("http://127.0.0.1:")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    taken = {c.laddr.port for c in psutil.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN}
    assert port not in taken and s.port not in taken


def test_tar_shards_hold_every_row_once_intact(store, shards):
    assert len(shards.keys) > 4 and sum(shards.counts) == len(ROWS)
    s3, got = store.client(), []
    for key, nbytes, count in zip(shards.keys, shards.nbytes, shards.counts, strict=True):
        body = s3.get_object(Bucket="unit", Key=key)["Body"].read()
        assert len(body) == nbytes
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            members = [(int(m.name[:8]), tar.extractfile(m).read()) for m in tar]
        assert len(members) == count
        got += members
    assert [i for i, _ in got] == list(range(len(ROWS)))
    assert np.array_equal(np.stack([np.frombuffer(b, np.float32) for _, b in got]), ROWS)
    assert store.put_tar_shards("unit-again", ROWS, 8 * 1024).nbytes == shards.nbytes


def test_a_503_past_the_retries_names_the_object(store, shards):
    key = shards.keys[0]
    store.configure(faults=[lk.Fault("status", path=f"unit/{key}", method="GET", code=503)])
    try:
        n0 = len(store.log)
        with pytest.raises(ClientError) as e:
            client(store, attempts=2).get_object(Bucket="unit", Key=key)
    finally:
        store.configure(faults=[])
    err = e.value.response["Error"]
    assert (err["Code"], err["BucketName"], err["Key"]) == ("SlowDown", "unit", key)
    assert requests_for(store, f"unit/{key}", n0) == 2   # total_max_attempts counts the first
    assert "<Key>k</Key>" in s3_error_xml("SlowDown", "b/k").decode()


def test_faults_once_are_retried_by_botocore_and_the_body_is_whole(store, shards):
    k = shards.keys
    store.configure(faults=[
        lk.Fault("status", path=f"unit/{k[0]}", method="GET", code=500, nth=1),
        lk.Fault("stall", path=f"unit/{k[1]}", method="GET", stall_s=2.0, nth=1)])
    try:
        s3 = client(store, read_timeout=0.5)
        for key, nbytes in zip(k[:2], shards.nbytes[:2], strict=True):
            resp = s3.get_object(Bucket="unit", Key=key)
            assert resp["ResponseMetadata"]["RetryAttempts"] == 1
            assert len(resp["Body"].read()) == nbytes
    finally:
        store.configure(faults=[])


def test_a_reset_mid_object_cuts_the_body_short(store, shards):
    key = shards.keys[2]
    store.configure(faults=[lk.Fault("drop", path=f"unit/{key}", method="GET",
                                     after_bytes=1000, nth=1)])
    try:
        resp = client(store).get_object(Bucket="unit", Key=key)
        try:
            short = len(resp["Body"].read()) < resp["ContentLength"]
        except Exception:   # noqa: BLE001 - botocore and urllib3 word it by version
            short = True
        assert short
        assert len(client(store).get_object(Bucket="unit", Key=key)["Body"].read()) \
            == shards.nbytes[2]
    finally:
        store.configure(faults=[])


def test_a_missing_key_and_wrong_credentials_name_the_object(store, shards):
    with pytest.raises(ClientError) as e:
        store.client().get_object(Bucket="unit", Key="gone.tar")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    assert e.value.response["Error"]["Key"] == "gone.tar"
    with pytest.raises(ClientError) as e:
        client(store, key="wrong").get_object(Bucket="unit", Key=shards.keys[0])
    err = e.value.response["Error"]
    assert (err["Code"], err["Key"]) == ("InvalidAccessKeyId", shards.keys[0])


def test_settings_change_and_bad_ones_are_refused(store):
    store.configure(latency_s=0.01, bandwidth=5e6)
    try:
        assert store.settings() == {"latency_ms": 10.0, "bandwidth_MB_per_s": 5.0,
                                    "faults": []}
        with pytest.raises(ValueError, match="latency_s"):
            store.configure(latency_s=-1)
        with pytest.raises(ValueError, match="bandwidth"):
            store.configure(bandwidth=0)
    finally:
        store.configure(latency_s=0.0, bandwidth=None)


def test_clients_read_the_same_bytes(store, shards):
    """boto3, s3fs (fsspec) and pyarrow's own S3 client see the same object."""
    key = shards.keys[0]
    ref = store.client().get_object(Bucket="unit", Key=key)["Body"].read()
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **store.storage_options())
    assert fs.cat(f"unit/{key}") == ref
    with store.arrow_filesystem().open_input_stream(f"unit/{key}") as f:
        assert f.read() == ref
