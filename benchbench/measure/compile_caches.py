"""The compile caches of a ``torch.compile`` point: a folder of its own per point.

Inductor's (FX graphs, generated code) and Triton's (compiled kernels) caches persist
across processes, so without a folder of its own only the first compile point of a
machine would pay a cold compile and ``compile_s`` would be cold once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

#: The variables that place them.
COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextlib.contextmanager
def fresh_compile_caches() -> Iterator[str]:
    """Inductor and Triton caches in a new temporary folder for one point, removed after;
    the environment as it was. ``compile_s`` is then a cold compile at every point.

    Inductor reads ``TORCHINDUCTOR_CACHE_DIR`` at each use (and writes it back), and
    sets ``TRITON_CACHE_DIR`` from it once when unset, so both are set here; its
    in-memory caches are cleared on the way in and out (``torch._inductor.utils.
    clear_caches``, where this torch has it).
    """
    folder = tempfile.mkdtemp(prefix="benchbench-compile-")
    saved = {name: os.environ.get(name) for name in COMPILE_CACHE_VARIABLES}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    _clear_inductor_caches()
    try:
        yield folder
    finally:
        _clear_inductor_caches()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)


def _clear_inductor_caches() -> None:
    try:
        from torch._inductor.utils import clear_caches
    except Exception:  # a torch without Inductor, or without this helper
        return
    with contextlib.suppress(Exception):
        clear_caches()
