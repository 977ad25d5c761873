"""The settings file: [tool.benchbench] or benchbench.toml; flags > variables > file >
defaults; a bad file is a usage error naming the file, the key and the fix."""

from __future__ import annotations

import pytest

from benchbench.cli import main
from benchbench.core import config
from benchbench.core.errors import UsageError


def test_pyproject_settings_fill_only_the_unset_variables(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.benchbench]\nmachine = "ci-box"\nrounds = 2\n'
        'store = "bench.db"\n'
    )
    settings = config.find(tmp_path)
    assert settings.values == {"machine": "ci-box", "rounds": "2", "store": "bench.db"}
    environ = {"BENCHBENCH_STORE": "other.db"}
    config.apply(settings, environ)
    assert environ == {
        "BENCHBENCH_STORE": "other.db",  # the variable wins over the file
        "BENCHBENCH_MACHINE": "ci-box",
        "BENCHBENCH_ROUNDS": "2",
    }
    found = config.sources(settings, {"BENCHBENCH_STORE": "other.db"}, lambda key: "dflt")
    assert found == [
        ("store", "other.db", "$BENCHBENCH_STORE"),
        ("machine", "ci-box", f"{tmp_path / 'pyproject.toml'} [tool.benchbench]"),
        ("device", "dflt", "default"),
        ("rounds", "2", f"{tmp_path / 'pyproject.toml'} [tool.benchbench]"),
    ]


def test_benchbench_toml_comes_first_and_no_file_is_no_settings(tmp_path):
    assert config.find(tmp_path) == config.Settings(None, {})
    (tmp_path / "pyproject.toml").write_text('[tool.benchbench]\nmachine = "a"\n')
    (tmp_path / "benchbench.toml").write_text('machine = "b"\ndevice = "cpu"\n')
    assert config.find(tmp_path).values == {"machine": "b", "device": "cpu"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('machin = "x"', r"benchbench.toml: unknown key 'machin'; the keys are store, machine"),
        ("rounds = 0", r"rounds = 0 is not a whole number of rounds, at least 1; fix the value"),
        ('rounds = "3"', r"rounds = '3' is not a whole number"),
        ("store = 5", r"store = 5 is not a string"),
        ("rounds = [", r"cannot read it as TOML"),
    ],
)
def test_a_bad_file_names_the_file_the_key_and_the_fix(tmp_path, text, message):
    (tmp_path / "benchbench.toml").write_text(text + "\n")
    with pytest.raises(UsageError, match=message):
        config.find(tmp_path)


def test_the_cli_refuses_a_bad_file_with_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.benchbench]\ndevices = "cpu"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml [tool.benchbench]: unknown key 'devices'" in err
