"""Success by wording: a run's episodes grouped by their scenario's variant, beside the summary."""

from __future__ import annotations

import json
from pathlib import Path

from agent.eval import cli
from agent.eval.by_wording import ALL, BY_WORDING_JSON, BY_WORDING_TXT, WordingRow, format_by_wording, template_rows


def test_each_wording_weighs_the_same_in_a_templates_mean_however_many_episodes_it_had() -> None:
    rows = [WordingRow("t", "t/en2", 4, 3), WordingRow("t", "t/en4", 1, 0), WordingRow("u", "u/ko2", 2, 2)]
    t, u, everything = template_rows(rows)
    assert (t.template, t.wordings, t.episodes) == ("t", 2, 5)
    assert (t.mean_of_wordings, t.worst_wording, t.episode_success) == (37.5, 0.0, 60.0)
    assert (u.mean_of_wordings, u.worst_wording) == (100.0, 100.0)
    assert everything.template == ALL and everything.wordings == 3
    assert everything.mean_of_wordings == (75.0 + 0.0 + 100.0) / 3 and everything.episode_success == 5 / 7 * 100
    text = format_by_wording(rows)
    assert "t/en2  3/4  75 %" in text and "t/en4  0/1  0 %" in text


def test_an_eval_run_writes_the_test_split_by_wording(tmp_path: Path) -> None:
    """32 per template: the test split's three wordings per language. The policy that guesses a
    missing time fails every ``missing_info`` wording and solves the deletes."""
    base = ["--split", "test", "--templates", "missing_info,delete_request", "--per-template", "32", "--no-progress"]
    assert cli.main([*base, "--policy", "guesses_missing_time", "--out", str(tmp_path / "guess")]) == 0
    data = json.loads((tmp_path / "guess" / BY_WORDING_JSON).read_text(encoding="utf-8"))
    by_template = {row["template"]: row for row in data["templates"]}
    assert by_template["missing_info"]["wordings"] == by_template["delete_request"]["wordings"] == 6
    assert by_template["missing_info"]["mean_of_wordings"] == 0.0
    assert by_template["delete_request"]["mean_of_wordings"] == 100.0
    assert by_template[ALL]["wordings"] == 12 and by_template[ALL]["episodes"] == 16
    wordings = {row["wording"] for row in data["wordings"]}
    assert wordings == {f"{t}/{lang}{p}" for t in ("missing_info", "delete_request") for lang in ("en", "ko")
                        for p in (3, 6, 7)}
    assert "missing_info/ko7" in (tmp_path / "guess" / BY_WORDING_TXT).read_text(encoding="utf-8")
