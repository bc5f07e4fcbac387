"""BFCL v4's multi-turn cases, ground truth and function docs, read from the ``bfcl-eval`` package.

The files are JSON Lines inside the installed package (``bfcl_eval/data``). They are read here
directly: ``bfcl_eval.utils.load_file`` would do the same, but that module imports ``filelock``
and more, which the ``--no-deps`` install leaves out; only the data, the executable classes and
the multi-turn checker are used, and those import nothing heavy (``mpmath`` for ``MathAPI``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from typing import Any

BFCL_VERSION = "2026.3.23"  # the bfcl-eval release these files and the checker come from
# The multi-turn categories of BFCL v4 (its ``multi_turn_composite`` is commented out there).
CATEGORIES: tuple[str, ...] = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                               "multi_turn_long_context")
DEFAULT_CATEGORY = "multi_turn_base"


class BfclMissing(RuntimeError):
    """bfcl-eval is not installed: say how to install it, in one line."""


def _data_dir() -> Any:
    try:
        return files("bfcl_eval") / "data"
    except ModuleNotFoundError as exc:
        raise BfclMissing(
            f"the BFCL domain needs bfcl-eval: pip install --no-deps bfcl-eval=={BFCL_VERSION} mpmath==1.3.0"
        ) from exc


def _json_lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Case:
    """One BFCL test entry with its ground truth: the user turns, the world, the answer."""

    id: str
    category: str
    turns: tuple[str, ...]  # the user message of each turn, in order
    involved_classes: tuple[str, ...]
    initial_config: dict[str, Any]
    excluded_function: tuple[str, ...]
    ground_truth: tuple[tuple[str, ...], ...]  # Python call strings per turn, e.g. "cd(folder='document')"
    # miss_func: functions held out until a turn ({"3": ("sort",)}); that turn has no user message
    missed_function: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def long_context(self) -> bool:
        """BFCL loads the classes with extra filler state for this category (the checker does too)."""
        return "long_context" in self.category


def _turn_text(messages: list[dict[str, Any]], case_id: str) -> str:
    """A turn's user message; a miss_func turn has none, and BFCL's FC handlers send their own
    words with the held-out functions (``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``)."""
    if not messages:
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

        return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    if len(messages) != 1 or messages[0].get("role") != "user":
        raise ValueError(f"{case_id}: a turn that is not one user message ({len(messages)} messages)")
    return str(messages[0]["content"])


@lru_cache(maxsize=None)
def load_cases(category: str) -> tuple[Case, ...]:
    """Every case of one multi-turn category, in BFCL's order (``multi_turn_base_0`` first)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    root = _data_dir()
    answers = {a["id"]: a["ground_truth"] for a in _json_lines(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    cases = []
    for entry in _json_lines(root / f"BFCL_v4_{category}.json"):
        cases.append(Case(
            id=entry["id"], category=category,
            turns=tuple(_turn_text(t, entry["id"]) for t in entry["question"]),
            involved_classes=tuple(entry["involved_classes"]),
            initial_config=entry.get("initial_config", {}),
            excluded_function=tuple(entry.get("excluded_function", ())),
            ground_truth=tuple(tuple(turn) for turn in answers[entry["id"]]),
            missed_function={k: tuple(v) for k, v in entry.get("missed_function", {}).items()},
        ))
    return tuple(cases)


@lru_cache(maxsize=None)
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of one class (``data/multi_turn_func_doc``), as BFCL ships them."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(_json_lines(_data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))
