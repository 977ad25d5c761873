import operator_benchmark as op_bench
import torch

"""Pointwise unary operators, with the configs of upstream's pt/unary_test.py."""

unary_configs_short = op_bench.config_list(
    attr_names=["M", "N"],
    attrs=[[512, 512]],
    cross_product_configs={"device": ["cpu", "cuda"]},
    tags=["short"],
)

unary_configs_long = op_bench.cross_product_configs(
    M=[256, 1024], N=[256, 1024], device=["cpu", "cuda"], tags=["long"]
)


class UnaryOpBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device, op_func):
        self.inputs = {"input": torch.rand(M, N, device=device)}
        self.op_func = op_func

    def forward(self, input):
        return self.op_func(input)


def bernoulli_(input):
    return input.bernoulli_()


unary_ops = op_bench.op_list(
    attr_names=["op_name", "op_func"],
    attrs=[
        ["abs", torch.abs],
        ["sqrt", torch.sqrt],
        ["exp_", torch.exp_],
        ["neg", torch.neg],
        ["bernoulli_", bernoulli_],
    ],
)

op_bench.generate_pt_tests_from_op_list(
    unary_ops, unary_configs_short + unary_configs_long, UnaryOpBenchmark
)

if __name__ == "__main__":
    op_bench.benchmark_runner.main()
