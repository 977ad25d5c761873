"""operator_benchmark test modules as suites (benchbench.suite.opbench)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from benchbench.core.errors import SuiteError, UsageError
from benchbench.measure.point import Options, measure_point
from benchbench.measure.policy import Policy
from benchbench.suite import opbench
from benchbench.suite.declare import Skip, Workload
from benchbench.suite.inputs import SetupContext
from benchbench.suite.load import Selection, load_suite, resolve_suite, select_points
from benchbench.suite.opbench_api import config_list, cross_product_configs, stand_in

DATA = Path(__file__).resolve().parents[1] / "data" / "operator_benchmark"
UNARY = DATA / "pt" / "unary_test.py"
ADD = DATA / "pt" / "add_test.py"
MISC = DATA / "pt" / "misc_test.py"

#: Names upstream gives these configs, as published in its
#: expected_ci_operator_benchmark_eager_float32_cpu.csv.
UPSTREAM_NAMES = [
    "add_M1_N1_K1_cpu",
    "add_M64_N64_K64_cpu",
    "add_M64_N64_K128_cpu",
    "add_M1_N1_K1_cpu_dtype_onetorch.int32_dtype_twotorch.int32",
    "add_M64_N64_K64_cpu_dtype_onetorch.int32_dtype_twotorch.int32",
    "cat_sizes(1,1,1)_N2_dim0_cpu",
    "cat_sizes(512,512,2)_N2_dim1_cpu",
    "diag_dim1_M64_N64_diagonal0_outTrue_cpu",
    "diag_dim2_M128_N128_diagonal-10_outFalse_cpu",
    "channel_shuffle_batch_size2_channels_per_group16_height16_width16_groups2_channel_lastTrue",
]


def _upstream_name(workload: Workload) -> str:
    return workload.description.split()[2]


def _workload(path: Path, name: str) -> Workload:
    return load_suite(path).get(name)


def test_tests_are_named_as_upstream_names_them():
    upstream = {_upstream_name(w) for p in (ADD, MISC) for w in load_suite(p).workloads}
    assert set(UPSTREAM_NAMES) <= upstream
    names = {w.name for w in load_suite(UNARY).workloads}
    assert {"sqrt_M512_N512_cpu", "exp__M1024_N256_cuda", "bernoulli__M256_N1024_cpu"} <= names


def test_names_with_characters_labels_reserve_keep_upstream_in_the_description():
    workload = _workload(MISC, "cat_sizes{1;1;1}_N2_dim0_cpu")
    assert _upstream_name(workload) == "cat_sizes(1,1,1)_N2_dim0_cpu"
    assert "misc_test.py, line" in workload.description


def test_every_forward_test_is_one_point_on_its_own_device():
    suite = load_suite(UNARY)
    points = [p for w in suite.workloads for p in w.points()]
    # 5 operators x (1 short + 4 long configs) x 2 devices, one point each
    assert len(points) == 5 * 5 * 2 == len(suite.workloads)
    assert sum(p.device == "cpu" for p in points) == 25
    point = _workload(UNARY, "sqrt_M512_N512_cpu").points()[0]
    assert point.label == "sqrt_M512_N512_cpu:forward[float32, cpu](n=512x512, M=512, N=512)"
    assert point.suite == "opbench.unary_test"
    assert _workload(UNARY, "sqrt_M512_N512_cpu").tags == ("short",)
    assert _workload(UNARY, "sqrt_M256_N1024_cuda").tags == ("long",)


def test_dtype_and_shape_come_from_the_first_tensor_input():
    ints = _workload(ADD, "add_M64_N64_K64_cpu_dtype_onetorch.int32_dtype_twotorch.int32")
    (point,) = ints.points()
    assert (point.dtype, point.shape) == ("int32", (64, 64, 64))
    assert point["dtype_one"] == "torch.int32"  # JSON-safe parameter
    (cat,) = _workload(MISC, "cat_sizes{512;512;2}_N2_dim1_cpu").points()
    assert cat.shape == (512, 512, 2)  # the first tensor of a list input
    (shuffle,) = _workload(
        MISC,
        "channel_shuffle_batch_size2_channels_per_group16_height16_width16_groups2_channel_lastTrue",
    ).points()
    assert shuffle.device == "cpu" and shuffle["channel_last"] is True


def test_device_and_dtype_flags_keep_tests_instead_of_moving_them():
    suite = load_suite(UNARY)
    on_cpu = select_points([suite], Selection(devices=("cpu",)))
    assert len(on_cpu) == 25 and {p.device for _, p in on_cpu} == {"cpu"}
    assert {w.name.endswith("_cpu") for w, _ in on_cpu} == {True}
    assert select_points([suite], Selection(dtypes=("float64",))) == []
    ints = select_points([load_suite(ADD)], Selection(dtypes=("int32",)))
    assert len(ints) == 2


def test_setup_calls_init_seeded_and_the_timed_call_is_forward():
    workload = _workload(UNARY, "sqrt_M512_N512_cpu")
    (point,) = workload.points()
    first = workload.setup(SetupContext(point))
    again = workload.setup(SetupContext(point))
    op, x = first
    assert x.shape == (512, 512) and torch.equal(x, again[1])  # same seed, same data
    assert torch.equal(workload.variants[0].fn(op, x), torch.sqrt(x))
    other = workload.setup(SetupContext(_workload(UNARY, "abs_M512_N512_cpu").points()[0]))
    assert not torch.equal(other[1], x)  # seeded by the point


def test_a_failing_init_is_a_skip_with_its_reason():
    workload = _workload(MISC, "EvenOnlyBenchmark_M3_cpu")
    with pytest.raises(Skip, match="init raised ValueError: M must be even, got 3"):
        workload.setup(SetupContext(workload.points()[0]))
    result = measure_point(workload, workload.points()[0], Options())
    assert (result.status, result.reason) == (
        "skipped",
        "init raised ValueError: M must be even, got 3",
    )


def test_a_gradient_test_times_the_backward_of_its_inputs_marked_by_auto_set():
    workload = _workload(ADD, "add_M64_N64_K64_cpu_bwdall")
    (point,) = workload.points()
    assert point.variant == "backward" and point["mode"] == "bwd"
    _op, one, two = workload.setup(SetupContext(point))
    assert one.requires_grad and two.requires_grad  # auto_set() in a gradient test
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.05)))
    assert result.status == "ok", result.reason
    assert result.extra["backward"].startswith("bwd: ")
    assert "of 2 leaf input(s)" in result.extra["backward"]  # input_one and input_two
    forward = _workload(ADD, "add_M64_N64_K64_cpu")
    assert forward.setup(SetupContext(forward.points()[0]))[1].requires_grad is False


def test_a_cuda_test_without_cuda_is_skipped(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    workload = _workload(UNARY, "sqrt_M512_N512_cuda")
    result = measure_point(workload, workload.points()[0], Options(policy=Policy()))
    assert (result.status, result.reason) == ("skipped", "CUDA is not available")


def _module(root: Path, body: str) -> Path:
    (root / "pt").mkdir(parents=True, exist_ok=True)
    path = root / "pt" / "x_test.py"
    path.write_text("import operator_benchmark as op_bench\nimport torch\n" + body)
    return path


SIMPLE = """
from pt import helper

