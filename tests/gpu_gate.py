"""The one rule for a GPU test that cannot run: skip it, or fail it under ``make test-gpu``.

Its own module (not conftest.py) so tests can import it: ``conftest`` names two files in
this repository (tests/ and notebooks/), and which one an import finds depends on the order
pytest met them in.
"""


def gpu_gate(probe: str, reason: str, cuda: bool, env) -> tuple[str, str]:
    """Skip or fail a GPU test whose probe cannot run. ``make test-gpu`` sets
    ``LABKIT_REQUIRE_GPU=1``: where CUDA is there, a GPU path that cannot run fails, unless
    its probe is in ``LABKIT_GPU_LEAVE_OUT`` (what the machine's wheel bundle cannot bring)."""
    if env.get("LABKIT_REQUIRE_GPU") != "1" or not cuda:
        return "skip", reason
    if probe in env.get("LABKIT_GPU_LEAVE_OUT", "").split(","):
        return "skip", f"left out on this GPU machine (LABKIT_GPU_LEAVE_OUT): {reason}"
    return "fail", f"a CUDA GPU is here, but {probe!r} cannot run: {reason}"
