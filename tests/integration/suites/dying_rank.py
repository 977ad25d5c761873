"""A collectives suite whose helper rank exits after 3 calls, then a healthy point."""

import importlib.util
from pathlib import Path

from benchbench import Suite

_path = Path(__file__).resolve().parents[3] / "suites" / "collectives.py"
_spec = importlib.util.spec_from_file_location("collectives_for_dying_rank_test", _path)
collectives = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(collectives)

suite = Suite("dying")
collectives.declare(suite, "all-reduce", [256], (), exit_after=3, name="dies")
collectives.declare(suite, "broadcast", [256], (), name="lives")
