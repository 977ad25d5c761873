import pytest

from benchbench.core.errors import UsageError
from benchbench.core.units import format_rate, format_size, format_time, parse_sizes


def test_parse_size_forms():
    assert parse_sizes("2**10..2**13") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1024,4096") == [1024, 4096]
    assert parse_sizes("1k..4k") == [1024, 2048, 4096]
    assert parse_sizes("16M") == [16 * 2**20]
    assert parse_sizes("1000..5000") == [1000, 1024, 2048, 4096]


@pytest.mark.parametrize("text", ["", "abc", "2**24..2**10", "0", ",", "1..x"])
def test_bad_sizes_name_the_accepted_forms(text):
    with pytest.raises(UsageError, match=r"2\*\*10\.\.2\*\*24"):
        parse_sizes(text)


def test_formatting():
    assert format_time(1.5e-6) == "1.5 µs"
    assert format_time(None) == "-"
    assert format_rate(12.3e9, "B/s") == "12.3 GB/s"
    assert format_size(1 << 20) == "2^20"
    assert format_size(1000) == "1000"


def test_a_size_past_2_to_the_62_is_refused_before_it_is_computed() -> None:
    import re

    from benchbench.core.units import MAX_SIZE, parse_one_size, parse_shapes

    # 10**100000000 would take seconds and ~40 MB to compute: refused from its digits.
    for text in ("10**100000000", "2**63", "99999999999G"):
        with pytest.raises(UsageError, match=rf"size '{re.escape(text)}' is larger than 2\*\*62"):
            parse_one_size(text)
    assert parse_one_size("2**62") == MAX_SIZE
    with pytest.raises(UsageError, match="has more than 2"):
        parse_shapes("(2**40,2**40)")
