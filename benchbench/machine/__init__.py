"""The machine: environment fingerprint, cache sizes, NVML, hardware profile and probe,
telemetry, doctor."""
