"""One table, several outputs: never cut to `…`, markdown a job summary renders, CSV."""

from __future__ import annotations

import csv
import io

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn
from rich.text import Text

from benchbench.analysis.curves import CurveKey
from benchbench.cli.flags import progress_events
from benchbench.core.units import parse_shapes
from benchbench.core.values import Point
from benchbench.views.fits import curve_label
from benchbench.views.tables import (
    Column,
    Grid,
    console_for,
    csv_text,
    markdown,
    rich_table,
    write,
)

LABEL = "layer_norm_rowwise:torch.nn.functional.layer_norm[float32, cpu](n=64x768)"
REASON = "RuntimeError: setup refuses on purpose, the input is never made (at suite.py:6)"


def grid() -> Grid:
    return Grid.of(
        ["point", Column("median", "right"), Column("GB/s", "right"), "notes"],
        [
            [LABEL, "11.3 µs", "0.188", Text("not converged", style="yellow")],
            ["sum:torch.sum[float64, cpu](n=1024)", "error", "", Text(REASON, style="red")],
        ],
        title="run 1234 (nightly | 2026)",
        notes=["% of peak: no hardware profile; run `benchbench probe`"],
    )


def test_without_a_terminal_a_table_is_as_wide_as_its_content(monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()  # a file: no terminal
    write([grid()], "table", out, io.StringIO())
    text = out.getvalue()
    assert "…" not in text
    assert LABEL in text and REASON in text  # whole, on one line each
    assert max(len(line) for line in text.splitlines()) > 80
    assert "% of peak: no hardware profile; run `benchbench probe`" in text


def test_an_explicit_columns_is_honoured_without_a_terminal(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert console_for(io.StringIO()).width == 100
    monkeypatch.delenv("COLUMNS")
    assert console_for(io.StringIO()).width > 1000


def test_a_narrow_terminal_wraps_names_and_keeps_numbers_whole() -> None:
    out = io.StringIO()
    Console(file=out, width=60, force_terminal=True, color_system=None).print(rich_table(grid()))
    text = out.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "11.3 µs" in text and "0.188" in text  # a number is never folded
    # The label is all there, in pieces: the first column read top to bottom (wrapping
    # at a space drops that space).
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert LABEL.replace(" ", "") in "".join(cells)


def test_brackets_in_a_label_are_text_not_markup() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(rich_table(grid()))
    assert "[float32, cpu]" in out.getvalue() and "[float64, cpu]" in out.getvalue()


def test_markdown_is_a_github_table_with_special_characters_escaped() -> None:
    lines = markdown(grid()).splitlines()
    assert lines[0] == "**run 1234 (nightly \\| 2026)**"
    assert lines[2] == "| point | median | GB/s | notes |"
    assert lines[3] == "|:--|--:|--:|:--|"
    # [..](..) would be a link and _ italics: escaped, the text reads the same rendered.
    assert lines[4] == (
        "| layer\\_norm\\_rowwise:torch.nn.functional.layer\\_norm\\[float32, cpu\\](n=64x768)"
        " | 11.3 µs | 0.188 | not converged |"
    )
    assert lines[5].split(" | ")[2] == " "  # an empty cell stays a cell
    assert lines[-1] == "% of peak: no hardware profile; run \\`benchbench probe\\`  "


def test_csv_has_a_header_and_plain_cells_and_notes_go_to_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    write([grid(), grid()], "csv", out, err)
    blocks = out.getvalue().split("\n\n")
    assert len(blocks) == 2
    rows = list(csv.reader(io.StringIO(blocks[0])))
    assert rows[0] == ["point", "median", "GB/s", "notes"]
    assert rows[1] == [LABEL, "11.3 µs", "0.188", "not converged"]
    assert rows[2][3] == REASON
    assert err.getvalue().count("no hardware profile") == 2
    assert csv_text(grid()) == blocks[0] + "\n"


def test_json_is_not_a_table_format_and_rows_must_fit_the_columns() -> None:
    with pytest.raises(ValueError, match="table, markdown or csv"):
        write([grid()], "json", io.StringIO(), io.StringIO())
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Grid.of(["a", "b", "c"], [["1", "2"]])


def test_labels_name_dtype_and_device_for_points_and_curves() -> None:
    point = Point("s", "layer_norm", "F.layer_norm", 24576, (32, 768), "float16", "cuda:1")
    assert point.label == "layer_norm:F.layer_norm[float16, cuda:1](n=32x768)"
    keys = [
        CurveKey("s", "layer_norm", "F.layer_norm", "cpu", dtype, '{"eps": 1e-05}')
        for dtype in ("float32", "bfloat16")
    ]
    labels = [curve_label(k) for k in keys]
    assert labels == [
        "layer_norm:F.layer_norm[float32, cpu](eps=1e-05)",
        "layer_norm:F.layer_norm[bfloat16, cpu](eps=1e-05)",
    ]


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        ("1024,4096", [(1024,), (4096,)]),
        ("1000..5000", [(1000,), (1024,), (2048,), (4096,)]),
        ("64x1024", [(64, 1024)]),
        ("(64, 1024)", [(64, 1024)]),
        ("64x1024..8192", [(64, 1024), (64, 2048), (64, 4096), (64, 8192)]),
        ("1k..2kx3", [(1024, 3), (2048, 3)]),
        ("(64,1024),16,64x1024", [(16,), (64, 1024)]),
    ],
)
def test_sizes_take_shapes_and_a_range_on_one_dimension(text, shapes) -> None:
    assert parse_shapes(text) == shapes


