# 40 cheap points for the kill-and-resume test. No torch import here: the CLI
# process loads this file, and skipping torch there saves seconds per start.
from benchbench import Suite, Variant

suite = Suite("grid")
for name, fn in (("sqrt", lambda x: x.sqrt()), ("rsqrt", lambda x: x.rsqrt())):
    suite.workload(
        name,
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant(name, fn)],
        sizes=[64 * (i + 1) for i in range(20)],
        budget_s=0.02,
    )
