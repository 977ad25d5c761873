"""Formatting and parsing of the units benchbench prints and accepts."""

from __future__ import annotations

import math
import re

from benchbench.core.errors import UsageError

#: The units :func:`format_time` writes, largest first, with their seconds.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def format_time(seconds: float | None) -> str:
    """``1.23 µs``-style, three significant digits."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in TIME_UNITS.items():
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
_NUMBER = re.compile(r"^\s*(?:(\d+)\s*\*\*\s*(\d+)|(-?\d+)\s*([kKmMgG]?))\s*$")

SIZE_FORMS = "2**10..2**24, 1024,4096, 1k..16M"

#: The forms :func:`parse_shapes` accepts, for help texts and errors.
SHAPE_FORMS = SIZE_FORMS + ", 64x1024, (64,1024), 64x1024..8192 (a range on one dimension)"


#: The largest size (elements, or bytes for ``--memory-limit``) any flag accepts: past it
#: no tensor and no memory fits, and ``2**N`` is refused before it is computed
#: (``--size 10**100000000`` would take minutes and gigabytes to compute).
MAX_SIZE = 2**62


def parse_one_size(text: str, forms: str = SIZE_FORMS) -> int:
    """One size: ``1024``, ``2**10``, ``1k``/``16M``/``1G`` (binary); 1 to :data:`MAX_SIZE`."""
    match = _NUMBER.match(text)
    if not match:
        raise UsageError(f"size {text!r} is not a number; accepted forms: {forms}")
    if match.group(1):
        base, exponent = int(match.group(1)), int(match.group(2))
        if base > 1 and exponent * math.log2(base) > math.log2(MAX_SIZE):
            raise UsageError(f"size {text!r} is larger than 2**62; accepted forms: {forms}")
        value = base**exponent
    else:
        value = int(match.group(3)) * _SUFFIX[match.group(4).lower()]
    if value < 1:
        raise UsageError(f"size {text!r} must be >= 1; accepted forms: {forms}")
    if value > MAX_SIZE:
        raise UsageError(f"size {text!r} is larger than 2**62; accepted forms: {forms}")
    return value


def parse_sizes(text: str) -> list[int]:
    """``2**10..2**24`` (powers of two between), ``1024,4096``, ``1k..16M``."""
    text = text.strip()
    if not text:
        raise UsageError(f"--size is empty; accepted forms: {SIZE_FORMS}")
    if ".." in text:
        return _size_range(text, text, SIZE_FORMS)
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise UsageError(f"--size {text!r} holds no size; accepted forms: {SIZE_FORMS}")
    return sorted({parse_one_size(part) for part in parts})


def _size_range(text: str, whole: str, forms: str) -> list[int]:
    """``low..high``: ``low``, then the powers of two up to ``high``."""
    low_text, _, high_text = text.partition("..")
    low, high = parse_one_size(low_text, forms), parse_one_size(high_text, forms)
    if high < low:
        raise UsageError(f"--size {whole!r} is empty (end < start); accepted forms: {forms}")
    out, value = [], 1 << max(0, (low - 1).bit_length())
    if low & (low - 1):
        out.append(low)
    while value <= high:
        out.append(value)
        value *= 2
    return out


def _split_items(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses: ``(64,1024),8`` -> 2 items."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _shapes_of(item: str, whole: str) -> list[tuple[int, ...]]:
    if item.startswith("(") and item.endswith(")"):
        dims = [d for d in item[1:-1].split(",") if d.strip()]
    else:
        dims = item.split("x")
    if not dims or "(" in item[1:-1] or ")" in item[1:-1]:
        raise UsageError(
            f"--size {whole!r}: {item!r} is not a shape; accepted forms: {SHAPE_FORMS}"
        )
    ranged = [i for i, d in enumerate(dims) if ".." in d]
    if len(ranged) > 1:
        raise UsageError(
            f"--size {whole!r}: {item!r} has a range on {len(ranged)} dimensions; "
            f"give a range on one dimension only, e.g. 64x1024..8192"
        )
    fixed = [None if ".." in d else parse_one_size(d, SHAPE_FORMS) for d in dims]
    if not ranged:
        return [tuple(int(v) for v in fixed if v is not None)]
    at = ranged[0]
    return [
        tuple(value if i == at else int(v or 0) for i, v in enumerate(fixed))
        for value in _size_range(dims[at], whole, SHAPE_FORMS)
    ]


def parse_shapes(text: str) -> list[tuple[int, ...]]:
    """Sizes and shapes: every form of :func:`parse_sizes` (one-dimensional, ``(n,)``),
    and ``64x1024`` or ``(64,1024)``, with a range on at most one dimension
    (``64x1024..8192``: 64x1024, 64x2048, 64x4096, 64x8192); a comma separates items.

    Sorted by number of elements, then shape; duplicates dropped.
    """
    text = text.strip()
    if not text:
        raise UsageError(f"--size is empty; accepted forms: {SHAPE_FORMS}")
    shapes = {shape for item in _split_items(text) for shape in _shapes_of(item, text)}
    if not shapes:
        raise UsageError(f"--size {text!r} holds no size; accepted forms: {SHAPE_FORMS}")
    for shape in shapes:
        if math.prod(shape) > MAX_SIZE:
            shown = "x".join(map(str, shape))
            raise UsageError(
                f"--size {text!r}: shape {shown} has more than 2**62 elements; accepted "
                f"forms: {SHAPE_FORMS}"
            )
    return sorted(shapes, key=lambda shape: (math.prod(shape), shape))
