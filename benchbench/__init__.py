"""benchbench: benchmark PyTorch operators on CPU, CUDA and MPS, and keep the numbers.

Declaring work::

    from benchbench import Suite, Variant, pow2
"""

from __future__ import annotations

__version__ = "0.1.0"

from benchbench.suite import Suite, Variant, Workload, geometric, pow2

__all__ = ["Suite", "Variant", "Workload", "__version__", "compare_variants", "geometric", "pow2"]


def __getattr__(name: str) -> object:
    # compare_variants imports torch and pandas (~4 s): loaded on first use, so that
    # `import benchbench` (and every CLI command) stays at ~70 ms.
    if name == "compare_variants":
        from benchbench.quick_compare import compare_variants

        return compare_variants
    raise AttributeError(f"module 'benchbench' has no attribute {name!r}")
