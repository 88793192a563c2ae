import pytest

from testbed.units import (UnitError, format_bandwidth, format_percent, format_size, format_time,
                           parse_bandwidth, parse_percent, parse_size, parse_time)


@pytest.mark.parametrize("text, bits", [
    ("10mbit", 10_000_000), ("10Mbit", 10_000_000), ("10 mbit", 10_000_000), ("1.5mbit", 1_500_000),
    ("100kbit", 100_000), ("1gbit", 10**9), ("2tbit", 2 * 10**12), ("64bit", 64), ("1e3kbit", 10**6),
])
def test_parse_bandwidth(text, bits):
    assert parse_bandwidth(text) == bits
    assert isinstance(parse_bandwidth(text), int)


@pytest.mark.parametrize("text", ["10bps", "10kbps", "10mbps", "10Mbps", "1gbps"])
def test_byte_rates_refused_with_hint(text):
    with pytest.raises(UnitError) as err:
        parse_bandwidth(text)
    message = str(err.value)
    assert "BYTES per second" in message and "bit" in message
    assert "write 10" in message or "write 1" in message


def test_bps_hint_suggests_mbit():
    with pytest.raises(UnitError, match=r"write 10mbit .*80mbit if you really meant bytes"):
        parse_bandwidth("10mbps")


@pytest.mark.parametrize("value", ["10", 10, 10.0])
def test_bandwidth_needs_unit(value):
    with pytest.raises(UnitError, match="bandwidth needs a unit, e.g. 10mbit"):
        parse_bandwidth(value)


@pytest.mark.parametrize("value, pattern", [
    ("0mbit", "greater than 0"), ("-5mbit", "greater than 0"), ("1.5bit", "whole number"),
    ("10mb", "unknown bandwidth unit 'mb'"), ("fast", "not a bandwidth"), (True, "number with a unit"),
    (None, "number with a unit"), ([1], "must be a string"),
])
def test_bandwidth_rejects(value, pattern):
    with pytest.raises(UnitError, match=pattern):
        parse_bandwidth(value)


@pytest.mark.parametrize("text, seconds", [
    ("500ms", 0.5), ("10ms", 0.01), ("3s", 3.0), ("10m", 600.0), ("250us", 0.00025), ("0ms", 0.0),
    ("1.5S", 1.5),
])
def test_parse_time(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("value, pattern", [
    ("5", "time needs a unit"), (5, "time needs a unit"), ("-1ms", "negative"),
    ("5h", "unknown time unit 'h'"), ("5min", "unknown time unit"),
])
def test_time_rejects(value, pattern):
    with pytest.raises(UnitError, match=pattern):
        parse_time(value)


@pytest.mark.parametrize("text, size", [
    ("512mb", 512 * 10**6), ("1gib", 2**30), ("64KiB", 64 * 1024), ("100b", 100), ("1.5gb", 15 * 10**8),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("value, pattern", [
    ("512", "size needs a unit"), ("0mb", "greater than 0"), ("512mbit", "unknown size unit"),
    ("0.5b", "whole number"),
])
def test_size_rejects(value, pattern):
    with pytest.raises(UnitError, match=pattern):
        parse_size(value)


def test_percent():
    assert parse_percent("0.5%") == 0.5
    assert parse_percent("10 %") == 10.0
    for bad, pattern in [(0.5, r"needs a % sign, e\.g\. 0\.5%"), ("101%", "between 0% and 100%"),
                         ("5ms", "must end in %"), ("-1%", "between")]:
        with pytest.raises(UnitError, match=pattern):
            parse_percent(bad)


@pytest.mark.parametrize("bits, text", [
    (10_000_000, "10mbit"), (1_500_000, "1.5mbit"), (100_000_000, "100mbit"), (10**9, "1gbit"),
    (123, "123bit"), (1000, "1kbit"), (2_500, "2500bit"),
])
def test_format_bandwidth(bits, text):
    assert format_bandwidth(bits) == text
    assert parse_bandwidth(text) == bits


@pytest.mark.parametrize("bits", [1, 999, 1001, 10**6 + 1, 12_345_678_901, 7 * 10**12, 2**40])
def test_bandwidth_round_trip(bits):
    assert parse_bandwidth(format_bandwidth(bits)) == bits


@pytest.mark.parametrize("seconds, text", [
    (0.5, "0.5s"), (0.02, "20ms"), (600.0, "10m"), (90.0, "90s"), (0.00025, "250us"), (0, "0s"),
    (3.0, "3s"), (60.0, "1m"),
])
def test_format_time(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize("seconds", [0.1, 0.3, 1e-6, 0.0123, 1 / 3, 7200.0, 0.001, 2.5e-5])
def test_time_round_trip(seconds):
    assert parse_time(format_time(seconds)) == seconds


@pytest.mark.parametrize("size", [1, 1000, 1024, 2**29, 512 * 10**6, 10**9 + 1, 3 * 2**30])
def test_size_round_trip(size):
    assert parse_size(format_size(size)) == size


def test_format_size_prefers_short_exact():
    assert format_size(2**29) == "512mib"
    assert format_size(512 * 10**6) == "512mb"


def test_percent_round_trip():
    for value in (0.1, 1.0, 0.25, 100.0):
        assert parse_percent(format_percent(value)) == value
    assert format_percent(1.0) == "1%"
