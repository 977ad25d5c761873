"""Measuring one point: the policy (warm-up, calibration, stopping), a clock per device,
the reference check, the steps every measurement shares (``pipeline``), and the point
pipelines built on them: suite workloads (``point``), variants (``variants``), plus the
profiler trace of a point (``trace``)."""
