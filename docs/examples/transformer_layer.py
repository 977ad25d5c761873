"""The example of README's "Where does my model's time go?": one transformer layer.

    benchbench capture docs/examples/transformer_layer.py:forward \
        --args-from make_inputs -o transformer_ops.py
"""

import torch

torch.manual_seed(0)
# dropout 0 and training mode: eval mode under no_grad takes the fused fast path,
# one opaque aten._transformer_encoder_layer_fwd call with nothing to break down.
layer = torch.nn.TransformerEncoderLayer(
    256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True
)


def forward(x):
    with torch.no_grad():
        return layer(x)


def make_inputs():
    return (torch.randn(8, 128, 256),)
