"""zoo: the layers people run, at their published shapes, op by op, LLM decoding included.

Needs the models extra (``pip install 'benchbench[models]'``: ``transformers``); without
it, loading this suite is a usage error naming that command. Every model is built from
its ``transformers`` config with random weights (:mod:`benchbench.suite.model_zoo`):
nothing is downloaded.

Captured at load (:func:`benchbench.suite.captured.declare_capture`), like ``models``:
each case below is one capture, ``{case} aten.mm#2`` one workload per distinct aten
call (parameters ``capture`` and ``count``), ``{case} whole`` the callable itself and
``{case} whole-compiled`` the callable through ``torch.compile`` (tag ``compile``; not
for the decode step, which dynamo recompiles at every call), so that ``benchbench
breakdown`` ranks the calls and puts eager and compiled beside them.

- ``llama-prefill``: a TinyLlama-1.1B decoder layer (hidden 2048, 32 heads, 4 KV heads,
  MLP 5632) over a prompt of 128, 512 and 2048 tokens at batch 1;
- ``llama-decode``: the same layer generating one token after a KV cache of 512 and
  4096 tokens (transformers' ``DynamicCache``, as ``generate`` uses it);
- ``bert``: a BERT-base encoder layer, batch 8, sequence 128 and 512;
- ``vit``: a ViT-B/16 encoder block, batch 8, 197 tokens;
- ``resnet50-stage1``: ResNet-50's first bottleneck stage (3 blocks on 64 x 56 x 56), and
  ``resnet50`` the whole network, batch 1 and 8, 224 x 224;
- float32 and bfloat16; forward (no grad, eval mode), and forward + backward
  (``fwd_bwd``) for BERT and ViT.

Two sweeps, not captured, give the curves: ``llama-prefill sweep`` (prompt 128-2048
tokens, tokens/s as items/s) and ``llama-decode sweep`` (one token after 128-4096
cached ones: decode throughput versus context length), parameters ``tokens`` and
``context`` on the x-axis, throughput in tokens/s (items; no bytes or FLOPs, see below).

``--tag quick`` keeps one size per model, float32 forward, without the compiled
wholes (compiling a layer takes 20-90 s here, in every process that measures it):
135 points. Captures are kept in ``$BENCHBENCH_CACHE`` keyed by the model builders'
source (:mod:`benchbench.suite.model_zoo`), the capture's name, torch's and
transformers' versions, so a worker loads this suite from the cache instead of
building models (0.11-0.35 s). CPU only.
"""

import hashlib
from pathlib import Path
from typing import Any

import torch

from benchbench import Suite, Variant
from benchbench.suite import model_zoo
from benchbench.suite.captured import declare_capture
from benchbench.suite.inputs import SetupContext
from benchbench.suite.model_zoo import ModelCase, Shape

model_zoo.require_models_extra("zoo")

suite = Suite("zoo", description="Llama, BERT, ViT and ResNet-50, op by op", tags=["zoo"])

#: The builders' source: a capture's name says its model, shape, mode and dtype, so an
#: edit to this file's sweeps or docs keeps the cached captures (a run whose workers
#: found the file changed would otherwise capture every model again in each of them).
SOURCE_HASH = hashlib.sha256(Path(model_zoo.__file__).read_bytes()).hexdigest()[:16]
VERSION = model_zoo.models_version()
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: Many short points, as in `models`: 0.3 s each keeps a quick run within 5 minutes
#: on 2 cores (the wholes take longer: a point always gets its minimum of samples).
BUDGET_S = 0.3

#: (model, shapes, modes); the first shape is the quick one.
CASES: list[tuple[str, list[Shape], tuple[str, ...]]] = [
    ("llama-prefill", [Shape(1, 128), Shape(1, 512), Shape(1, 2048)], ("fwd",)),
    ("llama-decode", [Shape(1, 0, 512), Shape(1, 0, 4096)], ("fwd",)),
    ("bert", [Shape(8, 128), Shape(8, 512)], ("fwd", "fwd_bwd")),
    ("vit", [Shape(8, model_zoo.VIT_TOKENS)], ("fwd", "fwd_bwd")),
    ("resnet50-stage1", [Shape(1), Shape(8)], ("fwd",)),
    ("resnet50", [Shape(1), Shape(8)], ("fwd",)),
]


def case_name(model: str, shape: Shape, mode: str, dtype: str) -> str:
    """``llama-decode-ctx4096-fwd-bfloat16``: the capture's name and its workloads' prefix."""
    if shape.context:
        dims = f"ctx{shape.context}"
    elif shape.tokens and model != "vit":
        dims = f"b{shape.batch}-s{shape.tokens}"
    else:
        dims = f"b{shape.batch}"
    return f"{model}-{dims}-{mode}-{dtype}"


for model, shapes, modes in CASES:
    for i, shape in enumerate(shapes):
        for mode in modes:
            for dtype_name, dtype in DTYPES.items():
                name = case_name(model, shape, mode, dtype_name)
                case = ModelCase(model, shape, dtype, mode)
                quick = i == 0 and mode == "fwd" and dtype_name == "float32"
                declare_capture(
                    suite,
                    name,
                    case.run,
                    case.inputs,
                    prefix=f"{name} ",
                    cache_key=f"zoo {SOURCE_HASH} transformers {VERSION} {name}",
                    budget_s=BUDGET_S,
                    tags=["quick"] if quick else (),
                    # A compiled decode step recompiles at every call (the DynamicCache's
                    # tensors are new objects after each step: 1.9 s a call against 144 ms
                    # eager, BENCHMARKS.md), so it would time recompilation: left out.
                    compile=model != "llama-decode",
                    compile_tags=["compile"],
                )


def _sweep_setup(model: str) -> Any:
    def setup(ctx: SetupContext) -> tuple[Any, torch.Tensor]:
        if model == "llama-decode":
            shape = Shape(1, 0, int(ctx.point["context"]))
        else:
            shape = Shape(1, int(ctx.point["tokens"]))
        case = ModelCase(model, shape, getattr(torch, ctx.point.dtype), "fwd")
        return case.run, case.inputs()

    return setup


def _call(run: Any, x: torch.Tensor) -> Any:
    return run(x)


#: (model, axis, its values, tokens produced per call): the prompt for prefill, one
#: token for a decode step.
SWEEPS = (
    ("llama-prefill", "tokens", [128, 256, 512, 1024, 2048], lambda p: p["tokens"]),
    ("llama-decode", "context", [128, 256, 512, 1024, 2048, 4096], lambda p: 1),
)

for model, axis, values, tokens in SWEEPS:
    suite.workload(
        f"{model} sweep",
        setup=_sweep_setup(model),
        variants=[Variant("eager", _call, description="the decoder layer, eager")],
        sizes=[1],
        dtypes=list(DTYPES),
        params={axis: values},
        x=axis,
        # Throughput in tokens/s: items only. Derived bytes would miss the weights (not
        # inputs), and with FLOPs beside bytes the plot would pick GFLOP/s.
        items=tokens,
        derive=False,
        check=False,
        tags=["sweep"],
        budget_s=1.0,
        description=f"one TinyLlama decoder layer, eager: tokens/s against {axis}",
    )
