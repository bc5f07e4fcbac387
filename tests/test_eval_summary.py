"""The summary table: per template, the reference templates together, then overall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.eval import cli
from agent.eval.metrics import OVERALL, REFERENCE
from agent.eval.report import SUMMARY_JSON


def run_oracle(out: Path, templates: str) -> list[dict]:
    argv = ["--policy", "oracle", "--templates", templates, "--per-template", "4", "--no-progress", "--out", str(out)]
    assert cli.main(argv) == 0
    return json.loads((out / SUMMARY_JSON).read_text())["rows"]


def test_reference_row_counts_only_the_reference_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    rows = run_oracle(tmp_path / "mixed", "delete_request,missing_info,no_tool")
    assert [r["group"] for r in rows] == ["delete_request", "missing_info", "no_tool", REFERENCE, OVERALL]
    assert rows[3]["episodes"] == 8 and rows[4]["episodes"] == 10
    table = capsys.readouterr().out.splitlines()
    summary = [line for line in table if line.startswith((REFERENCE, OVERALL))]
    assert len(summary) == 2
    separator = table.index(summary[0]) - 1
    assert set(table[separator]) <= {"-", " "}


def test_no_reference_row_when_the_run_has_only_reference_templates(tmp_path: Path):
    rows = run_oracle(tmp_path / "core", "delete_request")
    assert [r["group"] for r in rows] == ["delete_request", OVERALL]
