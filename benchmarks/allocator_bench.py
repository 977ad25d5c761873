"""Allocator settings side by side: the same operators in fresh processes, one per setting.

Each setting runs in its own interpreter (the allocator is chosen at process start), one
torch thread, and prints the median time per call and the minor page faults per call
(``getrusage`` delta): a call that faults thousands of times is timing the kernel
zeroing fresh pages, not the operator. The settings are glibc's default (a dynamic mmap
threshold that moves with what the process did before), the two fixed thresholds
considered for workers, and Debian's jemalloc and tcmalloc preloaded.

Usage: ``python benchmarks/allocator_bench.py`` (numbers in BENCHMARKS.md).
"""

import os
import subprocess
import sys

CHILD = r"""
import resource, time, torch
torch.set_num_threads(1)
def median_ms_and_faults(fn, x, calls):
    for _ in range(3):
        fn(x)
    times = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        start = time.perf_counter(); fn(x); times.append(time.perf_counter() - start)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    times.sort()
    return times[len(times) // 2] * 1e3, faults / calls
for name, fn, log2 in [
    ("1/sqrt(x) 2^22", lambda x: 1 / torch.sqrt(x), 22),
    ("x+1 2^16", lambda x: x + 1, 16),
    ("x+1 2^22", lambda x: x + 1, 22),
]:
    x = torch.rand(2**log2) + 0.5
    ms, faults = median_ms_and_faults(fn, x, 2000 if log2 == 16 else 40)
    print(f"{name:16s} median {ms:8.3f} ms  faults/call {faults:7.1f}")
"""

LIB = "/usr/lib/x86_64-linux-gnu"
SETTINGS = {
    "glibc default (dynamic threshold)": {},
    "MMAP_THRESHOLD=64KiB TRIM=128KiB (fresh mappings)": {
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "MALLOC_TRIM_THRESHOLD_": "131072",
    },
    "MMAP_THRESHOLD=32MiB TRIM=64MiB (the workers' default)": {
        "MALLOC_MMAP_THRESHOLD_": str(2**25),
        "MALLOC_TRIM_THRESHOLD_": str(2**26),
    },
    "jemalloc": {"LD_PRELOAD": f"{LIB}/libjemalloc.so.2"},
    "tcmalloc": {"LD_PRELOAD": f"{LIB}/libtcmalloc_minimal.so.4"},
}

for name, env in SETTINGS.items():
    if "LD_PRELOAD" in env and not os.path.exists(env["LD_PRELOAD"]):
        print(f"== {name}: absent (apt-get install libjemalloc2 libtcmalloc-minimal4)")
        continue
    print("==", name, flush=True)
    subprocess.run([sys.executable, "-c", CHILD], env={**os.environ, **env}, check=True)
