"""explorer._src.units.format_bytes and format_seconds, against values worked out by hand (1 KiB =
1024 B)."""

import pytest

from explorer._src.units import format_bytes, format_seconds, time_unit


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


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "?"), (0, "0 s"), (2.5, "2.5 s"), (0.00137, "1.37 ms"), (27e-6, "27 µs"),
    (4.2e-9, "4.2 ns"), (1.0, "1 s"), (1e-3, "1 ms"), (999.7e-6, "1 ms"), (999.4e-6, "999 µs")])
def test_a_time_is_written_in_the_unit_that_keeps_it_at_or_above_one(seconds, text):
    assert format_seconds(seconds) == text


def test_an_axis_of_times_takes_the_unit_of_its_largest():
    assert time_unit(40e-6) == (1e-6, "µs") and time_unit(0.5) == (1e-3, "ms")
    assert time_unit(3.0) == (1.0, "s") and time_unit(1e-12) == (1e-9, "ns")
