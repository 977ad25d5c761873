"""How well the curve fit recovers known t0 and rate from noisy synthetic rows.

Run from the repository root:  PYTHONPATH=. python benchmarks/fit_recovery.py

Rows like the store's (7 sizes, 2^10 to 2^22 elements, 8 bytes per element) are generated
from ``time = t0 + bytes / rate`` with multiplicative Gaussian noise, pushed through
:func:`benchbench.analysis.curves.fit_run`, and the relative errors of the fitted t0 and rate are
summarised over many seeds. Target (issue 4): both within 10 % at 5 % noise. No clock.
"""

from __future__ import annotations

import numpy as np

from benchbench.analysis.curves import fit_run

SIZES = [2**k for k in range(10, 24, 2)]
CASES = [  # (t0 s, rate bytes/s): overhead-dominated to bandwidth-dominated curves
    (5e-6, 20e9),
    (2e-5, 1e10),
    (1e-6, 1e9),
]


def rows(t0: float, rate: float, noise: float, rng: np.random.Generator) -> list[dict]:
    out = []
    for n in SIZES:
        t = (t0 + 8.0 * n / rate) * (1 + noise * rng.standard_normal())
        out.append(
            {
                "suite": "s",
                "workload": "w",
                "variant": "v",
                "device": "cpu",
                "dtype": "float32",
                "size": n,
                "params": {},
                "status": "ok",
                "median_s": t,
                "bytes_per_call": 8.0 * n,
                "flop_per_call": float(n),
                "items_per_call": float(n),
            }
        )
    return out


def main(seeds: int = 200) -> None:
    print(
        "| t0 | rate | noise | seeds | t0 error median / p95 / max "
        "| rate error median / p95 / max |"
    )
    print("|---|---|---|---|---|---|")
    for noise in (0.05, 0.10):
        for t0, rate in CASES:
            rng = np.random.default_rng(0)
            errs_t0, errs_rate = [], []
            for _ in range(seeds):
                frame = fit_run(rows(t0, rate, noise, rng))
                errs_t0.append(abs(frame.loc[0, "t0_s"] / t0 - 1))
                errs_rate.append(abs(frame.loc[0, "rate_per_s"] / rate - 1))

            def summary(errs: list[float]) -> str:
                a = np.array(errs) * 100
                return f"{np.median(a):.1f} / {np.percentile(a, 95):.1f} / {a.max():.1f} %"

            print(
                f"| {t0 * 1e6:g} µs | {rate / 1e9:g} GB/s | {noise:.0%} | {seeds} | "
                f"{summary(errs_t0)} | {summary(errs_rate)} |"
            )


if __name__ == "__main__":
    main()
