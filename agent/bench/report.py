"""The bench's output: named figures with optional targets, printed as a table or as JSON.

Also the progress line on stderr and the machine description that goes into ``info``.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    """One measured number; ``target`` makes it pass/fail, otherwise it is informative."""

    key: str
    label: str
    value: float | None
    target: str = ""  # e.g. "<= 1.02"; empty when the figure is informative only
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or not self.target:
            return None
        op, bound = self.target.split()
        return self.value <= float(bound) if op == "<=" else self.value >= float(bound)


@dataclass
class Report:
    """Figures in the order they were measured (the table's order), plus run information."""

    figures: list[Figure] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, label: str, value: float | None, target: str = "", note: str = "") -> None:
        self.figures.append(Figure(key, label, None if value is None else round(float(value), 4), target, note))

    def as_json(self) -> dict[str, Any]:
        return {
            "figures": {f.key: f.value for f in self.figures},
            "targets": {f.key: f.target for f in self.figures if f.target},
            "met": {f.key: f.met for f in self.figures if f.target},
            "notes": {f.key: f.note for f in self.figures if f.note},
            "info": self.info,
        }

    def table(self) -> str:
        rows = [("figure", "value", "target", "met?")]
        for f in self.figures:
            met = {True: "yes", False: "NO", None: "-"}[f.met]
            value = "not measured" if f.value is None else f"{f.value:g}"
            rows.append((f.label, value, f.target or "-", met))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        notes = [f"  {f.label}: {f.note}" for f in self.figures if f.note]
        return "\n".join(lines + (["", "notes:"] + notes if notes else []))


def progress(message: str) -> None:
    """On stderr, so that ``--json`` keeps stdout a single JSON object."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the ratios were measured on: they are only comparable on the same kind of machine."""
    cpu = platform.processor() or ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}
