"""Chapter 06's scale-dependent shard picks hold at every scale, not only at ci.

Solution 1 of chapter 06 reads two of section 2's largest shards with 4 workers (so 2 are
idle) against the largest shard size that makes at least 4 shards. Section 2 re-shards the
'wds' fixture with ShardWriter(maxcount=n) for each n in the ``shard_samples`` knob, so each
set has ceil(samples / n) shards. At workshop scale the largest size already makes 4 shards
(an earlier version of the solution took the whole set and failed there, not at ci).
"""

from __future__ import annotations

import math

import pytest

from labkit.data.fixtures import load_specs, resolve_spec
from labkit.scale import SCALES, knob


@pytest.mark.parametrize("scale", SCALES)
def test_solution_1_has_idle_workers_and_a_set_that_fills_four(scale):
    samples = resolve_spec(load_specs()["wds"], scale)["samples"]
    sets = {n: math.ceil(samples / n) for n in knob("shard_samples", scale)}   # n -> shards
    few = min(sets[max(sets)], 2)              # the solution's sets[max(sets)][:2]
    enough = next((k for _, k in sorted(sets.items(), reverse=True) if k >= 4), None)
    assert few == 2, f"{scale}: the largest size makes {sets[max(sets)]} shard(s), not 2+"
    assert enough is not None, f"{scale}: no shard size makes 4 shards: {sets}"
    assert few < 4 <= enough                  # 2 idle of 4 workers; distinct run names
