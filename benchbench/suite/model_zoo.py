"""Real architectures at their published shapes, built from configs with random weights.

The ``zoo`` suite (``suites/zoo.py``) captures these callables at load
(:func:`benchbench.suite.captured.declare_capture`). Each :class:`ModelCase` is one
model at one shape, dtype and mode: :meth:`ModelCase.inputs` builds the module (on its
first call, so that a worker that reads the capture from the cache and times one aten
call never imports ``transformers``: 3.4 s an import on our 2-core CPU) and returns the
callable's input; :meth:`ModelCase.run` is the callable.

Every model comes from ``transformers`` config objects (``LlamaConfig``, ``BertConfig``,
``ViTConfig``, ``ResNetConfig``): nothing is downloaded, ever (``HF_HUB_OFFLINE=1`` is
set before the import, and no ``from_pretrained`` is called). A config or a class the
installed version does not know raises here, inside the capture's input factory, and
the capture becomes a skipped workload with the reason.

ResNet-50 comes from ``transformers`` too, not ``torchvision``: the only torchvision
built for torch 2.13.0 (0.28.0) is linked against the CUDA build of torch
(``libtorch_cuda.so``) and cannot even be imported beside the CPU build, and a broken
torchvision breaks ``import transformers`` with it (its image utilities import it).
``ResNetConfig()``'s defaults are ResNet-50's (bottleneck stages of depth 3, 4, 6, 3,
widths 256 to 2048).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchbench.core.errors import UsageError

#: The extra that installs the model definitions, and what it pins (pyproject.toml).
INSTALL = "pip install 'benchbench[models]'"
REQUIREMENT = "transformers>=5.17,<5.25"

#: TinyLlama-1.1B's published config (TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T,
#: config.json): hidden 2048, 32 query heads of 64, 4 key/value heads (grouped-query
#: attention, 8 queries per KV head), SiLU MLP of 5632, RMSNorm eps 1e-5, RoPE theta 1e4.
LLAMA: dict[str, Any] = {
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "intermediate_size": 5632,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 2048,
    "num_hidden_layers": 1,
}
LLAMA_HIDDEN, LLAMA_KV_HEADS, LLAMA_HEAD_DIM = 2048, 4, 2048 // 32
#: Parameters of one layer: q and o 2048 x 2048, k and v 2048 x 256, gate, up and down
#: 2048 x 5632, two RMSNorm weights of 2048: 44.0 M (176 MB in float32).
LLAMA_LAYER_PARAMS = 2 * 2048 * 2048 + 2 * 2048 * 256 + 3 * 2048 * 5632 + 2 * 2048


def llama_decode_bytes(context: int, itemsize: int) -> float:
    """Bytes a decode step moves: every weight once (what bounds decoding: 176 MB in
    float32), and the KV cache three times (``cat`` reads the past and writes past +
    1, attention reads it again: 3 x 2 x 4 heads x 64 x context elements)."""
    kv = 2 * LLAMA_KV_HEADS * LLAMA_HEAD_DIM * context
    return float((LLAMA_LAYER_PARAMS + 3 * kv) * itemsize)


def llama_prefill_bytes(tokens: int, itemsize: int) -> float:
    """Bytes a prefill moves at least: every weight once, the hidden states in and out."""
    return float((LLAMA_LAYER_PARAMS + 2 * tokens * LLAMA_HIDDEN) * itemsize)


#: ViT-B/16 at 224 x 224: 14 x 14 patches plus the class token.
VIT_TOKENS = 197


def require_models_extra(suite: str) -> None:
    """Raise a :class:`UsageError` naming the install command when ``transformers`` is
    not installed (a spec lookup, ~1 ms: the import itself waits for a model's build)."""
    if importlib.util.find_spec("transformers") is None:
        raise UsageError(
            f"suite {suite!r} needs the model definitions of the models extra "
            f"({REQUIREMENT}), which is not installed; install it with: {INSTALL}"
        )


def models_version() -> str:
    """The installed ``transformers`` version, part of every capture's cache key."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return "absent"


def _transformers() -> Any:
    # Never reach the Hub: every model here is built from a config object.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    return transformers


def _config(name: str, *, sdpa: bool = True, **fields: Any) -> Any:
    """``transformers.<name>(**fields)``, with SDPA attention unless ``sdpa=False`` (a
    model without attention refuses one); a name this version lacks is an error naming
    it and the installed version."""
    transformers = _transformers()
    cls = getattr(transformers, name, None)
    if cls is None:
        raise RuntimeError(
            f"transformers {transformers.__version__} has no {name}; "
            f"the zoo is written for {REQUIREMENT}"
        )
    config = cls(**fields)
    if not sdpa:
        return config
    # SDPA is transformers' default for whole models; a bare layer built from a config
    # has no implementation chosen and would fail at its first attention.
    config._attn_implementation = "sdpa"
    return config


def _module(path: str, name: str) -> Any:
    """``transformers.<path>.<name>``, e.g. the Llama decoder layer class."""
    _transformers()
    module = importlib.import_module(f"transformers.{path}")
    cls = getattr(module, name, None)
    if cls is None:
        raise RuntimeError(f"transformers.{path} has no {name} in this version")
    return cls


def _tensor(out: Any) -> torch.Tensor:
    """The hidden states a layer returned (a tensor in transformers 5, a tuple in 4)."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    return out[0]


@dataclass(frozen=True)
class Shape:
    """What varies between the cases of one model: batch, tokens (or pixels) and the
    KV cache length of a decode step."""

    batch: int = 1
    tokens: int = 0
    context: int = 0


class ModelCase:
    """One model at one shape, dtype and mode (``fwd``: forward under ``no_grad`` in
    eval mode; ``fwd_bwd``: forward and ``out.sum().backward()`` in training mode with
    dropout 0, so that it computes what eval does)."""

    def __init__(self, model: str, shape: Shape, dtype: torch.dtype, mode: str) -> None:
        if model not in BUILDERS:
            raise UsageError(f"model {model!r} is not in the zoo; known: {', '.join(BUILDERS)}")
        self.model, self.shape, self.dtype, self.mode = model, shape, dtype, mode
        self.fn: Callable[[torch.Tensor], Any] | None = None

    def inputs(self) -> torch.Tensor:
        """Build the model (once) and return a fresh input from the global generator."""
        if self.fn is None:
            self.fn, self.input_shape = BUILDERS[self.model](self.shape, self.dtype, self.mode)
        return torch.randn(self.input_shape, dtype=self.dtype)

    def run(self, x: torch.Tensor) -> Any:
        """The callable that is captured and timed whole."""
        if self.fn is None:
            raise RuntimeError(f"{self.model}: call inputs() before run()")
        return self.fn(x)


Built = tuple[Callable[[torch.Tensor], Any], tuple[int, ...]]


def _forward(module: torch.nn.Module, mode: str, **kwargs: Any) -> Callable[..., Any]:
    """``module`` wrapped for ``mode`` (see :class:`ModelCase`)."""
    module.train(mode == "fwd_bwd")
    if mode == "fwd_bwd":

        def fwd_bwd(x: torch.Tensor) -> None:
            _tensor(module(x, **kwargs)).sum().backward()

        return fwd_bwd

    def fwd(x: torch.Tensor) -> Any:
        with torch.no_grad():
            return module(x, **kwargs)

    return fwd


def llama_prefill(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """One TinyLlama decoder layer over a prompt of ``shape.tokens`` (causal SDPA, the
    rotary embedding computed once outside the timed call, as the model does per layer)."""
    torch.manual_seed(0)
    config = _config("LlamaConfig", **LLAMA)
    layer = _module("models.llama.modeling_llama", "LlamaDecoderLayer")(config, layer_idx=0)
    rope = _module("models.llama.modeling_llama", "LlamaRotaryEmbedding")(config)
    layer.to(dtype)
    hidden = (shape.batch, shape.tokens, LLAMA_HIDDEN)
    positions = torch.arange(shape.tokens)[None].expand(shape.batch, -1)
    cos, sin = rope(torch.empty(hidden, dtype=dtype), positions)
    return _forward(layer, mode, position_embeddings=(cos, sin)), hidden


def llama_decode(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """One TinyLlama decoder layer generating one token after ``shape.context`` cached
    ones, with transformers' ``DynamicCache`` as ``generate`` uses it: the step
    appends its key and value to the cache (``aten.cat``: the whole cache is copied,
    4 KV heads x 64 x context x 2 tensors) and attends over context + 1 positions.
    The step's own entry is cropped off again after the call (a view, no copy), so
    that every timed call sees the same context length."""
    if mode != "fwd":
        raise UsageError(f"llama-decode runs forward only, got mode {mode!r}")
    torch.manual_seed(0)
    config = _config("LlamaConfig", **LLAMA)
    llama = "models.llama.modeling_llama"
    layer = _module(llama, "LlamaDecoderLayer")(config, layer_idx=0).to(dtype).eval()
    rope = _module(llama, "LlamaRotaryEmbedding")(config)
    cache = _module("cache_utils", "DynamicCache")(config=config)
    past = (shape.batch, LLAMA_KV_HEADS, shape.context, LLAMA_HEAD_DIM)
    cache.update(torch.randn(past, dtype=dtype), torch.randn(past, dtype=dtype), 0)
    hidden = (shape.batch, 1, LLAMA_HIDDEN)
    positions = torch.full((shape.batch, 1), shape.context)
    embeddings = rope(torch.empty(hidden, dtype=dtype), positions)

    def decode(x: torch.Tensor) -> Any:
        with torch.no_grad():
            out = layer(x, position_embeddings=embeddings, cache=cache, use_cache=True)
        cache.crop(-1)  # drop the step's own key and value: the context stays fixed
        return out

    return decode, hidden


def bert_layer(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """One BERT-base encoder layer (``BertConfig()``: hidden 768, 12 heads, 3072)."""
    torch.manual_seed(0)
    config = _config("BertConfig", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    layer = _module("models.bert.modeling_bert", "BertLayer")(config).to(dtype)
    return _forward(layer, mode), (shape.batch, shape.tokens, config.hidden_size)


def vit_block(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """One ViT-B/16 encoder block (``ViTConfig()``: hidden 768, 12 heads, 3072)."""
    torch.manual_seed(0)
    config = _config("ViTConfig", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    layer = _module("models.vit.modeling_vit", "ViTLayer")(config).to(dtype)
    return _forward(layer, mode), (shape.batch, VIT_TOKENS, config.hidden_size)


def resnet_stage(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """ResNet-50's first bottleneck stage (3 blocks, 64 to 256 channels) on the
    stem's output, 64 x 56 x 56 for a 224 x 224 image; eval mode (running stats)."""
    torch.manual_seed(0)
    config = _config("ResNetConfig", sdpa=False)
    model = _module("models.resnet.modeling_resnet", "ResNetModel")(config)
    stage = model.encoder.stages[0].to(dtype)
    return _forward(stage, mode), (shape.batch, 64, 56, 56)


def resnet50(shape: Shape, dtype: torch.dtype, mode: str) -> Built:
    """ResNet-50 for ImageNet classification (1000 classes) on 224 x 224 images."""
    torch.manual_seed(0)
    config = _config("ResNetConfig", sdpa=False, num_labels=1000)
    cls = _module("models.resnet.modeling_resnet", "ResNetForImageClassification")
    model = cls(config).to(dtype)
    return _forward(model, mode), (shape.batch, 3, 224, 224)


BUILDERS: dict[str, Callable[[Shape, torch.dtype, str], Built]] = {
    "llama-prefill": llama_prefill,
    "llama-decode": llama_decode,
    "bert": bert_layer,
    "vit": vit_block,
    "resnet50-stage1": resnet_stage,
    "resnet50": resnet50,
}

__all__ = [
    "BUILDERS",
    "INSTALL",
    "ModelCase",
    "Shape",
    "llama_decode_bytes",
    "llama_prefill_bytes",
    "models_version",
    "require_models_extra",
]
