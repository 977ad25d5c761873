"""benchbench: benchmark PyTorch operators on CPU, CUDA and MPS, and keep the numbers.

Declaring work::

    from benchbench import Suite, Variant, pow2

Where a model's time goes (its aten calls as a suite; see ``benchbench capture``)::

    captured = benchbench.capture(model, x)  # .calls, .views, .summary()

Measuring one call, and judging two (in a script or a notebook)::

    a = benchbench.bench(torch.sqrt, x)  # median, interval, processes, samples
    benchbench.compare(a, benchbench.bench(torch.rsqrt, x))  # compare's verdict

Reading results::

    store = benchbench.open_store("results/benchbench.db")  # or postgresql://...
    frame = store.dataframe(workload="sqrt", device="cpu", since="2026-11-01")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from benchbench.core.version import __version__
from benchbench.suite.declare import Skip, Suite, Variant, Workload, geometric, pow2

if TYPE_CHECKING:
    from benchbench.api import bench, compare
    from benchbench.store import open_store
    from benchbench.suite.capture import capture
    from benchbench.variants import compare_variants

__all__ = [
    "Skip",
    "Suite",
    "Variant",
    "Workload",
    "__version__",
    "bench",
    "capture",
    "compare",
    "compare_variants",
    "geometric",
    "open_store",
    "pow2",
]

#: Loaded on first use: compare_variants imports torch and pandas (~4 s), capture
#: torch, open_store
#: SQLAlchemy (~0.2 s); `import benchbench` (every worker, every CLI command) stays fast.
_LAZY = {
    "bench": "benchbench.api",
    "compare": "benchbench.api",
    "capture": "benchbench.suite.capture",
    "compare_variants": "benchbench.variants",
    "open_store": "benchbench.store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'benchbench' has no attribute {name!r}")
