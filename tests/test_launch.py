"""lk.remote.torchrun (chapter 04): real ranks x workers, audited; the hang ends; nothing left."""

from __future__ import annotations

import pytest

from labkit.errors import LabkitError
from labkit.instruments.audits import audit
from labkit.remote.launch import free_port, torchrun


@pytest.fixture(scope="module")
def sharding(ci_fixture):
    ci_fixture("array")
    ci_fixture("array_shards")
    return torchrun("sharding", nproc=2, scale="ci", num_workers=2, batch_size=256, timeout=300)


def test_rank_x_worker_exactly_once_and_the_mistake(sharding, ci_fixture):
    n = ci_fixture("array_shards").samples
    assert sharding.ok and [r["rank"] for r in sharding.ranks] == [0, 1]
    good = audit(sharding.deliveries("rank_worker"), n)
    assert good.ok and len(good.per_source) == 4
    assert audit(sharding.deliveries("worker"), n).duplicates == n


def test_sampler_epochs_and_set_epoch(sharding, ci_fixture):
    n = ci_fixture("array").samples
    for key in ("sampler_set_epoch", "sampler_no_set_epoch"):
        for e in range(2):
            assert audit([(f"rank{r['rank']}", r[key][e]) for r in sharding.ranks], n).ok
    assert all(r["sampler_no_set_epoch"][0] == r["sampler_no_set_epoch"][1]
               for r in sharding.ranks)
    assert all(r["sampler_set_epoch"][0] != r["sampler_set_epoch"][1] for r in sharding.ranks)


def test_uneven_policies_take_equal_steps(sharding):
    for policy in ("drop", "pad"):
        steps = {r[f"uneven_{policy}"]["steps"] for r in sharding.ranks}
        assert len(steps) == 1 and all(r[f"uneven_{policy}"]["error"] is None
                                       for r in sharding.ranks)
    a = audit(sharding.deliveries("uneven_pad"), range(3 * 1024))
    assert a.missing == 0 and a.duplicates > 0


def test_the_hang_ends_at_the_process_group_timeout(ci_fixture, own_tmp):
    ci_fixture("array_shards")
    hang = torchrun("hang", nproc=2, scale="ci", num_workers=1, batch_size=256,
                    pg_timeout_s=2, timeout=120)
    # torchrun's logs went to the launch's folder (--log-dir), not a torchelastic_* here
    assert own_tmp.left() == []
    errors = [r["uneven_none"]["error"] or r["barrier_error"] for r in hang.ranks]
    assert all(errors)  # every rank stopped: a timeout, or its peer's exit after one
    assert any("Timed out" in e for e in errors)
    assert hang.ranks[0]["uneven_none"]["steps"] == hang.ranks[1]["uneven_none"]["my_batches"]


def test_wall_clock_timeout_kills_everything(ci_fixture, own_tmp):
    ci_fixture("array_shards")
    r = torchrun("sharding", nproc=2, scale="ci", num_workers=2, batch_size=64, timeout=1)
    assert r.timed_out and not r.ok
    # the ranks run in sessions of their own: killing torchrun's group alone left them
    # running, and the launch waited for them (260 s once); a hang guard, not a speed claim
    assert r.wall_s < 60, f"the launch returned {r.wall_s:.0f} s after a 1 s timeout"
    assert own_tmp.left() == []


def test_unknown_job_reports_the_traceback(ci_fixture):
    ci_fixture("array_shards")
    with pytest.raises(LabkitError, match="unknown job 'nope'"):
        torchrun("nope", nproc=1, scale="ci", timeout=120)


def test_free_port():
    assert 0 < free_port() < 65536
