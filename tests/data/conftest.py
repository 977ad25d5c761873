"""Test data, not tests: the operator_benchmark modules here are named ``*_test.py``
as upstream's are, and import an ``operator_benchmark`` only benchbench provides."""

collect_ignore_glob = ["operator_benchmark/*"]
