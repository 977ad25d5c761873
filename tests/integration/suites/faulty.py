import os

import torch

from benchbench import Suite, Variant


def hang(x):
    while True:
        pass


def boom(x):
    raise ValueError("boom from the suite")


def hog(x):
    return torch.empty(2**40, dtype=torch.uint8)  # 1 TiB


suite = Suite("faulty")
suite.workload(
    "faults",
    setup=lambda ctx: ctx.uniform(0.5, 1.5),
    variants=[
        Variant("good", torch.sqrt),
        Variant("abort", lambda x: os.abort()),
        Variant("hang", hang),
        Variant("raise", boom),
        Variant("wrong", lambda x: torch.sqrt(x) + 1),
        Variant("oom", hog),
        Variant("after", torch.sqrt),
    ],
    sizes=[512],
    budget_s=0.05,
)
