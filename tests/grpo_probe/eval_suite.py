"""The calendar's scenarios, unchanged (``train grpo`` makes its prompts from them)."""

from tools.calendar.lab.eval_suite import load_eval_suite

__all__ = ["load_eval_suite"]
