"""Where claims are declared: a suite's claims file, read without loading the suite.

`benchbench claims` reads the built-in claims from suites/claims/ so that it never
imports torch (tests/integration/test_cli_imports.py checks the import); these tests
check that what it reads is what the suites expose.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import benchbench.suite.load
from benchbench.analysis.claims import Claim, claims_file, claims_of, read_claims
from benchbench.core.errors import SuiteError
from benchbench.suite.load import builtin_dir, builtin_suites, load_suite


def _no_suite_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> None:
        raise AssertionError(f"claims read by loading the suite {path}")

    monkeypatch.setattr(benchbench.suite.load, "load_suite", refuse)


def test_claims_read_without_the_suites_are_the_claims_the_suites_expose(monkeypatch):
    suites = builtin_suites()
    with_file = {name: path for name, path in suites.items() if claims_file(path).is_file()}
    assert set(with_file) == {"elementwise", "overhead", "precision", "special", "collectives"}
    assert all(path.parent == builtin_dir() for path in suites.values())  # none in claims/

    with monkeypatch.context() as patched:
        _no_suite_loads(patched)
        read = claims_of(suites.values())
        per_suite = {name: read_claims(path) for name, path in with_file.items()}

    exposed = {name: load_suite(path).claims for name, path in with_file.items()}
    for name, claims in per_suite.items():  # same ids, same order, the very same objects
        assert [c.id for c in claims] == [c.id for c in exposed[name]], name
        assert all(a is b for a, b in zip(claims, exposed[name], strict=True)), name
    every = sorted(
        (c for claims in exposed.values() for c in claims), key=lambda c: (c.section, c.id)
    )
    assert [c.id for c in read] == [c.id for c in every]
    assert len(read) == 21
    # A suite without a claims file declares none: claims_of never loads it.
    for name in set(suites) - set(with_file):
        assert "claims" not in suites[name].read_text(), name


def test_the_special_claim_lists_the_special_suites_functions_in_order():
    (claim,) = read_claims(builtin_suites()["special"])
    suite = load_suite(builtin_suites()["special"])
    quick = tuple(w.name for w in suite.workloads if not w.name.endswith(" sweep"))
    assert claim.workloads == quick
    assert len(quick) == 23


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


CLAIMS = """
    from benchbench.analysis.claims import HOLDS, Claim, Finding

    claims = [Claim("X-1", "C", "text", "needs", "mine", ("w",), lambda rows: Finding(HOLDS))]
"""


def test_a_suite_with_a_claims_file_is_not_loaded_to_read_its_claims(tmp_path, monkeypatch):
    suite = _write(tmp_path / "mine.py", "raise RuntimeError('loaded')\n")
    _write(tmp_path / "claims" / "mine.py", CLAIMS)
    assert claims_file(suite) == tmp_path / "claims" / "mine.py"
    _no_suite_loads(monkeypatch)
    (claim,) = claims_of([suite])
    assert isinstance(claim, Claim) and claim.id == "X-1"


def test_a_suite_that_declares_its_claims_itself_is_still_loaded(tmp_path):
    suite = _write(
        tmp_path / "inline.py",
        """
        from benchbench import Suite
        from benchbench.analysis.claims import HOLDS, Claim, Finding

        suite = Suite("inline")
        suite.claims.append(Claim("Y-1", "D", "t", "n", "inline", ("w",), lambda r: Finding(HOLDS)))
        """,
    )
    assert [c.id for c in claims_of([suite])] == ["Y-1"]


def test_claims_files_that_cannot_be_read_say_which_and_why(tmp_path):
    suite = _write(tmp_path / "s.py", "")
    with pytest.raises(SuiteError, match=r"claims file .*claims/s\.py' does not exist"):
        read_claims(suite)
    _write(tmp_path / "claims" / "s.py", "claims = ['not a claim']\n")
    with pytest.raises(SuiteError, match="define `claims`, a list of Claim"):
        read_claims(suite)
    broken = _write(tmp_path / "b.py", "")
    _write(tmp_path / "claims" / "b.py", "\nclaims = [\n")
    with pytest.raises(SuiteError, match=r"^claims '.*claims/b\.py', line \d+: syntax error"):
        read_claims(broken)
