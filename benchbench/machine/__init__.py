"""The machine: environment fingerprint, cache sizes, NVML, the CPU's hardware counters
(``pmu``), hardware profile and probe, telemetry, doctor."""
