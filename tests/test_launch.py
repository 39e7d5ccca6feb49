"""lk.remote.torchrun (chapter 04) on the chapter's own job module (``%%writefile
{WORK}/shard_ranks.py``, 04b writes the same): real ranks x workers, audited; the hang ends;
nothing left."""

from __future__ import annotations

import pytest
from chapter_code import cell_source, chapter_module

from labkit.errors import LabkitError
from labkit.instruments.audits import audit
from labkit.remote.launch import free_port, torchrun

JOB = "shard_ranks"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Chapter 04's job module, on ``sys.path`` here and so in the ranks."""
    return chapter_module("04", f"{JOB}.py", tmp_path_factory.mktemp("ch04")).__name__


@pytest.fixture(scope="module")
def sharding(job, ci_fixture):
    ci_fixture("array")
    ci_fixture("array_shards")
    return torchrun("sharding", module=job, nproc=2, scale="ci", num_workers=2,
                    batch_size=256, timeout=300)


def test_04b_writes_the_same_job():
    assert cell_source("04b", f"{JOB}.py") == cell_source("04", f"{JOB}.py")


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


def test_uneven_shards_drop_and_pad_take_equal_steps_and_the_hang_ends(job, ci_fixture,
                                                                       own_tmp):
    ci_fixture("array_shards")
    run = torchrun("uneven", module=job, nproc=2, scale="ci", num_workers=1, batch_size=256,
                   pg_timeout_s=2, timeout=120)
    # torchrun's logs went to the launch's folder (--log-dir), not a torchelastic_* here
    assert own_tmp.left() == []
    for policy in ("drop", "pad"):
        steps = {r[f"uneven_{policy}"]["steps"] for r in run.ranks}
        assert len(steps) == 1 and all(r[f"uneven_{policy}"]["error"] is None
                                       for r in run.ranks)
    a = audit(run.deliveries("uneven_pad"), range(3 * 1024))
    assert a.missing == 0 and a.duplicates > 0
    assert audit(run.deliveries("uneven_drop"), range(3 * 1024)).duplicates == 0
    # no policy, last: the hang, ended at the short process-group timeout
    errors = [r["uneven_none"]["error"] for r in run.ranks]
    assert all(errors)  # every rank stopped: a timeout, or its peer's exit after one
    assert any("Timed out" in e for e in errors)
    assert run.ranks[0]["uneven_none"]["steps"] == run.ranks[1]["my_batches"]


def test_wall_clock_timeout_kills_everything(job, ci_fixture, own_tmp):
    ci_fixture("array_shards")
    r = torchrun("sharding", module=job, nproc=2, scale="ci", num_workers=2, batch_size=64,
                 timeout=1)
    assert r.timed_out and not r.ok
    # the ranks run in sessions of their own: killing torchrun's group alone left them
    # running, and the launch waited for them (260 s once); a hang guard, not a speed claim
    assert r.wall_s < 60, f"the launch returned {r.wall_s:.0f} s after a 1 s timeout"
    assert own_tmp.left() == []


def test_unknown_job_reports_the_traceback(job, ci_fixture):
    ci_fixture("array_shards")
    with pytest.raises(LabkitError, match=r"(?s)torchrun job 'nope' failed on 1 rank.*"
                                          r"KeyError: 'nope'"):
        torchrun("nope", module=job, nproc=1, scale="ci", timeout=120)


def test_a_module_not_on_the_path_is_named():
    with pytest.raises(LabkitError, match="no module 'no_such_job' on sys.path"):
        torchrun("sharding", module="no_such_job", nproc=1, timeout=120)


def test_free_port():
    assert 0 < free_port() < 65536
