"""Formatting and parsing of the units benchbench prints and accepts."""

from __future__ import annotations

import math
import re

from benchbench.core.errors import UsageError


def format_time(seconds: float | None) -> str:
    """``1.23 µs``-style, three significant digits."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def format_rate(value: float | None, unit: str) -> str:
    """``12.3 GB/s``-style with decimal prefixes; ``-`` when unknown."""
    if value is None or not math.isfinite(value):
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_bytes(value: float | None) -> str:
    """Binary prefixes: ``4 KiB``, ``1.5 MiB``."""
    if value is None:
        return "-"
    for prefix, scale in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}B"
    return f"{value:.0f} B"


def format_size(n: int) -> str:
    """Element counts as powers of two where exact: ``2^20``; else the number."""
    if n > 0 and n & (n - 1) == 0 and n >= 1024:
        return f"2^{n.bit_length() - 1}"
    return str(n)


_SUFFIX = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_NUMBER = re.compile(r"^\s*(?:(\d+)\s*\*\*\s*(\d+)|(\d+)\s*([kKmMgG]?))\s*$")

SIZE_FORMS = "2**10..2**24, 1024,4096, 1k..16M"


def parse_one_size(text: str) -> int:
    match = _NUMBER.match(text)
    if not match:
        raise UsageError(f"size {text!r} is not a number; accepted forms: {SIZE_FORMS}")
    if match.group(1):
        value = int(match.group(1)) ** int(match.group(2))
    else:
        value = int(match.group(3)) * _SUFFIX[match.group(4).lower()]
    if value < 1:
        raise UsageError(f"size {text!r} must be >= 1; accepted forms: {SIZE_FORMS}")
    return value


def parse_sizes(text: str) -> list[int]:
    """``2**10..2**24`` (powers of two between), ``1024,4096``, ``1k..16M``."""
    text = text.strip()
    if not text:
        raise UsageError(f"--size is empty; accepted forms: {SIZE_FORMS}")
    if ".." in text:
        low_text, _, high_text = text.partition("..")
        low, high = parse_one_size(low_text), parse_one_size(high_text)
        if high < low:
            raise UsageError(
                f"--size {text!r} is empty (end < start); accepted forms: {SIZE_FORMS}"
            )
        out, value = [], 1 << max(0, (low - 1).bit_length())
        if low not in out and low & (low - 1):
            out.append(low)
        while value <= high:
            out.append(value)
            value *= 2
        if not out:
            raise UsageError(f"--size {text!r} holds no size; accepted forms: {SIZE_FORMS}")
        return out
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise UsageError(f"--size {text!r} holds no size; accepted forms: {SIZE_FORMS}")
    return sorted({parse_one_size(part) for part in parts})
