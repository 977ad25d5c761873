# The nightly example's own suite: four cheap points, and a slowdown to inject.
#
# EXTRA_CALLS=K makes the `sqrt` variant at 2^16 elements call x.sqrt() K more times per
# call: a regression of whole extra calls on exactly one point, the kind a change that
# computes something twice makes. local.sh sets it from the night SLOWDOWN_NIGHT on, so
# that `regressions` has one step to find. No torch import here: the CLI process loads
# this file, and skipping torch there saves seconds per start.
import os

from benchbench import Suite, Variant

EXTRA_CALLS = int(os.environ.get("EXTRA_CALLS", "0"))


def sqrt(x):
    if x.numel() == 2**16:
        for _ in range(EXTRA_CALLS):
            x.sqrt()
    return x.sqrt()


suite = Suite("nightly-example")
for name, fn in (("sqrt", sqrt), ("rsqrt", lambda x: x.rsqrt())):
    suite.workload(
        name,
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant(name, fn)],
        sizes=[2**14, 2**16],  # tens of µs a call: a scheduler hiccup is not a step
        budget_s=0.05,
    )
