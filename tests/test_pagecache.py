"""Page-cache eviction and the residency probe (chapter 02)."""

import numpy as np
import pytest
from torch.utils.data import DataLoader

import labkit as lk
from labkit.instruments.pagecache import evict_page_cache, measure_cold


def test_evict_then_read_back(tmp_path):
    path = tmp_path / "data.raw"
    np.arange(1 << 18, dtype=np.float32).tofile(path)  # 1 MiB, just written: in the cache
    assert evict_page_cache(path, dry_run=True) > 0.9
    left = evict_page_cache(path, check=False)
    if left > 0.05:
        pytest.skip(f"this filesystem keeps pages after DONTNEED ({left:.0%}), e.g. tmpfs")
    assert evict_page_cache(path, dry_run=True) == left
    path.read_bytes()
    assert evict_page_cache(path, dry_run=True) > 0.9


def test_a_folder_and_an_empty_file(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10000)
    (tmp_path / "empty").write_bytes(b"")
    assert 0 <= evict_page_cache(tmp_path, dry_run=True) <= 1
    assert evict_page_cache(tmp_path / "empty", dry_run=True) == 0.0


def test_eviction_warns_when_pages_stay(tmp_path):
    path = tmp_path / "held.raw"
    np.zeros(1 << 18, np.float32).tofile(path)
    held = np.memmap(path, dtype=np.float32, mode="r")
    held.sum()  # every page mapped and touched: DONTNEED cannot drop mapped pages
    with pytest.warns(UserWarning, match="eviction incomplete"):
        evict_page_cache(path)
    del held


def test_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        evict_page_cache(tmp_path / "nope")


def test_measure_cold_evicts_before_every_pass(ci_fixture):
    from labkit.data.datasets import MemmapBatches

    fx = ci_fixture("array")
    npy = fx.file("array.npy")
    m = measure_cold(lambda: DataLoader(MemmapBatches(fx, 512), batch_size=None), npy,
                     repeats=2, name="cold slices")
    assert len(m.passes) == 2 and m.samples == fx.samples
    assert m.config["cache"] == "cold" and 0 <= m.config["resident_after_eviction"] <= 1
    assert lk.plot_throughput([m], gb_per_s=True).axes[1].get_xlabel().startswith("GB/s")
