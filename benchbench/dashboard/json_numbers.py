"""Numbers for the pages: rounded to a few significant digits (:func:`compact`), and
long arrays of them written as JSON text by NumPy rather than one Python float each
(:func:`json_numbers`).

A fleet's history pages hold every measurement of the year: ~14 million runs of a
point, each with its median, CI, status and run number. ``json.dumps`` writes a float
in ~0.7 us (its shortest-repr algorithm) and ``ndarray.tolist`` makes one in ~0.1 us:
~40 s for the history alone on our 2-core machine, against a 60 s budget for the
whole build. :func:`json_numbers` writes the same numbers as text with array
arithmetic instead: each value rounded to ``digits`` significant digits (as
:func:`compact` rounds) is an integer mantissa ``M`` and
a power of ten ``E``, written ``M`` or ``MeE`` (``12346e-9`` for 1.2346e-05, a JSON
number that JavaScript and Python read as the same double that ``compact`` gives:
both sides are the correctly rounded ``M x 10**E``). NaN and infinities are ``null``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

_COMMA, _MINUS, _E, _ZERO = ord(","), ord("-"), ord("e"), ord("0")
_NULL = np.frombuffer(b"null", dtype=np.uint8)
#: Largest power of ten a double holds exactly: beyond it ``compact``'s rounding is not
#: the decimal the text says, and such values are written by ``json.dumps`` instead.
_EXACT_POWER = 22


def json_for_script(doc: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and U+2028/9 escaped."""
    text = json.dumps(doc, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def compact(values: Any, digits: int = 5) -> list[float | None]:
    """Round to ``digits`` significant digits; NaN and infinities become None (JSON null)."""
    a = np.asarray(values, dtype=float)
    out = np.full(a.shape, np.nan)
    ok = np.isfinite(a) & (a != 0)
    if ok.any():
        x = a[ok]
        e = (digits - 1 - np.floor(np.log10(np.abs(x)))).astype(int)
        with np.errstate(over="ignore", invalid="ignore"):  # beyond 1e308: None, as NaN
            up = np.power(10.0, np.abs(e))
            out[ok] = np.where(e >= 0, np.round(x * up) / up, np.round(x / up) * up)
    out[a == 0] = 0.0
    return [None if v != v else v for v in out.tolist()]


@dataclass(frozen=True)
class JsonNumbers:
    """Numbers as JSON text, each followed by a comma: element ``k`` is
    ``text[bounds[k]:bounds[k + 1] - 1]``. :meth:`array` gives any run of them as a
    JSON array."""

    text: bytes
    bounds: np.ndarray

    def array(self, lo: int, hi: int) -> str:
        """Elements ``lo`` to ``hi - 1`` as a JSON array."""
        if hi <= lo:
            return "[]"
        return "[" + self.text[self.bounds[lo] : self.bounds[hi] - 1].decode("ascii") + "]"


def json_numbers(values: np.ndarray, digits: int | None = 5) -> JsonNumbers:
    """``values`` as JSON numbers rounded to ``digits`` significant digits (``None``:
    integers, written exactly); NaN and infinities as ``null``."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    finite = np.isfinite(x)
    nonzero = finite & (x != 0)
    magnitude = np.abs(np.where(nonzero, x, 1.0))
    if digits is None:
        mantissa = np.rint(magnitude).astype(np.int64)
        power = np.zeros(x.size, dtype=np.int64)
        odd = np.zeros(x.size, dtype=bool)
    else:
        # compact's rounding: e = digits - 1 - floor(log10|x|); M = round(|x| * 10**e)
        # (or round(|x| / 10**-e)); the value is M / 10**e (or M * 10**-e).
        e = digits - 1 - np.floor(np.log10(magnitude)).astype(np.int64)
        odd = nonzero & (np.abs(e) > _EXACT_POWER)
        e = np.where(odd, 0, e)
        up = np.power(10.0, np.abs(e))
        mantissa = np.where(e >= 0, np.round(magnitude * up), np.round(magnitude / up))
        mantissa = np.where(odd, 0, mantissa).astype(np.int64)
        power = -e
    if mantissa.size and mantissa.max() >= 2**52:
        raise ValueError(f"json_numbers: {int(mantissa.max())} is beyond exact doubles")
    mantissa = np.where(nonzero, mantissa, 0)
    power = np.where(nonzero & (mantissa != 0), power, 0)
    # Trailing zeros into the power (1000e-6 is 1e-3), on the few values that have any.
    at = np.flatnonzero((mantissa != 0) & (mantissa % 10 == 0)) if digits else np.zeros(0, int)
    while at.size:
        mantissa[at] //= 10
        power[at] += 1
        at = at[mantissa[at] % 10 == 0]
    negative = nonzero & (x < 0) & (mantissa != 0)
    has_power = power != 0
    chars, valid, count = _digits(mantissa)
    exp_chars, exp_valid, exp_count = _digits(np.abs(power))
    # One row of characters per value, and which of them are written:
    # [-][digits][e][-][exponent digits][,]
    n, width, exp_width = x.size, chars.shape[1], exp_chars.shape[1]
    matrix = np.empty((n, width + exp_width + 4), dtype=np.uint8)
    mask = np.empty(matrix.shape, dtype=bool)
    matrix[:, 0], mask[:, 0] = _MINUS, negative
    matrix[:, 1 : 1 + width], mask[:, 1 : 1 + width] = chars, valid
    col = 1 + width
    matrix[:, col], mask[:, col] = _E, has_power
    matrix[:, col + 1], mask[:, col + 1] = _MINUS, power < 0
    matrix[:, col + 2 : col + 2 + exp_width] = exp_chars
    mask[:, col + 2 : col + 2 + exp_width] = exp_valid & has_power[:, None]
    matrix[:, -1], mask[:, -1] = _COMMA, True
    null = ~finite
    if null.any():  # "null," at the row's start
        matrix[null, : _NULL.size] = _NULL
        mask[null] = False
        mask[null, : _NULL.size] = True
        mask[null, -1] = True
        matrix[null, -1] = _COMMA
    # Each row's written characters, counted from the parts (a count over the mask is a
    # pass over every character, ~1.4 s for a fleet's year).
    lengths = negative + count + has_power * (1 + (power < 0) + exp_count) + 1
    lengths = np.where(null, _NULL.size + 1, lengths)
    text = matrix[mask].tobytes()
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    if odd.any():  # beyond exact powers of ten: as json.dumps writes the rounded double
        return _with_repr(text, bounds, x, odd, digits or 0)
    return JsonNumbers(text, bounds)


def _digits(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decimal digits of non-negative integers, right-aligned in as many columns as the
    largest needs, which columns are digits (no leading zeros; 0 is one digit), and how
    many digits each has.

    Below 10**5 (every 5-digit mantissa, most run numbers, every status) they are looked up
    in a table, one gather; above, computed in doubles (NumPy divides int64 at ~70 ns a
    value here, doubles at ~2 ns, and below 2**52 floor(v / 10**k) of integers is exact).
    """
    width = len(str(int(values.max()))) if values.size else 1
    if width <= _TABLE_WIDTH:
        chars, _, counts = _table()
        count = counts[values]
        valid = np.arange(width)[None, :] >= (width - count)[:, None]
        return chars[values, _TABLE_WIDTH - width :], valid, count
    return _computed_digits(values, width)


def _computed_digits(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = values.astype(np.float64)
    quotient = np.floor(v[:, None] / 10.0 ** np.arange(width, -1, -1)[None, :])
    digit = quotient[:, 1:] - 10.0 * quotient[:, :-1]
    count = np.ones(values.size, dtype=np.int64)
    for k in range(1, width):
        count += values >= 10**k
    valid = np.arange(width)[None, :] >= (width - count)[:, None]
    return (digit + _ZERO).astype(np.uint8), valid, count


_TABLE_WIDTH = 5
_TABLES: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []


def _table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The digits of 0 to 99,999 (0.5 MB), built on first use."""
    if not _TABLES:
        _TABLES.append(_computed_digits(np.arange(10**_TABLE_WIDTH), _TABLE_WIDTH))
    return _TABLES[0]


def _with_repr(
    text: bytes, bounds: np.ndarray, x: np.ndarray, odd: np.ndarray, digits: int
) -> JsonNumbers:
    """``text`` with the elements at ``odd`` written as ``json.dumps`` writes their
    rounding (None, NaN, for a value whose rounding overflows)."""
    parts: list[bytes] = []
    lengths = np.diff(bounds)
    last = 0
    for k in np.flatnonzero(odd).tolist():
        parts.append(text[bounds[last] : bounds[k]])
        parts.append(json.dumps(compact([x[k]], digits)[0]).encode("ascii") + b",")
        lengths[k] = len(parts[-1])
        last = k + 1
    parts.append(text[bounds[last] :])
    return JsonNumbers(b"".join(parts), np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))
