"""benchmarks/gpu_wheels.sh brings every package benchbench needs that the lent GPU
machine's image lacks, and the set is closed: nothing a wheel requires is left out."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_wheels.sh"

#: What the lent machine's image holds of benchbench's needs (its package list, read
#: on the machine: Python 3.12, torch 2.11+cu130).
GPU_IMAGE = {
    "torch", "numpy", "pandas", "matplotlib", "psutil", "nvidia-ml-py", "scipy", "rich",
    "triton", "typing-extensions",
}  # fmt: skip

#: What the image holds that the wheel set must not shadow, so a wheel's requirement on
#: it is met there: pandas, scipy and matplotlib there are built against its numpy
#: (transformers needs numpy>=1.17, typer rich>=10.11; benchbench itself needs both).
IMAGE_MEETS = {"numpy", "rich"}

#: The marker environment of that machine: CPython 3.12 on x86-64 Linux.
TARGET = {
    **default_environment(),
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "extra": "",
}


def _wheel_set() -> dict[str, str]:
    """name -> pinned version, from the script's PACKAGES list."""
    text = SCRIPT.read_text()
    block = text[text.index("PACKAGES=(") : text.index(")", text.index("PACKAGES=("))]
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', block)
    }


def _needs(name: str) -> set[str]:
    """The names ``name`` requires on the GPU machine (its installed metadata here)."""
    out = set()
    for spec in metadata.requires(name) or ():
        requirement = Requirement(spec)
        if requirement.marker is None or requirement.marker.evaluate(TARGET):
            out.add(canonicalize_name(requirement.name))
    return out


def test_every_dependency_of_benchbench_is_on_the_image_or_in_the_wheel_set():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # The models extra too: the zoo rows of benchmarks/gpu_acceptance2.py need it.
    wanted = [*project["dependencies"], *project["optional-dependencies"]["models"]]
    needed = {canonicalize_name(Requirement(d).name) for d in wanted}
    wheels = set(_wheel_set())
    missing = needed - wheels - {canonicalize_name(n) for n in GPU_IMAGE}
    assert not missing, f"add to benchmarks/gpu_wheels.sh: {sorted(missing)}"


def test_the_wheel_set_is_closed_under_its_requirements():
    wheels = _wheel_set()
    assert {"sqlalchemy", "pyperf", "psycopg", "transformers"} <= set(wheels)
    for name in wheels:
        left_out = _needs(name) - set(wheels) - IMAGE_MEETS
        assert not left_out, f"{name} requires {sorted(left_out)}: add them to gpu_wheels.sh"


@pytest.mark.skipif(not (ROOT / ".whl").is_dir(), reason="no .whl/: gpu_wheels.sh not run")
def test_downloaded_wheels_resolve_offline_for_python_3_12(tmp_path):
    done = subprocess.run(
        [
            # --no-deps: what the wheels need of the image (IMAGE_MEETS) is not here; their
            # other requirements are held to the set by the test above.
            sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
            "--find-links", str(ROOT / ".whl"), "--only-binary=:all:", "--python-version",
            "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--target", str(tmp_path / "site"), *sorted(_wheel_set()),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Would install" in done.stdout
