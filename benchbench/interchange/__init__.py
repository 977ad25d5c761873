"""Runs leaving and entering the store: bundles and their validation, other tools' formats."""
