"""The defaults a command's ``--help`` quotes, in the leaf so that help imports nothing heavy.

``benchbench --help`` and every subcommand's help answer without importing torch (~1.2 s
on our 2-core machine), scipy or matplotlib (BENCHMARKS.md, "A CLI that answers at
once"), while the modules that use these numbers import them: the runner and the
measurement policy torch, the verdict and the rounds' statistics numpy and scipy. So the
numbers live here and those modules read them from here: one definition, quoted by the
help and used by the code.
"""

from __future__ import annotations

# -- measuring a point (benchbench.measure.policy.Policy) ----------------------------------

#: Sampling time cap per point, ``run --budget``: ``Policy.max_time_s``.
POLICY_MAX_TIME_S = 0.5
#: Stop when the median's 95 % CI half-width is this fraction of it, ``run --target``:
#: ``Policy.target_rel_ci``; the same target judges a run's two-level interval. 3 %:
#: within a process a point is precise to 0.5-2 % here while fresh processes of it
#: disagree by 1-20 %, so a tighter per-process target buys samples the headline
#: interval cannot use.
POLICY_TARGET_REL_CI = 0.03

#: The image formats plots are written in, chosen by the file's extension
#: (``views.plot.save_figure``; ``plot -o``, ``time --plot``, ``breakdown --plot``,
#: ``accuracy -o``).
PLOT_FORMATS = ("png", "svg", "pdf")

# -- a run (benchbench.run) ----------------------------------------------------------------

#: Rounds (fresh processes) per point by default (``run.rounds``). 5: on the 2-core EPYC,
#: quiet, one thread, three runs of the quick suite each took 46-48 s and held 77-92 % of
#: their points within ±5 % (median ±2.1-2.3 %), and three A/A comparisons of them
#: flagged nothing; at 3 rounds the same took 34-40 s with 26-55 % within ±5 % (median
#: ±4.3-7.9 %: t with 2 degrees of freedom is 4.30) and 2 of 3 A/A comparisons flagged a
#: point (BENCHMARKS.md, "A default run that reads true").
DEFAULT_ROUNDS = 5
#: Rounds of ``benchbench.bench()``: each one a fresh Python that imports torch (~2-3 s
#: on the 2-core EPYC), so a notebook's call stays within ~10 s at the cost of a wider
#: interval than a run's.
BENCH_ROUNDS = 3
#: Processes a point may take in all, by default, when its processes disagree beyond the
#: target: the run's sampling budget (``run.allocate``) decides which points get them,
#: and bounds what they cost. As many as the rounds (no extra processes) until the
#: interval covers drift between runs: with 10, two quiet runs of identical code flagged
#: 10 of 20 points (BENCHMARKS.md); ``--max-rounds`` opts in to the allocation.
DEFAULT_MAX_ROUNDS = 5
#: Torch threads in the workers unless ``--threads`` says otherwise (``run``, ``time``,
#: ``ab``). One: with one thread small and mid ops agree across fresh processes within
#: 1-5 % on our 2-core EPYC, with torch's two about one process in ten runs 17-39 % slow
#: (a parallel region waits for a descheduled thread), and torch.utils.benchmark.Timer
#: and operator_benchmark measure with one thread too. ``--threads all`` is torch's
#: default (one per core).
DEFAULT_THREADS = 1
#: ``--threads all``: torch's own default (one thread per core, or per pinned core).
ALL_THREADS = "all"
#: The kinds of run ``run --kind`` takes (``run.runner``).
RUN_KINDS = ("adhoc", "nightly", "ci")
#: ``probe --run-to-run``'s runs by default: three pairs (:mod:`benchbench.analysis.calibration`).
RUN_TO_RUN_RUNS = 4
#: Seconds a point may take before its worker is stopped and the point stored as a timeout,
#: unless ``--timeout`` is given (``run``).
RUN_TIMEOUT_S = 60.0
#: Seconds a ``torch.compile`` variant's point may take unless ``--timeout`` is given.
#: Each such point compiles afresh in its worker (dynamo reset, ``dynamic=False``): a
#: cold inductor compile of one small function took 17-90 s on our 2-core machine (a
#: C++ compile per kernel; on a GPU, Triton kernels), plus the ~8 s torch import of a
#: loaded machine and the point's own warm-up and samples (~2 s). 300 s is 3x the
#: slowest cold compile seen, where the 60 s default would cut most of them short.
COMPILE_TIMEOUT_S = 300.0
#: Sampling cap per point of ``benchbench time``: 13 sizes x 2 statements answer in
#: <= 30 s with the worker's start (BENCHMARKS.md, "benchbench time (issue 8)").
TIME_BUDGET_S = 0.5
#: Rounds of ``ab`` by default, each from fresh zygotes. Beside a noisy neighbour, on the
#: 2-core EPYC VM (BENCHMARKS.md, "ab: one layout per round"): 10 rounds kept 9 of 10
#: pairs of identical code clean but found +10 % at only 59 % of the points; 20 rounds
#: found it at 80 % (4 of 5 identical pairs clean). The paired test has ``rounds - 1``
#: degrees of freedom.
AB_ROUNDS = 20
#: Sampling time per point, side and round of ``ab`` (``--budget`` is this x rounds
#: unless given): what every round took in the measurements above.
AB_ROUND_S = 0.05
#: Samples a side takes of a point in one ``ab`` round at least (``run``'s processes take
#: 10): the paired test uses one median per side and round, and the rounds' spread is
#: its error, so a long call (60 ms at 2^22 elements) samples 3 times, not 10 times the
#: round's 0.05 s. A median of 3 still ignores one stray sample.
AB_MIN_SAMPLES = 3
#: Gigabytes the cache of sides built from commits (``ab --base-ref``, ``bisect``) holds
#: at most, unless ``$BENCHBENCH_SIDES_CACHE_GB`` says otherwise: about 50 sides of a
#: small package with their virtual environments (torch shared, never installed again).
SIDES_CACHE_GB = 5.0
#: Seconds the end of a run waits for its PostgreSQL server when it went away mid-run
#: (``$BENCHBENCH_STORE_RETRY_S``), before it names its spool for ``import``.
STORE_RETRY_S = 120.0

