"""Every package folder is installed, and the built-in suites install with them."""

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "benchbench").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert config["package-dir"]["benchbench.builtin_suites"] == "suites"
    assert (ROOT / "suites" / "__init__.py").is_file()
    # The suites' own sub-folders (the claims files) install under the same package.
    suites = {
        ".".join(("benchbench.builtin_suites", *p.parent.relative_to(ROOT / "suites").parts))
        for p in (ROOT / "suites").rglob("__init__.py")
    }
    assert suites <= listed, f"add to [tool.setuptools] packages: {sorted(suites - listed)}"


def test_every_data_file_is_in_package_data():
    from fnmatch import fnmatch

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["package-data"]
    for path in (ROOT / "benchbench").rglob("*"):
        if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        covered = False
        for package, globs in patterns.items():
            base = ROOT.joinpath(*package.split("."))
            if base in path.parents:
                relative = path.relative_to(base).as_posix()
                covered |= any(fnmatch(relative, g) for g in globs)
        assert covered, f"{path.relative_to(ROOT)} is not in [tool.setuptools.package-data]"
