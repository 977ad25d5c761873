"""models: where a small transformer layer's and a conv block's time goes, op by op.

Built from ``torch.nn`` (nothing downloaded) and captured at load by
:func:`benchbench.suite.captured.declare_capture`: every distinct aten call of the
callable is one workload (``transformer-fwd-float32 aten.addmm#1``, parameters
``capture`` and ``count``), and ``... whole`` runs the callable itself, so that
``benchbench breakdown`` can rank the calls by count x median and compare their sum
with the whole.

- transformer: ``nn.TransformerEncoderLayer(d_model=256, nhead=4,
  dim_feedforward=1024, dropout=0.0, batch_first=True)`` on 8 x 128 x 256 inputs.
  Forward runs in training mode under ``torch.no_grad()``: in eval mode without
  grad the layer takes its fused fast path, one opaque
  ``aten._transformer_encoder_layer_fwd`` call with nothing to break down; dropout is
  0 so that training mode computes what eval does.
- conv: ``Conv2d(64, 64, 3, padding=1) + BatchNorm2d(64) + ReLU`` on 8 x 64 x 56 x 56;
  forward in eval mode under ``torch.no_grad()`` (running statistics).
- each in float32 and bfloat16, forward (``fwd``) and forward + backward
  (``fwd_bwd``: ``out.sum().backward()`` in training mode, the backward's calls
  captured too).

A capture runs the model once (0.1-2 s here); it is kept in ``~/.cache/benchbench``
(``$BENCHBENCH_CACHE``) keyed by this file's source and the torch version, so the
worker processes that load this suite read it back instead. CPU only.
"""

import hashlib
from pathlib import Path

import torch

from benchbench import Suite
from benchbench.suite.captured import declare_capture

suite = Suite(
    "models", description="a transformer layer and a conv block, op by op", tags=["models"]
)

SOURCE_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: The captured calls are many short points: a modest time cap each keeps
#: `benchbench run models` to a few minutes on 2 cores.
BUDGET_S = 0.3


def transformer(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(
        256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True, dtype=dtype
    )


def conv_block(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(64, 64, 3, padding=1, dtype=dtype),
        torch.nn.BatchNorm2d(64, dtype=dtype),
        torch.nn.ReLU(),
    )


MODELS = {
    "transformer": (transformer, (8, 128, 256)),
    "conv": (conv_block, (8, 64, 56, 56)),
}


class Captured:
    """One model in one dtype and mode: the callable and its input factory. The module
    is built by the factory (outside the capture, and untimed in ``whole``'s setup),
    not at load: a worker that reads the capture from the cache and measures one aten
    call never builds a model (0.3 s a load here)."""

    def __init__(self, model_name: str, dtype: torch.dtype, mode: str) -> None:
        self.model_name, self.dtype, self.mode = model_name, dtype, mode
        self.module: torch.nn.Module | None = None

    def inputs(self):
        if self.module is None:
            build, _ = MODELS[self.model_name]
            self.module = build(self.dtype)
            # the transformer's forward in training mode: see the module docstring
            self.module.train(self.mode == "fwd_bwd" or self.model_name == "transformer")
        return (torch.randn(MODELS[self.model_name][1], dtype=self.dtype),)

    def fwd(self, x):
        with torch.no_grad():
            return self.module(x)

    def fwd_bwd(self, x):
        self.module(x).sum().backward()


for model_name in MODELS:
    for dtype_name, dtype in DTYPES.items():
        for mode in ("fwd", "fwd_bwd"):
            name = f"{model_name}-{mode}-{dtype_name}"
            captured = Captured(model_name, dtype, mode)
            declare_capture(
                suite,
                name,
                captured.fwd if mode == "fwd" else captured.fwd_bwd,
                captured.inputs,
                prefix=f"{name} ",
                cache_key=f"models {SOURCE_HASH} {name}",
                budget_s=BUDGET_S,
            )
