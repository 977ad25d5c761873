"""Fuzzed CLI arguments and suite parameters: a clear error or success, never a traceback.

Commands that do not measure (list, runs, show) run in-process through
``benchbench.cli.main``; every outcome must be exit code 0, 1 or 2 with no traceback
on stderr. Run bundles are not fuzzed here: ``benchbench import`` lives elsewhere.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from benchbench.cli import main

SUITES = Path(__file__).resolve().parents[1] / "integration" / "suites"
FLAGS = [
    "--device",
    "--dtype",
    "--filter",
    "--tag",
    "--json",
    "--store",
    "--limit",
    "--help",
    "cpu",
    "cuda,mps",
    "all",
    "float32",
    "bfloat16,int8",
    "latest",
    "[",
    "(",
    ".*",
    "0",
    "-1",
    "quick",
    str(SUITES / "tiny.py"),
    str(SUITES / "grid.py"),
    "no-such-suite",
    "x.py",
    ".",
    "",
    "sqlite:///",
    "postgresql://nobody@127.0.0.1:1/none",
    "mysql://x",
    "::::",
    "-",
    "--",
]
argument = st.one_of(st.sampled_from(FLAGS), st.text(max_size=12))
_counter = itertools.count()


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Run in an empty folder whose default store is a fresh SQLite file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BENCHBENCH_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def _assert_clean(code: int, err: str) -> None:
    assert code in (0, 1, 2), code
    assert "Traceback" not in err, err


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(command=st.sampled_from(["list", "runs", "show"]), args=st.lists(argument, max_size=6))
def test_cli_arguments_never_end_in_a_traceback(isolated, capsys, command, args):
    try:
        code = main([command, *args])
    except SystemExit as exc:  # argparse's --help exits 0 after printing
        code = int(exc.code or 0)
    _out, err = capsys.readouterr()
    _assert_clean(code, err)
    if code == 2:
        assert err.startswith("benchbench: error: "), err


@settings(max_examples=80, deadline=None)
@given(args=st.lists(argument, max_size=8))
def test_top_level_arguments_never_end_in_a_traceback(args):
    assume("run" not in args)  # `run` measures: not for a fuzz loop
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code in (0, 1, 2)


# -- suite parameters ------------------------------------------------------------

scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
)
sizes = st.one_of(
    st.lists(st.integers(1, 4096), min_size=1, max_size=3),  # valid
    st.lists(st.one_of(scalars, st.lists(st.integers(-3, 64), max_size=3)), max_size=3),
    scalars,
)
dtypes = st.one_of(
    st.lists(st.sampled_from(["float32", "float64", "int32", "bfloat16"]), min_size=1, max_size=2),
    st.lists(scalars, max_size=2),
    scalars,
)
devices = st.one_of(
    st.lists(st.sampled_from(["cpu", "cuda", "cuda:1", "mps"]), min_size=1, max_size=2),
    st.lists(scalars, max_size=2),
    scalars,
)
params = st.one_of(
    st.none(),
    st.dictionaries(st.text("abcxyz_", min_size=1, max_size=4), st.lists(scalars, max_size=3)),
    st.dictionaries(st.text(max_size=4), scalars, max_size=2),
)
names = st.one_of(st.sampled_from(["sqrt", "op_1"]), st.text(max_size=8))
options = st.fixed_dictionaries(
    {},
    optional={
        "budget_s": st.one_of(st.floats(-1, 10), st.text(max_size=3), st.none()),
        "cache": st.one_of(st.sampled_from(["warm", "cold", "rotate"]), st.text(max_size=5)),
        "version": st.one_of(st.integers(-5, 5), st.text(max_size=3)),
        "tags": st.one_of(st.lists(st.text(max_size=5), max_size=2), scalars),
    },
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=names,
    variant=names,
    sizes=sizes,
    dtypes=dtypes,
    devices=devices,
    params=params,
    options=options,
    cli=st.lists(st.sampled_from(["--json", "--device", "cpu", "--dtype", "float32"]), max_size=3),
)
def test_random_suite_parameters_give_a_listing_or_a_suite_error(
    isolated, capsys, name, variant, sizes, dtypes, devices, params, options, cli
):
    keywords = "".join(f"    {k}={v!r},\n" for k, v in options.items())
    source = (
        "from benchbench import Suite, Variant\n"
        "nan, inf = float('nan'), float('inf')  # what repr() writes for them\n"
        "suite = Suite('fuzz')\n"
        f"suite.workload(\n"
        f"    {name!r},\n"
        "    setup=lambda ctx: ctx.uniform(0.5, 1.5),\n"
        f"    variants=[Variant({variant!r}, lambda x: x)],\n"
        f"    sizes={sizes!r},\n"
        f"    dtypes={dtypes!r},\n"
        f"    devices={devices!r},\n"
        f"    params={params!r},\n"
        f"{keywords})\n"
    )
    path = isolated / f"fuzz_{next(_counter)}_{os.getpid()}.py"  # fresh path: no load cache
    path.write_text(source)
    code = main(["list", str(path), *cli])
    _out, err = capsys.readouterr()
    _assert_clean(code, err)
    if code == 1:
        assert str(path) in err, err  # a suite error names the file