# -- the verdict (benchbench.analysis.verdict) -------------------------------------------

#: A change of the median by 5 % (either way, in log space) is what we call a change.
MIN_EFFECT = 0.05
#: Significance level; the interval is at ``1 - ALPHA`` = 95 %.
ALPHA = 0.05
#: The power at which ``compare`` states the smallest change a comparison could have
#: seen (its minimum detectable effect, :mod:`benchbench.analysis.detectable`): the
#: change the verdict finds in 80 % of comparisons like the one printed (Cohen's
#: convention, the usual figure of a power analysis).
POWER = 0.8
#: The smallest change of an instruction count that counts, either way (in log space,
#: as :data:`MIN_EFFECT`): no lower than twice what identical code varies between fresh
#: callgrind processes. With the C allocator's own instructions in the count, small
#: out-of-place calls moved by up to 2.2 % (its paths depend on the heap's history) and
#: this was 5 %; with them left out (:mod:`benchbench.measure.instructions`), four fresh
#: runs of the quick suite agreed within 0.52 % at every one of its 53 points (median
#: 0.01 %; BENCHMARKS.md, "Instruction counts without the allocator"). Twice 0.52 %,
#: rounded up to a whole percent: 2 %. Points of 2^16 elements and more may be judged at
#: 1 % (``--instructions-min-effect 0.01``).
INSTRUCTIONS_MIN_EFFECT = 0.02

# -- views ---------------------------------------------------------------------------------

#: The dtypes ``benchbench accuracy`` plots unless ``--dtype`` says otherwise.
ACCURACY_DTYPES = ("float16", "bfloat16", "float32")

# Environment variables the instrumented launcher (``run.instrumented``, in the runner,
# which never imports torch) sets for the worker's ``measure.instructions``: named here,
# in the leaf both import.
#: Where callgrind writes its dumps (``--callgrind-out-file``, without the ``.N``
#: callgrind appends to each dump).
OUT_FILE_VARIABLE = "BENCHBENCH_CALLGRIND_OUT"
#: Set when callgrind starts with its instrumentation off (``--instr-atstart=no``): the
#: ``callgrind_control`` program that switches it on before the first count. Python and
#: torch then import at valgrind's bare speed (31 s against 137 s for ``import torch`` on
#: a 2-core AVX2 EPYC).
CONTROL_VARIABLE = "BENCHBENCH_CALLGRIND_CONTROL"
#: What ``run --metric instructions --counter`` counts with, the default first: callgrind
#: (``run.instrumented``: every instruction, the C allocator's apart, ~50x slower) or the
#: CPU's own counter (``pmu``: ``machine.pmu``, natively, where the machine exposes one).
COUNTERS = ("callgrind", "pmu")
DEFAULT_COUNTER = COUNTERS[0]
