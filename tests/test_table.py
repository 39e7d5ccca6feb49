"""The one text-table renderer (labkit/records/table.py) behind every table labkit prints."""

import pytest

from labkit.records.table import text_table


def test_columns_fit_their_widest_cell_and_numbers_follow_the_spec():
    text = text_table({"loader": "<", "samples/s": ">,.0f", "share": ">.1%"},
                      [["map", 1234.5, 0.5], ["iterable, 2 workers", 98765.0, None]], rule=True)
    assert text.splitlines() == ["loader               samples/s  share",
                                 "-------------------------------------",
                                 "map                      1,234  50.0%",
                                 "iterable, 2 workers     98,765"]


def test_least_width_short_rows_and_no_heading():
    text = text_table({"name": "<6", "n": ">", "note": "<"},
                      [["a", 1, "ok"], ["b", "skipped: not installed"]], header=False, sep=" ")
    assert text.splitlines() == ["a      1 ok", "b      skipped: not installed"]
    with pytest.raises(ValueError, match="3 cells for 2 columns"):
        text_table({"a": "<", "b": "<"}, [[1, 2, 3]])
