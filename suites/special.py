"""special: every ``torch.special`` function of SEEDS D, throughput and accuracy per dtype.

One workload per function, checked against the same function in float64 on the
CPU. Input domains are chosen per function from where it is defined and away from
its zeros: near a root the *relative* error of any float32 implementation is
unbounded (``gammaln`` is 0 at 1 and 2, ``digamma`` at 1.4616, ``logit`` and
``ndtri`` at 0.5, ``entr`` at 1, ``sinc`` at the integers, ``bessel_j0`` at 2.405,
``bessel_j1`` at 3.832), which would measure the root, not the function. ``ndtr`` starts at -1: its
CPU float16/bfloat16 kernel computes ``0.5 * (1 + erf(x / sqrt 2))`` in the reduced
dtype, so the left tail cancels (at x = -3, relative error 0.07 in float16 and 0.45
in bfloat16; measured here).

Parameters: ``polygamma`` order ``n`` and ``multigammaln`` dimension ``p`` are axes;
``zeta``'s ``q`` is fixed at 1 (Riemann zeta). Dtypes the CPU kernels do not
implement (``ndtri``, ``log_ndtr``, ``zeta``, the Bessel functions in float16 and
bfloat16) are skipped with torch's own message.

Every function is checked at torch's default tolerance for its dtype but three in
float16 (:data:`FLOAT16_RTOL`).

``erf`` starts at 0.05: the CPU bfloat16 kernel loses relative accuracy for
|x| < 1e-4 (0.31 at 2^22 inputs from [-3, 3); 0.004 from [0.05, 3), measured here).

``quick``: float32 at 2^16 elements. ``nightly``: 2^10 to 2^22 in four dtypes.
"""

import torch

from benchbench import Suite, Variant, pow2
from benchbench.analysis.claims import read_claims

suite = Suite("special", description="torch.special throughput and accuracy")

S = torch.special

#: name -> (function of the inputs, domain of x, second input's domain or None)
FUNCTIONS = {
    "erf": (S.erf, (0.05, 3.0), None),
    "erfc": (S.erfc, (-3.0, 3.0), None),
    "erfinv": (S.erfinv, (0.05, 0.95), None),
    "expit": (S.expit, (-10.0, 10.0), None),
    "logit": (S.logit, (0.55, 0.99), None),
    "i0": (S.i0, (0.0, 10.0), None),
    "i0e": (S.i0e, (0.0, 10.0), None),
    "i1": (S.i1, (0.1, 10.0), None),
    "i1e": (S.i1e, (0.1, 10.0), None),
    "gammaln": (S.gammaln, (3.0, 30.0), None),
    "digamma": (S.digamma, (2.0, 20.0), None),
    "polygamma": (lambda x, n: S.polygamma(n, x), (0.5, 10.0), "n"),
    "multigammaln": (lambda x, p: S.multigammaln(x, p), (4.0, 30.0), "p"),
    "zeta": (lambda x, q: S.zeta(x, q), (1.5, 10.0), "q"),
    "ndtr": (S.ndtr, (-1.0, 3.0), None),
    "ndtri": (S.ndtri, (0.55, 0.999), None),
    "log_ndtr": (S.log_ndtr, (-10.0, 2.0), None),
    "xlogy": (S.xlogy, (0.5, 2.0), (1.5, 10.0)),
    "xlog1py": (S.xlog1py, (0.5, 2.0), (0.5, 10.0)),
    "sinc": (S.sinc, (0.05, 0.95), None),
    "entr": (S.entr, (0.05, 0.9), None),
    "bessel_j0": (S.bessel_j0, (0.0, 2.0), None),
    "bessel_j1": (S.bessel_j1, (0.1, 3.5), None),
}
PARAMS = {"n": [1, 2], "p": [3], "q": [1.0]}

#: Functions whose CPU float16 kernel keeps an intermediate in float16 (``1 - x`` in
#: ``logit``, the sum of ``lgamma`` terms in ``multigammaln``, ``0.5 * (1 + erf)`` in
#: ``ndtr``) and so reach 2e-3 relative here (measured; 2 to 3 float16 ULPs), past
#: torch's float16 default of 1e-3: checked at 4 float16 ULPs instead.
FLOAT16_RTOL = {"logit": 4e-3, "multigammaln": 4e-3, "ndtr": 4e-3}


def make_setup(domain, second):
    low, high = domain

    def setup(ctx):
        x = ctx.uniform(low, high)
        if second is None:
            return x
        if isinstance(second, str):
            return x, ctx[second]  # a scalar parameter, passed through unchanged
        return x, ctx.uniform(*second)

    return setup


def work_bytes(tensors):
    return lambda p: tensors * p.numel * p.itemsize  # read every input tensor, write one


for name, (fn, domain, second) in FUNCTIONS.items():
    params = {second: PARAMS[second]} if isinstance(second, str) else None
    two_tensors = second is not None and not isinstance(second, str)
    common = dict(
        setup=make_setup(domain, second),
        variants=[Variant(f"torch.special.{name}", fn)],
        params=params,
        items=lambda p: p.numel,
        bytes=work_bytes(3 if two_tensors else 2),
        description=f"x in [{domain[0]:g}, {domain[1]:g})",
        rtol={"float16": FLOAT16_RTOL[name]} if name in FLOAT16_RTOL else None,
    )
    suite.workload(name, sizes=[2**16], tags=("quick", "nightly", "full"), **common)
    suite.workload(
        f"{name} sweep",
        sizes=pow2(10, 22, step=4),
        dtypes=("float32", "float64", "float16", "bfloat16"),
        tags=("nightly", "full"),
        **common,
    )

# The claims these points answer: suites/claims/special.py (no torch there, so that
# `benchbench claims` reads them without loading this file).
suite.claims += read_claims(__file__)
