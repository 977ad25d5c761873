"""The detector's verdicts kept in the store, so a series it has judged is not judged again.

A judgement is one series' :class:`~benchbench.analysis.changepoint.SeriesAnalysis` and
the digest of what it was made from: the judged values (from the series' baseline on,
NaN gaps included), ``min_effect`` and the harness version (a new benchbench may judge
differently). :func:`benchbench.analysis.regressions.detect` re-judges only the series
whose digest changed since the last judgement of the same metric: after `regressions`
has judged a night, `dashboard build` reads its verdicts instead of repeating ~1.7 ms
of CPU per series (~36 s on two cores for a fleet's 40,000 series).

The analysis is stored as JSON text (``float`` written with ``repr``, which reads back
to the same double, NaN included) and decoded to the same frozen dataclasses, so a
report built from a stored judgement is equal to one built from a fresh analysis.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np

from benchbench.analysis.changepoint import ChangePoint, Creep, SeriesAnalysis
from benchbench.core.version import __version__


def digest(values: np.ndarray, min_effect: float) -> str:
    """What a judgement of ``values`` at ``min_effect`` depends on, as 32 hex digits."""
    h = hashlib.blake2b(np.ascontiguousarray(values, dtype=np.float64).tobytes(), digest_size=16)
    h.update(f"|{min_effect!r}|{__version__}".encode())
    return h.hexdigest()


def encode(analysis: SeriesAnalysis) -> str:
    """The verdict as JSON: its fields in declaration order, each change point and creep
    as the list of its own (``dataclasses.asdict`` would take 2.4 s of 40,000 series)."""
    return json.dumps(
        [
            [_fields(cp) for cp in analysis.change_points],
            [_fields(creep) for creep in analysis.creeps],
            analysis.unstable,
            analysis.noise_rel,
            analysis.n_values,
        ],
        separators=(",", ":"),
    )


def decode(text: str) -> SeriesAnalysis:
    change_points, creeps, unstable, noise_rel, n_values = json.loads(text)
    return SeriesAnalysis(
        change_points=tuple(ChangePoint(*fields) for fields in change_points),
        creeps=tuple(_creep(*fields) for fields in creeps),
        unstable=unstable,
        noise_rel=noise_rel,
        n_values=n_values,
    )


def _creep(
    start: int, end: int, before: float, after: float, rel: float, slope: float, points: list[int]
) -> Creep:
    return Creep(start, end, before, after, rel, slope, tuple(points))


def _fields(value: ChangePoint | Creep) -> list[Any]:
    return [getattr(value, f.name) for f in dataclasses.fields(value)]
