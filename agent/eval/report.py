"""Writes what a run leaves behind besides the episodes: summary.txt/json, errors.csv and by_wording.txt/json."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from agent.eval.by_wording import write_by_wording
from agent.eval.metrics import Row, format_table, rows_to_json, summarize
from agent.eval.record import EpisodeRecord

ERRORS_CSV = "errors.csv"
SUMMARY_TXT = "summary.txt"
SUMMARY_JSON = "summary.json"
FIXED_COLUMNS = ("prompt_id", "template", "sample", "success", "policy_ok", "completion", "tool_name",
                 "arguments", "tool_result", "call_count")


def error_rows(records: list[EpisodeRecord]) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per tool call (one per episode without calls), with every reward component."""
    components = sorted({k for r in records for k in r.verdict.components if k != "total"})
    columns = [*FIXED_COLUMNS, *components, "total", "verifier_error"]
    rows: list[dict[str, Any]] = []
    for r in records:
        verdict = r.verdict
        common = {
            "prompt_id": r.scenario_id, "template": r.template, "sample": r.sample,
            "success": verdict.success, "policy_ok": verdict.policy_ok, "call_count": len(r.calls),
            **{c: verdict.components.get(c, "") for c in components},
            "total": verdict.components.get("total", verdict.reward),
            "verifier_error": " | ".join([*verdict.violations, *verdict.errors]),
        }
        if not r.calls:
            rows.append({**common, "completion": r.last_output(), "tool_name": "", "arguments": "", "tool_result": ""})
        for call in r.calls:
            rows.append({
                **common, "completion": call.raw_output, "tool_name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False), "tool_result": call.result,
            })
    return columns, rows


def write_reports(
    out_dir: Path, records: list[EpisodeRecord], header: str = "", reference: tuple[str, ...] = ()
) -> list[Row]:
    rows = summarize(records, reference)
    table = format_table(rows)
    (out_dir / SUMMARY_TXT).write_text((header + "\n" if header else "") + table + "\n", encoding="utf-8")
    (out_dir / SUMMARY_JSON).write_text(
        json.dumps({"header": header, "rows": rows_to_json(rows)}, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    columns, csv_rows = error_rows(records)
    with (out_dir / ERRORS_CSV).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(csv_rows)
    write_by_wording(out_dir, records)  # success per wording beside it (by_wording.txt/json)
    return rows
