"""Expert iteration's sampling weights: samples go where the adapter fails.

``weighted_pick`` chooses a round's train scenarios from the pool, each template's count in
proportion to its weight, its failure rate on dev with a floor, so that a template already right
keeps a few samples and none is forgotten.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from agent.train.ei_select import success_by_template, template_weights, weighted_pick


@dataclass(frozen=True)
class _S:
    id: str
    template: str


def _pool(per_template: dict[str, int]) -> list[_S]:
    return [_S(f"{t}-{i}", t) for t, n in per_template.items() for i in range(n)]


def test_counts_follow_the_weights_and_add_up_to_the_total() -> None:
    pool = _pool({"hard": 50, "medium": 50, "easy": 50})
    picked = weighted_pick(pool, {"hard": 1.0, "medium": 0.5, "easy": 0.25}, 35)
    assert len(picked) == 35 and len({s.id for s in picked}) == 35
    assert Counter(s.template for s in picked) == {"hard": 20, "medium": 10, "easy": 5}


def test_a_template_short_of_scenarios_gives_its_share_to_the_others() -> None:
    pool = _pool({"hard": 3, "easy": 40})
    picked = weighted_pick(pool, {"hard": 1.0, "easy": 0.2}, 20)
    assert Counter(s.template for s in picked) == {"hard": 3, "easy": 17}


def test_each_template_takes_its_first_scenarios_interleaved() -> None:
    pool = _pool({"a": 5, "b": 5})
    picked = weighted_pick(pool, {"a": 1.0, "b": 1.0}, 4)
    assert [s.id for s in picked] == ["a-0", "b-0", "a-1", "b-1"]


def test_a_template_without_a_dev_figure_gets_the_mean_weight() -> None:
    pool = _pool({"a": 30, "b": 30, "new": 30})
    picked = weighted_pick(pool, {"a": 1.0, "b": 0.2}, 30)
    assert Counter(s.template for s in picked) == {"a": 17, "b": 3, "new": 10}


def test_never_more_than_the_pool() -> None:
    pool = _pool({"a": 2, "b": 1})
    assert len(weighted_pick(pool, {"a": 1.0, "b": 1.0}, 10)) == 3


def test_the_floor_keeps_a_solved_template_in_the_sample() -> None:
    weights = template_weights({"solved": 100.0, "half": 50.0, "failed": 0.0}, floor=0.2)
    assert weights == {"solved": 0.2, "half": 0.5, "failed": 1.0}
    picked = weighted_pick(_pool({"solved": 40, "half": 40, "failed": 40}), weights, 17)
    assert Counter(s.template for s in picked) == {"solved": 2, "half": 5, "failed": 10}


def test_success_by_template_is_the_share_of_successful_episodes() -> None:
    @dataclass
    class V:
        success: bool

    @dataclass
    class R:
        template: str
        verdict: V

    records = [R("a", V(True)), R("a", V(False)), R("a", V(False)), R("a", V(True)), R("b", V(False))]
    assert success_by_template(records) == {"a": 50.0, "b": 0.0}  # type: ignore[arg-type]


def test_templates_of_equal_weight_get_equal_counts_give_or_take_one() -> None:
    """The seats left after the floors go one per template, not all to the first (a bug seen in the
    first run: one template got 20 where its equals got 8)."""
    weights = {f"t{i}": 1.0 for i in range(9)} | {"half": 0.5, "fifth": 0.2}
    picked = weighted_pick(_pool({t: 40 for t in weights}), weights, 120)
    counts = Counter(s.template for s in picked)
    equal = [counts[f"t{i}"] for i in range(9)]
    assert sum(counts.values()) == 120 and max(equal) - min(equal) <= 1
    assert counts["half"] < min(equal) and counts["fifth"] < counts["half"]
