"""The machine: environment fingerprint, hardware profile and probe, telemetry, doctor."""
