"""The decoder choice chapter 16's tuning starts from (lk.images.fastest_decoder, chapters 10,
16). The tuning walk, the packed images and their bad-input cases are typed in
notebooks/16_capstone.ipynb, whose checked cells pin them."""

from __future__ import annotations

import labkit as lk
from labkit.images.decode import available_decoders


def test_fastest_decoder(ci_fixture):
    images = ci_fixture("images")
    blobs = lk.images.file_bytes(images.file_list(".jpg")[:8])
    name, rates = lk.images.fastest_decoder(blobs, rounds=1)
    assert set(rates) == set(available_decoders()) and name in rates
    assert rates[name] == max(rates.values())
