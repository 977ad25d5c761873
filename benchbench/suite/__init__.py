"""Declaring workloads (Suite, Workload, Variant), the setup context, loading suite files."""
