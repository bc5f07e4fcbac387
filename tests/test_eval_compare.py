"""Exact McNemar p-values and the paired comparison of two runs."""

from __future__ import annotations

from math import comb

import pytest

from agent.eval.compare import compare_outcomes, format_comparison, mcnemar_exact


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
