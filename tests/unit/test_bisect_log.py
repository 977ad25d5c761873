"""The bisect log that --resume continues: refused when it exists without --resume, is
missing with it, or was started with other arguments; its looks read back."""

from __future__ import annotations

import json

import pytest

from benchbench.analysis.bisect import DIFFERENT, SAME, Look
from benchbench.cli.bisect import LOG_VERSION, _read_log
from benchbench.core.errors import UsageError

HEADER = {"bisect_log": LOG_VERSION, "good": "a" * 40, "bad": "b" * 40, "rounds": 20}


def _write(path, header, looks):
    path.write_text(
        "\n".join(json.dumps(x) for x in [header, *(look.to_dict() for look in looks)]) + "\n"
    )


def test_a_new_search_refuses_a_log_that_exists(tmp_path):
    log = tmp_path / "b.jsonl"
    assert _read_log(log, HEADER, resume=False) == []
    _write(log, HEADER, [])
    with pytest.raises(UsageError, match=r"b.jsonl exists: add --resume"):
        _read_log(log, HEADER, resume=False)


def test_resume_reads_the_looks_back_and_refuses_other_arguments(tmp_path):
    log = tmp_path / "b.jsonl"
    with pytest.raises(UsageError, match="--resume: no log at"):
        _read_log(log, HEADER, resume=True)
    looks = [Look("b" * 40, 1, DIFFERENT, 12.5, {"points": []}), Look("c" * 40, 1, SAME, 3.0)]
    _write(log, HEADER, looks)
    assert _read_log(log, HEADER, resume=True) == looks
    with pytest.raises(UsageError, match="started with other rounds"):
        _read_log(log, {**HEADER, "rounds": 10}, resume=True)
    log.write_text('{"something": "else"}\n')
    with pytest.raises(UsageError, match="is not a bisect log"):
        _read_log(log, HEADER, resume=True)


def test_a_selection_of_tuples_resumes_as_the_log_reads_it_back(tmp_path):
    """The header holds the selection as a dataclass gives it (tuples); the log reads it
    back from JSON (lists): the same arguments, so the resume goes on."""
    log = tmp_path / "b.jsonl"
    header = {**HEADER, "selection": {"filters": ("sqrt",), "tags": ()}}
    _write(log, header, [])
    assert _read_log(log, header, resume=True) == []


def test_a_resumed_logs_runs_are_pooled_into_the_next_look(tmp_path):
    """A resumed search's next look at a commit pools the runs the log's earlier looks of
    it name; a skipped look (no runs) adds nothing."""
    from benchbench.analysis.bisect import SKIP, UNKNOWN
    from benchbench.cli.bisect import _Step

    step = _Step(None, tmp_path, None, {}, None, tmp_path / "b.jsonl")  # type: ignore[arg-type]
    step.remember(
        [
            Look("c" * 40, 1, UNKNOWN, 80.0, {"runs": ["g1", "c1"]}),
            Look("c" * 40, 2, UNKNOWN, 80.0, {"runs": ["g2", "c2"]}),
            Look("d" * 40, 1, SKIP, 1.0, {"reason": "skipped: build failed"}),
        ]
    )
    assert step.runs == {"c" * 40: {1: ["g1", "c1"], 2: ["g2", "c2"]}}
