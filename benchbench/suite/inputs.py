"""The context a workload's ``setup`` receives: the point and a seeded generator.

Values are drawn in float64 on the CPU from a generator seeded by the point (its
shape, dtype, device and parameters; not the variant), then rounded to the point's
dtype and moved to its device, so every variant of a point sees the same numbers and
the float64 reference sees exactly the rounded inputs the variant got. The float64 draws are
scaled in place: the same values as ``values * scale + low`` without two more
float64 arrays, which a fresh process pays in page faults (a 2^22-element ``uniform``
took 31 ms instead of 57 ms in a fresh process).
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.core.values import Point


class SetupContext:
    """What ``setup(ctx)`` uses to build inputs: ``ctx.uniform(0.5, 1.5)`` etc."""

    def __init__(self, point: Point) -> None:
        self.point = point
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(point.input_seed())

    @property
    def shape(self) -> tuple[int, ...]:
        return self.point.shape

    @property
    def numel(self) -> int:
        return self.point.numel

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.point.dtype)

    @property
    def device(self) -> torch.device:
        return torch.device(self.point.device)

    def __getitem__(self, name: str) -> Any:
        return self.point[name]

    def _finish(self, values: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        return values.to(dtype or self.dtype).to(self.device)

    def uniform(
        self,
        low: float = 0.0,
        high: float = 1.0,
        shape: tuple[int, ...] | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Uniform values in [low, high) of ``shape`` (default the point's)."""
        values = torch.rand(shape or self.shape, generator=self.generator, dtype=torch.float64)
        return self._finish(values.mul_(high - low).add_(low), dtype)

    def normal(
        self,
        mean: float = 0.0,
        std: float = 1.0,
        shape: tuple[int, ...] | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Normal values; note that half of them are negative (NaN for ``sqrt``)."""
        values = torch.randn(shape or self.shape, generator=self.generator, dtype=torch.float64)
        return self._finish(values.mul_(std).add_(mean), dtype)

    def log_uniform(
        self,
        low: float,
        high: float,
        shape: tuple[int, ...] | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Values spread evenly over the decades from ``low`` to ``high`` (both > 0)."""
        if not 0 < low < high:
            raise ValueError(f"log_uniform needs 0 < low < high, got {low}, {high}")
        u = torch.rand(shape or self.shape, generator=self.generator, dtype=torch.float64)
        lo, hi = torch.log(torch.tensor(low)), torch.log(torch.tensor(high))
        return self._finish(u.mul_(hi - lo).add_(lo).exp_(), dtype)

    def randint(self, low: int, high: int, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        """Integers in [low, high) as int64 on the point's device."""
        values = torch.randint(low, high, shape or self.shape, generator=self.generator)
        return values.to(self.device)
