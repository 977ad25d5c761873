"""merge_warnings: one warning per kind, with the worst process or the range of figures."""

from __future__ import annotations

from benchbench.core.notes import BUSY_PROCESS, merge_warnings, names_process


def _busy(name: str, pid: int, mean: float, peak: float) -> str:
    return f"{BUSY_PROCESS}: {name} (pid {pid}) at {mean:.0f}% CPU (max {peak:.0f}%)"


def test_busy_processes_merge_to_the_busiest_with_a_count_of_the_others() -> None:
    merged = merge_warnings(
        [_busy("kworker/0:1", 17, 11, 20), _busy("python3", 6750, 81, 95), _busy("sshd", 9, 12, 30)]
    )
    assert merged == [_busy("python3", 6750, 81, 95) + " (and 2 more)"]


def test_one_busy_process_seen_by_every_round_is_named_once_without_a_count() -> None:
    rounds = [_busy("python3", 6750, 40, 50), _busy("python3", 6750, 81, 95)]
    assert merge_warnings(rounds) == [_busy("python3", 6750, 40, 50)]  # same pid: one process


def test_page_fault_notes_merge_to_a_range_of_each_differing_figure() -> None:
    notes = [
        "each call maps ~420 KiB (105 page faults per call): much of the time is the kernel "
        "zeroing fresh pages; see --allocator",
        "each call maps ~405 KiB (101 page faults per call): much of the time is the kernel "
        "zeroing fresh pages; see --allocator",
        "each call maps ~412 KiB (103 page faults per call): much of the time is the kernel "
        "zeroing fresh pages; see --allocator",
    ]
    assert merge_warnings(notes) == [
        "each call maps ~405-420 KiB (101-105 page faults per call): much of the time is the "
        "kernel zeroing fresh pages; see --allocator"
    ]


def test_shared_figures_stay_as_they_are_and_ranges_order_numerically() -> None:
    merged = merge_warnings(
        [
            "not converged: CI ±9.5% of the median (time cap of 0.166667 s reached)",
            "not converged: CI ±10.2% of the median (time cap of 0.166667 s reached)",
        ]
    )
    # 9.5 < 10.2 numerically (as text "10.2" < "9.5"); the shared cap is not a range.
    assert merged == ["not converged: CI ±9.5-10.2% of the median (time cap of 0.166667 s reached)"]


def test_kinds_keep_the_order_they_first_appear_in_and_words_keep_them_apart() -> None:
    warnings = [
        "noisy: IQR is 12% of the median",
        _busy("a", 1, 20, 30),
        "process 1 of 3 failed: out of memory",
        "noisy: IQR is 15% of the median",
        "process 2 of 3 failed: timeout after 60 s",
        "noisy: IQR is 12% of the median",
    ]
    assert merge_warnings(warnings) == [
        "noisy: IQR is 12-15% of the median",
        _busy("a", 1, 20, 30),
        "process 1 of 3 failed: out of memory",
        "process 2 of 3 failed: timeout after 60 s",
    ]


def test_names_in_figures_and_sizes_are_words_not_figures() -> None:
    # float32 / 2^16 are not figures: texts that differ there are different warnings.
    a = "sample < 1 ms (12 µs, 1 call(s) per sample) for float32 at 2^16"
    b = "sample < 1 ms (14 µs, 1 call(s) per sample) for float32 at 2^16"
    c = "sample < 1 ms (14 µs, 1 call(s) per sample) for float16 at 2^20"
    assert merge_warnings([a, b, c]) == [
        "sample < 1 ms (12-14 µs, 1 call(s) per sample) for float32 at 2^16",
        c,
    ]


def test_gpu_processes_merge_per_kind_too() -> None:
    merged = merge_warnings(
        [
            "GPU 0 is also used by another process: python (pid 777)",
            "GPU 0 is also used by another process: Xorg (pid 12)",
        ]
    )
    assert merged == ["GPU 0 is also used by another process: python (pid 777) (and 1 more)"]


def test_nothing_in_nothing_out_and_duplicates_collapse() -> None:
    assert merge_warnings([]) == []
    assert merge_warnings(["x", "x"]) == ["x"]
    assert names_process(_busy("a", 1, 20, 30)) and not names_process("noisy: IQR is 12%")


def test_a_results_table_has_a_word_per_kind_and_its_footer_names_the_busy_process() -> None:
    from benchbench.views.results import results_grid
    from benchbench.views.run_notes import footer
    from benchbench.views.tables import plain

    row = {
        "workload": "add", "variant": "torch.add", "dtype": "float32", "device": "cpu",
        "size": 1024, "status": "ok", "median_s": 1e-3, "ci_low_s": 0.99e-3,
        "ci_high_s": 1.01e-3, "extra": {},
        "warnings": [  # three processes' warnings, as a stored row has them today
            "each call maps ~420 KiB (105 page faults per call): much of the time is ...",
            _busy("kworker/1:0", 31, 11, 12),
            "each call maps ~405 KiB (101 page faults per call): much of the time is ...",
            _busy("python3", 6750, 81, 95),
        ],
    }  # fmt: skip
    (cells,) = results_grid([row]).rows
    assert plain(cells[-1]) == "page faults, neighbour"
    (busy, verdict) = footer([row])
    assert busy.startswith("busy beside the run: kworker/1:0 (pid 31) at 11% CPU during 1 point")
    assert "python3 (pid 6750) at 81% CPU during 1 point" in busy
    assert verdict.startswith("verdict: 1 of 1 points within ±3 %, 1 within ±10 %, 0 unstable")
