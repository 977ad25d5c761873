"""The claims the ``special`` suite's points answer (``suites/special.py``).

SEEDS D: every listed ``torch.special`` function runs and matches float64 within
float32 tolerance.
"""

from benchbench.analysis.claims import HOLDS, Claim, Finding, Rows

#: The functions of SEEDS D, one ``quick`` workload each in ``suites/special.py``, which
#: declares them (with their domains) in this order.
FUNCTIONS = (
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "logit",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "gammaln",
    "digamma",
    "polygamma",
    "multigammaln",
    "zeta",
    "ndtr",
    "ndtri",
    "log_ndtr",
    "xlogy",
    "xlog1py",
    "sinc",
    "entr",
    "bessel_j0",
    "bessel_j1",
)


def _all_within_tolerance(rows: Rows) -> Finding:
    measured = [r for r in rows.rows if r["dtype"] == "float32" and r["workload"] in FUNCTIONS]
    ok = [r for r in measured if r["status"] == "ok"]
    if not ok:
        return Finding("not measured", reason="no float32 point of torch.special")
    worst = max(ok, key=lambda r: r["max_rel_error"] or 0.0)
    failed = [r for r in measured if r["status"] != "ok"]
    figure = (
        f"{len({r['workload'] for r in ok})}/{len(FUNCTIONS)} functions measured in float32; "
        f"worst max rel error {worst['max_rel_error']:.3g} ({worst['workload']})"
    )
    if failed:
        figure += "; not measured: " + ", ".join(sorted({r["workload"] for r in failed}))
    verdict = (
        HOLDS
        if not failed and len({r["workload"] for r in ok}) == len(FUNCTIONS)
        else ("does not hold")
    )
    return Finding(
        verdict,
        figure,
        worst["max_rel_error"],
        reason="float32 tolerance atol 1e-5 + rtol 1.3e-6·|expected|",
    )


claims = [
    Claim(
        "D-special",
        "D",
        "every listed torch.special function runs and matches float64 within float32 tolerance",
        "special/<function>: every function, float32",
        "special",
        FUNCTIONS,
        _all_within_tolerance,
    )
]
