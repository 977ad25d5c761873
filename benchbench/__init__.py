"""benchbench: benchmark PyTorch operators on CPU, CUDA and MPS, and keep the numbers.

Declaring work::

    from benchbench import Suite, Variant, pow2
"""

from __future__ import annotations

__version__ = "0.1.0"

from benchbench.suite import Suite, Variant, Workload, geometric, pow2

__all__ = ["Suite", "Variant", "Workload", "__version__", "geometric", "pow2"]
