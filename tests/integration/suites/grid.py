# 40 cheap points for the kill-and-resume, sharding and store-fault tests. No work model
# (derive=False): what these tests check is which points are stored, and deriving FLOPs
# costs each run's zygote the first dispatch mode (torch._dynamo's import, ~2.4 s).
from benchbench import Suite, Variant

suite = Suite("grid")
for name, fn in (("sqrt", lambda x: x.sqrt()), ("rsqrt", lambda x: x.rsqrt())):
    suite.workload(
        name,
        setup=lambda ctx: ctx.uniform(0.5, 1.5),
        variants=[Variant(name, fn)],
        sizes=[64 * (i + 1) for i in range(20)],
        budget_s=0.02,
        derive=False,
    )
