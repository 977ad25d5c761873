"""One hierarchy for everything a user can fix.

Every message names the thing, echoes the bad value and says the fix, e.g.
``suite 'suites/x.py', line 12: size must be a positive int, got -4``.
The CLI maps :class:`UsageError` to exit code 2 and every other
:class:`BenchbenchError` to exit code 1; library code never prints or exits.
"""

from __future__ import annotations


class BenchbenchError(Exception):
    """Base of every error benchbench raises on purpose."""


class UsageError(BenchbenchError):
    """Bad command-line usage: unknown suite name, malformed flag value (exit 2)."""


class SuiteError(BenchbenchError):
    """A suite file or a workload declaration is invalid."""


class StoreError(BenchbenchError):
    """The results store cannot be opened, read or written."""


class StoreUnavailable(StoreError):
    """A store's server cannot be reached now (stopped, restarting, the connection cut or
    hung): a write may succeed when it is back, unlike a damaged or full store."""


class SchemaVersionError(StoreError):
    """The store was written by a newer benchbench than this one."""


class BundleError(BenchbenchError):
    """A run bundle is malformed; it is rejected whole."""


class NotFoundError(BenchbenchError):
    """A run, workload or benchmark asked for does not exist (the message lists what does)."""


class MeasurementError(BenchbenchError):
    """A point could not be measured (wrong result, device failure)."""
