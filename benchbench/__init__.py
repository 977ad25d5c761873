"""benchbench: benchmark PyTorch operators on CPU, CUDA and MPS, and keep the numbers.

Declaring work::

    from benchbench import Suite, Variant, pow2

Reading results::

    store = benchbench.open_store("results/benchbench.db")  # or postgresql://...
    frame = store.dataframe(workload="sqrt", device="cpu", since="2026-11-01")
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from benchbench.suite import Suite, Variant, Workload, geometric, pow2

if TYPE_CHECKING:
    from benchbench.store import open_store

__all__ = ["Suite", "Variant", "Workload", "__version__", "geometric", "open_store", "pow2"]


def __getattr__(name: str) -> Any:
    # Lazy: SQLAlchemy costs ~0.2 s to import, and every worker process imports
    # benchbench (suites do) without ever touching a store.
    if name == "open_store":
        from benchbench.store import open_store

        return open_store
    raise AttributeError(f"module 'benchbench' has no attribute {name!r}")
