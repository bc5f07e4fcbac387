"""Exact McNemar p-values and the paired comparison of two runs."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pytest

from agent.eval import cli
from agent.eval.compare import WordingChange, compare_outcomes, compare_wordings, format_comparison, mcnemar_exact


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),
        (5, 0, 2 / 32),
        (1, 5, 2 * 7 / 64),
        (3, 3, 1.0),  # 2·P(X ≤ 3) > 1 is capped
        (2, 10, 2 * (1 + 12 + 66) / 4096),
        (0, 1, 1.0),
    ],
)
def test_mcnemar_exact_values(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_large_counts_stay_exact() -> None:
    expected = 2 * sum(comb(100, i) for i in range(41)) / 2**100
    assert mcnemar_exact(40, 60) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_changes() -> None:
    a = {"x": True, "y": False, "z": False, "w": True, "only_a": True}
    b = {"x": True, "y": True, "z": False, "w": False, "only_b": False}
    result = compare_outcomes(a, b)
    assert (result.paired, result.both_success, result.both_failure) == (4, 1, 1)
    assert result.gained == ["y"] and result.lost == ["w"]
    assert (result.only_in_a, result.only_in_b) == (1, 1)
    assert result.p_value == 1.0
    text = format_comparison(result, "base", "tuned")
    assert "fail→success 1, success→fail 1" in text and "fail → success: y" in text and "unpaired" in text


def test_episodes_of_one_wording_count_as_one_vote_in_the_sign_test() -> None:
    """Five episodes of one wording flipping together are one vote, not five pairs: McNemar sees
    5 gained against 1 lost (p = 0.22), the wordings one better and one worse (p = 1)."""
    wording_of = {f"x{i}": "t/en3" for i in range(5)} | {f"y{i}": "t/ko3" for i in range(5)} | {"z": "u/en3"}
    a = {f"x{i}": False for i in range(5)} | {f"y{i}": True for i in range(5)} | {"z": True}
    b = {f"x{i}": True for i in range(5)} | {f"y{i}": i != 0 for i in range(5)} | {"z": True}
    result = compare_wordings(a, b, wording_of)
    assert result is not None and result.wordings == 3 and result.same == 1
    assert result.better == [WordingChange("t/en3", 5, 0, 5)] and result.worse == [WordingChange("t/ko3", 5, 5, 4)]
    assert result.p_value == 1.0
    episodes = compare_outcomes(a, b)
    assert (len(episodes.gained), len(episodes.lost)) == (5, 1) and episodes.p_value == pytest.approx(2 * 7 / 64)


def test_no_wording_vote_when_no_wording_has_two_paired_episodes_or_all_share_one() -> None:
    """One episode per wording: the votes would be McNemar's pairs again. One wording for all
    (BFCL's variant is its version): a single vote says nothing."""
    assert compare_wordings({"a": True, "b": False}, {"a": False, "b": False, "c": True},
                            {"a": "w1", "b": "w2", "c": "w3"}) is None
    assert compare_wordings({"a": True, "b": False}, {"a": False, "b": True}, {"a": "v4", "b": "v4"}) is None
    assert compare_wordings({"a": True, "b": False, "c": True}, {"a": False, "b": False, "c": True},
                            {"a": "w1", "b": "w1", "c": "w2"}) is not None


def test_eval_compare_prints_the_wording_votes_of_two_results_folders(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Two scripted runs of the test split (2 wordings × 2 scenarios per template): the policy
    that guesses a missing time fails both ``missing_info`` wordings and plays the oracle on the
    deletes, so 4 episodes and 2 wordings get worse."""
    base = ["--split", "test", "--templates", "missing_info,delete_request", "--per-template", "16", "--no-progress"]
    assert cli.main([*base, "--policy", "oracle", "--out", str(tmp_path / "oracle")]) == 0
    assert cli.main([*base, "--policy", "guesses_missing_time", "--out", str(tmp_path / "guess")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "oracle"), str(tmp_path / "guess")]) == 0
    out = capsys.readouterr().out
    assert "paired episodes: 8" in out and "fail→success 0, success→fail 4" in out and "McNemar p = 0.125" in out
    assert "better in 0, worse in 2, the same in 2" in out and "exact sign test p = 0.5" in out
    assert "worse: missing_info/en3 2/2→0/2, missing_info/ko3 2/2→0/2" in out
