import operator_benchmark as op_bench

"""Configs shared by test modules, imported as ``from pt import configs``."""

cat_configs_short = op_bench.config_list(
    attr_names=["sizes", "N", "dim"],
    attrs=[[(1, 1, 1), 2, 0], [(512, 512, 2), 2, 1]],
    cross_product_configs={"device": ["cpu"]},
    tags=["short"],
)
