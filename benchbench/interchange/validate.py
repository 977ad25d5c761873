"""Field checks for documents read back from files (run bundles): types, ranges, consistency.

Each check reads ``doc[key]``, validates it and returns it typed, or raises
:class:`BundleError` naming the file, the field's path (``measurements[3].samples_s``),
what was wrong and the bad value (shortened).
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from benchbench.core.columns import MEDIAN_CI
from benchbench.core.errors import BundleError
from benchbench.core.values import Result
from benchbench.store.rows import summaries

_MISSING = object()
#: Relative tolerance when comparing a bundle's statistics with those recomputed from its
#: samples: both come from the same float64 arithmetic, so only JSON round-off (~1e-16)
#: separates honest values.
_STATS_RTOL = 1e-9


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Checker:
    """Validators for one file; every failure names ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, problem: str, value: Any = _MISSING) -> NoReturn:
        got = "" if value is _MISSING else f", got {_show(value)}"
        raise BundleError(f"bundle {self.path}: {field} {problem}{got}; the file is rejected whole")

    def _get(self, doc: Mapping[str, Any], key: str, where: str | None) -> tuple[str, Any]:
        field = f"{where}.{key}" if where else key
        if key not in doc:
            self.fail(field, "is missing")
        return field, doc[key]

    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(field, "must be a JSON object", value)
        return value

    def sequence(self, doc: Mapping[str, Any], key: str, where: str | None = None) -> list[Any]:
        field, value = self._get(doc, key, where)
        if not isinstance(value, list):
            self.fail(field, "must be a JSON array", value)
        return value

    def string(
        self,
        doc: Mapping[str, Any],
        key: str,
        where: str | None = None,
        *,
        optional: bool = False,
        max_length: int | None = None,
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value is None and optional:
            return None
        if not isinstance(value, str) or (not value and not optional):
            self.fail(field, "must be a non-empty string", value)
        if max_length is not None and len(value) > max_length:
            self.fail(field, f"must be at most {max_length} characters", value)
        return value

    def choice(
        self, doc: Mapping[str, Any], key: str, allowed: Sequence[str], where: str | None = None
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value not in allowed:
            self.fail(field, f"must be one of {', '.join(allowed)}", value)
        return value

    def uuid(self, doc: Mapping[str, Any], key: str, where: str | None = None) -> str:
        field, value = self._get(doc, key, where)
        try:
            if not isinstance(value, str) or str(uuid.UUID(value)) != value:
                raise ValueError(value)
        except ValueError:
            self.fail(field, "must be a UUID in canonical form", value)
        return value

    def integer(
        self,
        doc: Mapping[str, Any],
        key: str,
        where: str | None = None,
        *,
        low: int | None = None,
        optional: bool = False,
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(field, "must be an integer", value)
        if low is not None and value < low:
            self.fail(field, f"must be >= {low}", value)
        if abs(value) >= 2**63:
            self.fail(field, "does not fit in 64 bits", value)
        return value

    def number(
        self,
        doc: Mapping[str, Any],
        key: str,
        where: str | None = None,
        *,
        low: float | None = None,
        optional: bool = False,
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(field, "must be a number", value)
        if not math.isfinite(value) or (low is not None and value < low):
            self.fail(field, f"must be a finite number >= {low}", value)
        return float(value)

    def boolean(
        self, doc: Mapping[str, Any], key: str, where: str | None = None, *, optional: bool = False
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value is None and optional:
            return None
        if not isinstance(value, bool):
            self.fail(field, "must be true or false", value)
        return value

    def timestamp(
        self, doc: Mapping[str, Any], key: str, where: str | None = None, *, optional: bool = False
    ) -> Any:
        field, value = self._get(doc, key, where)
        if value is None and optional:
            return None
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            self.fail(field, "must be an ISO 8601 timestamp with a UTC offset", value)
        if moment.tzinfo is None:
            self.fail(field, "must carry a UTC offset (e.g. +00:00)", value)
        return moment

    def json_object(self, doc: Mapping[str, Any], key: str, where: str | None = None) -> Any:
        field, value = self._get(doc, key, where)
        if not isinstance(value, dict):
            self.fail(field, "must be a JSON object", value)
        return value

    def json_list(self, doc: Mapping[str, Any], key: str, where: str | None = None) -> Any:
        field, value = self._get(doc, key, where)
        if not isinstance(value, list):
            self.fail(field, "must be a JSON array", value)
        return value

    def string_list(self, doc: Mapping[str, Any], key: str, where: str | None = None) -> Any:
        field, value = self._get(doc, key, where)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(field, "must be an array of strings", value)
        return value

    def int_list(
        self, doc: Mapping[str, Any], key: str, where: str | None = None, *, low: int = 0
    ) -> list[int]:
        field, value = self._get(doc, key, where)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**63 for v in value
        ):
            self.fail(field, f"must be an array of integers >= {low}", value)
        return value

    def float_list(
        self, doc: Mapping[str, Any], key: str, where: str | None = None, *, low: float = 0.0
    ) -> list[float]:
        field, value = self._get(doc, key, where)
        if not isinstance(value, list):
            self.fail(field, "must be an array of numbers", value)
        for index, item in enumerate(value):
            if (
                isinstance(item, bool)
                or not isinstance(item, (int, float))
                or not math.isfinite(item)
                or item < low
            ):
                self.fail(f"{field}[{index}]", f"must be a finite number >= {low}", item)
        return [float(v) for v in value]

    def consistent_stats(self, doc: Mapping[str, Any], where: str, result: Result) -> None:
        """The bundle's n and median agree with the ones its raw samples give."""
        summary = summaries([result])[0]
        if summary is None:
            return
        n = doc.get("n")
        if n is not None and n != summary["n"]:
            self.fail(f"{where}.n", f"disagrees with its {summary['n']} samples", n)
        for key in MEDIAN_CI:
            given = doc.get(key)
            if given is None:
                continue
            expected = summary[key]
            if not isinstance(given, (int, float)) or not math.isclose(
                given, expected, rel_tol=_STATS_RTOL, abs_tol=1e-300
            ):
                self.fail(
                    f"{where}.{key}", f"disagrees with its samples (which give {expected!r})", given
                )
