"""Measuring one point: the policy (warm-up, calibration, stopping), a clock per device,
the reference check, and the point pipeline that runs them inside a worker."""
