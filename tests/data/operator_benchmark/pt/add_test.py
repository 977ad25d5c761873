import operator_benchmark as op_bench
import torch

"""add: forward and gradient tests, and integer inputs, as upstream's pt/add_test.py."""

add_short_configs = op_bench.config_list(
    attr_names=["M", "N", "K"],
    attrs=[[1, 1, 1], [64, 64, 64], [64, 64, 128]],
    cross_product_configs={"device": ["cpu", "cuda"]},
    tags=["short"],
)


class AddBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, K, device):
        self.inputs = {
            "input_one": torch.rand(M, N, K, device=device, requires_grad=self.auto_set()),
            "input_two": torch.rand(M, N, K, device=device, requires_grad=self.auto_set()),
        }
        self.set_module_name("add")

    def forward(self, input_one, input_two):
        return torch.add(input_one, input_two)


op_bench.generate_pt_test(add_short_configs, AddBenchmark)
op_bench.generate_pt_gradient_test(add_short_configs, AddBenchmark)

add_int_configs = op_bench.config_list(
    attr_names=["M", "N", "K"],
    attrs=[[1, 1, 1], [64, 64, 64]],
    cross_product_configs={
        "device": ["cpu"],
        "dtype_one": [torch.int32],
        "dtype_two": [torch.int32],
    },
    tags=["short"],
)


class AddIntBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, K, device, dtype_one, dtype_two):
        self.inputs = {
            "input_one": torch.randint(0, 100, (M, N, K), device=device, dtype=dtype_one),
            "input_two": torch.randint(0, 100, (M, N, K), device=device, dtype=dtype_two),
        }
        self.set_module_name("add")

    def forward(self, input_one, input_two):
        return torch.add(input_one, input_two)


op_bench.generate_pt_test(add_int_configs, AddIntBenchmark)
