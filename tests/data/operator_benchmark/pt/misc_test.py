import operator_benchmark as op_bench
import torch

from pt import configs

"""Config values of every kind: tuples, bools, negatives, no device, a failing init."""


class CatBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, sizes, N, dim, device):
        self.inputs = {"tensors": [torch.rand(sizes, device=device) for _ in range(N)], "dim": dim}
        self.set_module_name("cat")

    def forward(self, tensors, dim: int):
        return torch.cat(tensors, dim=dim)


op_bench.generate_pt_test(configs.cat_configs_short, CatBenchmark)

diag_configs = op_bench.config_list(
    attr_names=["dim", "M", "N", "diagonal", "out"],
    attrs=[[1, 64, 64, 0, True], [2, 128, 128, -10, False]],
    cross_product_configs={"device": ["cpu"]},
    tags=["short"],
)


class DiagBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, dim, M, N, diagonal, out, device):
        self.inputs = {
            "input": torch.rand(M, N, device=device) if dim == 2 else torch.rand(M, device=device),
            "diagonal": diagonal,
            "out": out,
            "out_tensor": torch.tensor((), device=device),
        }
        self.set_module_name("diag")

    def forward(self, input, diagonal: int, out: bool, out_tensor):
        if out:
            return torch.diag(input, diagonal=diagonal, out=out_tensor)
        return torch.diag(input, diagonal=diagonal)


op_bench.generate_pt_test(diag_configs, DiagBenchmark)

shuffle_configs = op_bench.cross_product_configs(
    batch_size=[2],
    channels_per_group=[16],
    height=[16],
    width=[16],
    groups=[2],
    channel_last=[True, False],
    tags=["short"],
)


class ChannelShuffleBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, batch_size, channels_per_group, height, width, groups, channel_last):
        x = torch.rand(batch_size, channels_per_group * groups, height, width)
        if channel_last:
            x = x.contiguous(memory_format=torch.channels_last)
        self.inputs = {"input": x, "groups": groups}
        self.set_module_name("channel_shuffle")

    def forward(self, input, groups: int):
        return torch.nn.functional.channel_shuffle(input, groups)


op_bench.generate_pt_test(shuffle_configs, ChannelShuffleBenchmark)

even_configs = op_bench.cross_product_configs(M=[3, 4], device=["cpu"], tags=["odd"])


class EvenOnlyBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, device):
        if M % 2:
            raise ValueError(f"M must be even, got {M}")
        self.inputs = {"input": torch.rand(M, M, device=device)}

    def forward(self, input):
        return input.t().contiguous()


op_bench.generate_pt_test(even_configs, EvenOnlyBenchmark)
