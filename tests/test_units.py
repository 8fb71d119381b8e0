"""explorer.units.format_bytes, against values worked out by hand (1 KiB = 1024 B)."""

import pytest

from explorer.units import format_bytes


@pytest.mark.parametrize(("n", "text"), [
    (None, "n/a"),
    (0, "0 B"),
    (512, "512 B"),
    (1023, "1023 B"),
    (1024, "1.0 KiB"),
    (1536, "1.5 KiB"),
    (16 * 2**20, "16.0 MiB"),
    (84_942_979_072, "79.1 GiB"),      # an H100's usable HBM: 84,942,979,072 / 2**30 = 79.11
    (3 * 2**40, "3.0 TiB"),
    (5 * 2**50, "5120.0 TiB"),         # no larger unit: a PiB is written in TiB
    (-2048, "-2.0 KiB"),               # a difference between two figures
])
def test_bytes_are_written_in_1024_based_units(n, text):
    assert format_bytes(n) == text