class Neg(op_bench.TorchBenchmarkBase):
    def init(self, M, device):
        self.inputs = {"x": torch.rand(M, device=device)}

    def forward(self, x):
        return torch.neg(x)

op_bench.generate_pt_test(op_bench.cross_product_configs(M=[helper.M], device=["cpu"],
                                                         tags=["t"]), Neg)
"""


def test_the_import_restores_sys_modules_and_sys_path(tmp_path):
    root = tmp_path / "operator_benchmark"
    path = _module(root, SIMPLE)
    (root / "pt" / "helper.py").write_text("M = 8\n")
    (root / "pt" / "__init__.py").write_text("")
    sentinel = types.ModuleType("operator_benchmark")
    sys.modules["operator_benchmark"] = sentinel
    path_before = list(sys.path)
    try:
        suite = opbench.load(path)
        assert sys.modules["operator_benchmark"] is sentinel
    finally:
        del sys.modules["operator_benchmark"]
    assert [w.name for w in suite.workloads] == ["Neg_M8_cpu"]
    assert sys.path == path_before
    assert "pt.helper" not in sys.modules and "pt" not in sys.modules
    opbench.load(path)
    assert "operator_benchmark" not in sys.modules


def test_the_real_package_beside_the_test_is_not_imported(tmp_path):
    root = tmp_path / "operator_benchmark"
    path = _module(root, SIMPLE.replace("from pt import helper", "M = 4"))
    path.write_text(path.read_text().replace("helper.M", "M"))
    (root / "operator_benchmark.py").write_text("raise ImportError('needs a C++ extension')\n")
    suite = opbench.load(path)
    assert [w.name for w in suite.workloads] == ["Neg_M4_cpu"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("opbench:{tmp}/missing.py", "does not exist; give the path of an operator_benchmark"),
        ("opbench:{tmp}", "is a folder; give one test module in it"),
        ("opbench:{tmp}/plain.py", "is not an operator_benchmark test: it does not `import"),
        ("opbench:", "names no file"),
    ],
)
def test_a_bad_path_is_a_usage_error_naming_it(tmp_path, spec, message):
    (tmp_path / "plain.py").write_text("import torch\n")
    spec = spec.format(tmp=tmp_path)
    with pytest.raises(UsageError, match="give") as caught:
        resolve_suite(spec)
    assert message in str(caught.value) and repr(spec) in str(caught.value)


def test_resolve_gives_the_module_path():
    assert resolve_suite(f"opbench:{UNARY}") == UNARY


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x = 1\n", "registers no test: call op_bench.generate_pt_test"),
        ("op_bench.no_such_helper()\n", "line 3: AttributeError: operator_benchmark.no_such"),
        ("def broken(:\n", "line 3: syntax error"),
    ],
)
def test_a_bad_module_is_a_suite_error_naming_file_and_line(tmp_path, body, message):
    path_before = list(sys.path)
    with pytest.raises(SuiteError, match="operator_benchmark test") as caught:
        opbench.load(_module(tmp_path, body))
    assert message in str(caught.value)
    assert "operator_benchmark" not in sys.modules and sys.path == path_before


def test_configs_are_upstream_lists_of_one_key_dicts():
    listed = config_list(
        attr_names=["M", "N"],
        attrs=[[1, 2], [3, 4]],
        cross_product_configs={"device": ["cpu", "cuda"]},
        tags=["short"],
    )
    assert listed[1] == [{"M": 1}, {"N": 2}, {"tags": "short"}, {"device": "cuda"}]
    assert len(listed) == 4
    crossed = cross_product_configs(M=[1, 2], device=["cpu"], tags=["long"])
    assert crossed == [
        ({"M": 1}, {"device": "cpu"}, {"tags": "long"}),
        ({"M": 2}, {"device": "cpu"}, {"tags": "long"}),
    ]
    with pytest.raises(ValueError, match="device must be one of cpu, cuda, mps, got 'tpu'"):
        cross_product_configs(device=["tpu"], tags=["x"])


def test_random_sample_configs_are_the_same_in_every_process():
    module, _ = stand_in()
    draw = {
        "M": [1, 2, 3],
        "N": [4, 5],
        "probs": module.attr_probs(M=[0.5, 0.3, 0.2], N=[0.9, 0.1]),
        "total_samples": 6,
        "tags": ["short"],
    }
    first = module.random_sample_configs(**draw)
    assert first == module.random_sample_configs(**draw)
    assert len(first) == 6 and first[0][-1] == {"tags": "short"}
    assert {c[0]["M"] for c in first} <= {1, 2, 3}


def test_an_in_place_test_is_restored_before_every_call_not_fed_its_own_output():
    # Upstream calls exp_ on one tensor again and again: exp of +inf from the 4th call.
    workload = _workload(UNARY, "exp__M512_N512_cpu")
    (exp_,) = workload.variants
    assert exp_.inplace and not _workload(UNARY, "sqrt_M512_N512_cpu").variants[0].inplace
    (point,) = workload.points()
    result = measure_point(workload, point, Options(policy=Policy(max_time_s=0.05)))
    assert result.status == "ok", result.reason
    # Measured as an in-place variant: working copies restored untimed before each call.
    assert result.extra["inplace"] and result.extra["inplace_copies"] >= 1
