"""Prefix-cache reuse through llama_cpp.server, per step, for the OpenAI backend's wire formats.

Not a test: the measurement behind docs/performance.md's "OpenAI backend" section. Starts
llama_cpp.server (verbose, so it logs "N prefix-match hit, remaining M prompt tokens to eval" per
request), runs one calendar turn of up to four steps and a second one-step turn through
OpenAIBackend, and prints each step's prompt tokens next to the server's reuse figures.

    PYTHONPATH=. python docs/measure_openai_prefix.py MODEL.gguf LABEL openai|text force|free

``force`` sends ``tool_choice`` naming search_events (llama_cpp.server then writes a native call
under a grammar), so a small model makes calls whatever it would write. Output and logs go to
/tmp/wt16-measure/.
"""
import json, re, subprocess, sys, time
from pathlib import Path
import httpx
from agent.backends.openai import OpenAIBackend
from agent.bench.peer_server import free_port
from agent.loop import Agent, Budgets
from agent.approval import DenyAll
from datetime import datetime
from zoneinfo import ZoneInfo
from tools.calendar import CalendarStore, build_registry
from agent.prompt import system_prompt
from tools.calendar.language import CALENDAR_LANGUAGE

model, label, wire, force = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "force"
OUT = Path("/tmp/wt16-measure")
OUT.mkdir(exist_ok=True)
log_path = Path(f"/tmp/wt16-measure/{label}-{wire}-{'force' if force else 'free'}.log")
port = free_port()
cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1", "--port", str(port),
       "--n_ctx", "8192", "--n_batch", "512", "--n_threads", "2", "--seed", "0", "--model_alias", "m", "--verbose", "True"]
with log_path.open("wb") as log:
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(360):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        SEOUL = ZoneInfo("Asia/Seoul")
        now = datetime(2026, 11, 30, 9, 0, tzinfo=SEOUL)
        store = CalendarStore(Path(f"/tmp/wt16-measure/{label}-{wire}.sqlite3"), tz="Asia/Seoul")
        backend = OpenAIBackend(f"http://127.0.0.1:{port}", "m", None, wire_format=wire, timeout=600)
        if force:
            backend.tool_choice = {"type": "function", "function": {"name": "search_events"}}
        agent = Agent(backend, build_registry(store, now=lambda: now), Budgets(max_steps=4, max_tokens=48))
        messages = [{"role": "system", "content": system_prompt(now, "Asia/Seoul", language=CALENDAR_LANGUAGE)},
                    {"role": "user", "content": "[09:00] What do I have on 2026-12-01?"}]
        turn = agent.run_turn(messages, DenyAll())
        rows = []
        for step in turn.steps:
            rows.append({"step": step.index, "prompt_tokens": step.prompt_tokens, "calls": [c.name for c in step.calls],
                         "raw": step.raw_output[:80]})
        # second user turn: the whole previous turn is history now
        messages.append({"role": "user", "content": "[09:01] thanks"})
        backend.tool_choice = None
        agent.budgets = Budgets(max_steps=1, max_tokens=16)
        turn2 = agent.run_turn(messages, DenyAll())
        for step in turn2.steps:
            rows.append({"step": f"t2.{step.index}", "prompt_tokens": step.prompt_tokens, "calls": [], "raw": step.raw_output[:80]})
    finally:
        proc.terminate(); proc.wait(30)
text = log_path.read_text(errors="replace")
hits = re.findall(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval", text)
print(label, wire, "forced" if force else "free", "stop:", turn.stop_reason.value, turn.error)
for row, hit in zip(rows, [None] + hits if len(hits) < len(rows) else hits):
    print(json.dumps({**row, "prefix_hit": int(hit[0]) if hit else None, "evaluated": int(hit[1]) if hit else None}, ensure_ascii=False))
print("log lines:", hits)