def test_the_progress_line_names_the_point_with_dtype_and_device() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    columns = (TextColumn("{task.description}"), TextColumn("{task.fields[current]}"))
    with Progress(*columns, console=console, auto_refresh=False) as progress:
        on_event = progress_events(progress, "measuring")
        on_event("start", {"total": 3})
        on_event("point", {"label": "sqrt:torch.sqrt[float32, cpu](n=1024)"})
        progress.refresh()
    assert "measuring sqrt:torch.sqrt[float32, cpu](n=1024)" in out.getvalue()


def test_a_note_from_the_runner_is_printed_above_the_progress_line() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, color_system=None)
    with Progress(TextColumn("{task.description}"), console=console) as progress:
        on_event = progress_events(progress, "measuring")
        on_event("start", {"total": 1})
        on_event("note", {"message": "CUDA was initialised in the worker zygote [cuda:0]"})
    assert "note: CUDA was initialised in the worker zygote [cuda:0]" in out.getvalue()


def test_a_column_with_a_max_width_wraps_within_it_and_the_names_keep_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fits table's crossovers depend on the measurements (one more crossover made a
    line 175 wide on one machine): that column wraps, the curve names do not (written to a
    file with no $COLUMNS, as in a CI log)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    from benchbench.views.fits import CROSSOVERS_WIDTH, FIT_COLUMNS

    assert FIT_COLUMNS[-1].name == "crossovers" and FIT_COLUMNS[-1].max_width == CROSSOVERS_WIDTH
    name = "layer_norm_rowwise:torch.nn.functional.layer_norm[float32, cpu]"
    crossings = "\n".join(
        f"overtaken by manual_mean_and_variance_number_{k} from n≈{k}.2k (+3 more)"
        for k in range(4)
    )
    grid = Grid.of(FIT_COLUMNS, [(name, "3", "1.2 µs", "12.3 GB/s", "0.998", crossings)])
    out, err = io.StringIO(), io.StringIO()
    write([grid], "table", out, err)
    lines = out.getvalue().splitlines()
    assert any(name in line for line in lines)  # the name whole, on one line
    cells = [line.split("│")[-2] for line in lines if line.startswith("│")]
    assert len(cells) > 4 and max(len(c) for c in cells) <= CROSSOVERS_WIDTH + 2, out.getvalue()
    for k in range(4):  # every crossover still there, in words
        assert f"manual_mean_and_variance_number_{k}" in out.getvalue()
