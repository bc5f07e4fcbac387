"""LlamaBackend with real llama.cpp: grammar-constrained calls, KV prefix reuse, session states, adapters."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from agent.backends.llama import LlamaBackend, ModelFiles, ModelRefused
from agent.formats import HERMES, parse_reply
from agent.formats.gbnf import max_text_bytes
from tests import model_fixtures as mf

pytestmark = pytest.mark.slow

CREATE = {"type": "function", "function": {
    "name": "create_event", "description": "Create a calendar event.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40}, "start": {"type": "string", "maxLength": 20}},
                   "required": ["title", "start"]}}}
DELETE = {"type": "function", "function": {
    "name": "delete_event", "description": "Delete an event by id.",
    "parameters": {"type": "object", "properties": {"event_id": {"type": "integer"}}, "required": ["event_id"]}}}
TOOLS = [CREATE, DELETE]


def conversation(owner: str) -> list[dict]:
    return [
        {"role": "system", "content": f"{owner}: you are this person's calendar assistant."},
        {"role": "user", "content": "Create an event 'Dentist' on 2026-12-01 at 15:00."},
    ]


@pytest.fixture(scope="module")
def backend(smollm2: Path) -> LlamaBackend:
    return LlamaBackend(smollm2, n_ctx=2048, n_threads=2)


def test_grammar_makes_the_opened_call_valid(backend: LlamaBackend) -> None:
    """SmolLM2 does not open <tool_call> by itself; the reply is started with the tag (kept in the
    text) and everything after it is the model's, under the grammar. The budget is the grammar's
    longest call, so the call closes whatever this CPU's floats make SmolLM2 write."""
    budget = int(max_text_bytes(HERMES.call_gbnf(TOOLS)))
    result = backend.complete(conversation("Alice"), TOOLS, max_tokens=budget, assistant_prefix="<tool_call>",
                              stop_after_call=True)
    assert result.finish_reason in ("stop", "length"), result.error
    assert result.text.startswith("<tool_call>")
    assert result.timings["constrained_tokens"] > 5
    calls = parse_reply(result.text).tool_calls
    assert len(calls) == 1, result.text
    call = calls[0]
    assert call.name in {"create_event", "delete_event"}
    required = next(t for t in TOOLS if t["function"]["name"] == call.name)["function"]["parameters"]["required"]
    assert set(required) <= set(call.arguments), call.arguments
    assert not parse_reply(result.text).problems


def test_a_tag_inside_a_code_fence_is_not_grammar_constrained(backend: LlamaBackend) -> None:
    """The decode loop's trigger is the parser's own scanner: a ``<tool_call>`` inside an open code
    fence is text to the parser, so the grammar must not start there (the old trigger skipped only
    ``<think>`` and constrained it). The control opens the same tag outside the fence."""
    fenced = backend.complete(conversation("Alice"), TOOLS, max_tokens=2, assistant_prefix="```\n<tool_call>")
    assert fenced.timings["constrained_tokens"] == 0, fenced.text
    control = backend.complete(conversation("Alice"), TOOLS, max_tokens=2, assistant_prefix="<tool_call>")
    assert control.timings["constrained_tokens"] == 2, control.text


def steer(patch: pytest.MonkeyPatch, backend: LlamaBackend, target: str, *, then_stop: bool) -> None:
    """A logit bias that makes the reply's output ``target``, whatever this CPU's floats favour.

    While what the step has written is a proper prefix of ``target``, the next token of the rest
    gets a logit far above every other, so greedy decoding takes it unless a grammar rejects it.
    Once ``target`` is written: the end of the turn (``then_stop``) or no bias. Where the text has
    left ``target`` (a grammar refused a token of it), no bias: the model chooses among what the
    grammar allows. It hooks ``Engine.sample``, which the decode loop calls once every token it
    has written is in the context, so the context after the prompt is exactly the output so far.
    """
    engine = backend.engine
    real = type(engine).sample
    want = target.encode()
    start: list[int] = []

    def sample(sampler) -> int:
        if not start:
            start.append(engine.n_tokens)  # the first sample of the step: the prompt is all there is
        written = b"".join(engine.piece(t) for t in engine.tokens()[start[0]:])
        token = None
        if written == want and then_stop:
            token = engine.eos
        elif len(written) < len(want) and want.startswith(written):
            token = engine.tokenize(want[len(written):], add_bos=False)[0]
        if token is not None:
            logits = engine.logits()  # a writable view of the buffer the sampler reads
            logits[token] = logits.max() + 100.0
        return real(engine, sampler)

    patch.setattr(engine, "sample", sample)


def test_grammar_starts_when_the_model_writes_the_tag_itself(backend: LlamaBackend, monkeypatch) -> None:
    """Only "<" is given: the rest of the tag, "tool_call>", is written in free mode (several
    tokens for SmolLM2), the trigger sees the tag in the decoded text and the call that follows is
    constrained. A logit bias writes "tool_call>" (SmolLM2 does not reliably open a call itself,
    and what it writes unforced differs between CPUs); the call after it is the model's own under
    the grammar, and the budget is the tag plus the grammar's longest call, so the call closes."""
    rest = "tool_call>"
    assert len(backend.tokenize(rest, add_bos=False)) > 1  # the trigger must join several free tokens
    budget = len(rest.encode()) + int(max_text_bytes(HERMES.call_gbnf(TOOLS)))
    with monkeypatch.context() as patch:
        steer(patch, backend, rest, then_stop=False)
        result = backend.complete(conversation("Alice"), TOOLS, max_tokens=budget, assistant_prefix="<",
                                  stop_after_call=True)
    assert result.finish_reason == "stop", (result.error, result.text)
    assert result.text.startswith("<tool_call>"), result.text
    assert result.timings["constrained_tokens"] > 5  # the tag was seen: what follows was under the grammar
    reply = parse_reply(result.text)
    assert len(reply.tool_calls) == 1 and not reply.problems, result.text
    # which tool a 135M model picks is its business; that the call is valid is the grammar's
    schema = next(t for t in TOOLS if t["function"]["name"] == reply.tool_calls[0].name)["function"]["parameters"]
    assert set(schema["required"]) <= set(reply.tool_calls[0].arguments), result.text


# A call that is not JSON (the start time is not quoted), as a small model may write one.
BROKEN_CALL = '\n{"name": "create_event", "arguments": {"title": "Dentist", "start": 15:00}}\n</tool_call>'


def test_the_grammar_not_luck_makes_the_call_valid(backend: LlamaBackend, monkeypatch) -> None:
    """Control for the tests above: the same logit bias towards a broken call after
    ``<tool_call>`` gives that broken call without the grammar and a valid call with it, so the
    validity comes from the grammar and not from what the model happens to write."""
    backend.use_grammar = False
    try:
        with monkeypatch.context() as patch:
            steer(patch, backend, BROKEN_CALL, then_stop=True)
            free = backend.complete(conversation("Alice"), TOOLS, max_tokens=80, assistant_prefix="<tool_call>")
    finally:
        backend.use_grammar = True
    assert free.timings["constrained_tokens"] == 0
    assert free.text == "<tool_call>" + BROKEN_CALL, free.text
    broken = parse_reply(free.text)
    assert not broken.tool_calls and broken.problems, broken

    with monkeypatch.context() as patch:
        steer(patch, backend, BROKEN_CALL, then_stop=True)
        constrained = backend.complete(conversation("Alice"), TOOLS, assistant_prefix="<tool_call>",
                                       max_tokens=int(max_text_bytes(HERMES.call_gbnf(TOOLS))),
                                       stop_after_call=True)
    assert constrained.finish_reason == "stop", (constrained.error, constrained.text)
    assert constrained.timings["constrained_tokens"] > 5
    # the bias was followed as far as the grammar allows it, then the grammar took over
    assert constrained.text.startswith('<tool_call>\n{"name": "create_event", "arguments": {"title": "Dentist", '
                                       '"start"'), constrained.text
    reply = parse_reply(constrained.text)
    assert len(reply.tool_calls) == 1 and not reply.problems, constrained.text
    assert reply.tool_calls[0].arguments["title"] == "Dentist" and "start" in reply.tool_calls[0].arguments


def greedy_call_by_fast_paths_and_by_full_mask(model: LlamaBackend, monkeypatch) -> tuple[dict, str, str]:
    """The same call decoded by the runtime's path and by the full-vocabulary mask alone, and which
    fast paths the first one took."""
    before = dict(model.grammar_paths)
    model.reset_context()  # both runs evaluate the prompt from scratch: batch sizes change the last bits
    fast = model.complete(conversation("Alice"), TOOLS, max_tokens=80, assistant_prefix="<tool_call>")
    used = {k: n - before[k] for k, n in model.grammar_paths.items()}
    with monkeypatch.context() as patch:
        patch.setattr(model.decoder, "fast_paths", False)
        model.reset_context()
        slow = model.complete(conversation("Alice"), TOOLS, max_tokens=80, assistant_prefix="<tool_call>")
    return used, fast.text, slow.text


@pytest.mark.parametrize("path, share, tries", [("narrowed", 1.0, 4), ("next", 0.0, 4), ("top", 0.0, 0)])
def test_fast_grammar_paths_choose_what_the_full_mask_chooses(backend, tiny_qwen3, monkeypatch, path, share, tries):
    """The fast paths are an optimisation only: under greedy sampling the call must be token for
    token the one the full-vocabulary mask gives. Each path is forced in turn, on SmolLM2 (49k)
    and on the random-weight Qwen3 fixture (151k), whose first choice is rarely valid JSON."""
    monkeypatch.setattr("agent.backends.llama.decode.NARROWED_MAX_SHARE", share)
    monkeypatch.setattr("agent.backends.llama.decode.NEXT_BEST_TRIES", tries)
    for model in (backend, LlamaBackend(tiny_qwen3, n_ctx=2048, n_threads=2)):
        used, fast, slow = greedy_call_by_fast_paths_and_by_full_mask(model, monkeypatch)
        assert used[path] > 0, used
        assert fast == slow, model.model_path


def test_second_step_reuses_the_prefix(backend: LlamaBackend) -> None:
    messages = conversation("Alice")
    first = backend.complete(messages, TOOLS, max_tokens=60, assistant_prefix="<tool_call>")
    messages += [{"role": "assistant", "content": first.text},
                 {"role": "tool", "content": json.dumps({"ok": True, "data": {"id": 7}})}]
    second = backend.complete(messages, TOOLS, max_tokens=8)
    assert second.finish_reason != "error", second.error
    assert second.reused_tokens + second.evaluated_tokens == second.prompt_tokens
    # only the tool turn and the headers are new: the model's own output was already in the cache
    assert second.evaluated_tokens < 40, second
    assert second.prompt_tokens > 200
    print(f"step 2: prompt {second.prompt_tokens}, evaluated {second.evaluated_tokens}, reused {second.reused_tokens}")


def test_interleaved_sessions_restore_their_own_state(backend: LlamaBackend) -> None:
    alice, bob = conversation("Alice"), conversation("Bob")
    a1 = backend.complete(alice, TOOLS, session_id="alice", max_tokens=8)
    b1 = backend.complete(bob, TOOLS, session_id="bob", max_tokens=8)
    assert b1.reused_tokens < 10  # the two system prompts differ almost at once
    alice += [{"role": "assistant", "content": a1.text}, {"role": "user", "content": "At 16:00 instead."}]
    a2 = backend.complete(alice, TOOLS, session_id="alice", max_tokens=8)
    new_tokens = a2.prompt_tokens - a1.prompt_tokens - a1.generated_tokens
    assert a2.evaluated_tokens <= new_tokens + 3, (a2, new_tokens)
    assert "load_state_s" in a2.timings
    print(f"interleaved: prompt {a2.prompt_tokens}, evaluated {a2.evaluated_tokens} (new {new_tokens})")

    # control: Bob's context is live again, and without a session id Alice's history is re-evaluated
    backend.complete(bob, TOOLS, session_id="bob", max_tokens=2)
    control = backend.complete(alice, TOOLS, max_tokens=2)
    assert control.evaluated_tokens > a2.prompt_tokens - 20


def test_saved_states_are_evicted_least_recently_used(backend: LlamaBackend) -> None:
    backend.max_saved_sessions = 2
    try:
        for owner in ["Erin", "Frank", "Grace", "Heidi"]:  # saves Erin, Frank, Grace: Erin is evicted
            backend.complete(conversation(owner), TOOLS, session_id=owner, max_tokens=1)
        frank = backend.complete(conversation("Frank"), TOOLS, session_id="Frank", max_tokens=1)
        erin = backend.complete(conversation("Erin"), TOOLS, session_id="Erin", max_tokens=1)
    finally:
        backend.max_saved_sessions = 4
    assert "load_state_s" in frank.timings and frank.evaluated_tokens <= 2
    assert "load_state_s" not in erin.timings and erin.evaluated_tokens > 150


def test_saved_states_stay_within_their_memory_budget(backend: LlamaBackend) -> None:
    """A state is KV bytes per token (~144 KB for Qwen3-4B), so states are capped by bytes too."""
    def turn(owner: str):
        return backend.complete(conversation(owner), TOOLS, session_id=owner, max_tokens=1)

    turn("Kim")
    before = backend.saved_state_bytes()  # earlier tests' sessions may still be saved
    turn("Lee")  # saves Kim's state
    one_state = backend.saved_state_bytes() - before
    assert one_state > 0
    turn("Kim")  # Kim's state is loaded (and leaves the store), Lee's is saved
    budget = backend.max_saved_state_bytes
    backend.max_saved_state_bytes = int(one_state * 1.5)  # room for one state of this size, not two
    try:
        turn("Park")  # saves Kim's; over budget, so the older ones go, Lee's among them
        assert backend.saved_state_bytes() <= backend.max_saved_state_bytes
        lee = turn("Lee")  # saves Park's, which evicts Kim's
        assert "load_state_s" not in lee.timings and lee.evaluated_tokens > 150
        park = turn("Park")
        assert "load_state_s" in park.timings and park.evaluated_tokens <= 2
    finally:
        backend.max_saved_state_bytes = budget


def test_concurrent_sessions_from_threads_match_sequential_results(backend: LlamaBackend) -> None:
    """The bot calls from worker threads: the lock must keep each call's context intact.

    The expected texts come from a second sequential round, which decodes from each session's
    saved state as the threaded calls do. The first round puts each prompt into the cache by
    another path (Dave's reuses Carol's prefix), and a different batch split can move the last
    bits of the logits enough to flip a greedy near-tie on some CPUs.
    """
    owners = ["Carol", "Dave"]
    for owner in owners:
        backend.complete(conversation(owner), TOOLS, session_id=owner, max_tokens=6)
    expected = {o: backend.complete(conversation(o), TOOLS, session_id=o, max_tokens=6).text for o in owners}
    results: dict[str, list[str]] = {o: [] for o in owners}

    def run(owner: str) -> None:
        for _ in range(2):
            result = backend.complete(conversation(owner), TOOLS, session_id=owner, max_tokens=6)
            results[owner].append(result.text if result.finish_reason != "error" else f"ERROR {result.error}")

    threads = [threading.Thread(target=run, args=(o,)) for o in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {o: [expected[o]] * 2 for o in owners}


def test_context_limit_is_a_result_not_an_exception(backend: LlamaBackend) -> None:
    messages = [{"role": "user", "content": "calendar " * 2500}]
    result = backend.complete(messages, TOOLS, max_tokens=4)
    assert result.finish_reason == "context_limit"
    assert result.error.startswith("context_limit")


def test_identity_names_model_and_no_adapter(smollm2: Path, backend: LlamaBackend) -> None:
    identity = backend.identity()
    assert identity["backend"] == "llama"
    assert identity["model_path"] == str(smollm2)
    assert identity["model_fingerprint"].startswith(f"{smollm2.stat().st_size}:")
    assert identity["adapter_path"] is None and identity["adapter_sha256"] is None


def test_adapter_loads_and_changes_the_output(smollm2: Path, smollm2_lora: Path, backend: LlamaBackend) -> None:
    adapted = LlamaBackend(smollm2, lora_path=smollm2_lora, lora_scale=1.0, n_ctx=512, n_threads=2)
    identity = adapted.identity()
    assert identity["adapter_sha256"] == hashlib.sha256(smollm2_lora.read_bytes()).hexdigest()
    assert identity["lora_scale"] == 1.0
    messages = [{"role": "user", "content": "Say hello."}]
    base_text = backend.complete(messages, [], max_tokens=12).text
    adapted_text = adapted.complete(messages, [], max_tokens=12).text
    assert adapted_text != base_text


def test_mismatched_adapter_is_refused_before_llama_cpp(smollm2: Path, tiny_qwen3_lora: Path) -> None:
    with pytest.raises(ModelRefused, match=str(tiny_qwen3_lora)):
        LlamaBackend(smollm2, lora_path=tiny_qwen3_lora, n_ctx=512, n_threads=2)


def entry_point_settings(tmp_path: Path, model: Path, adapter: Path | None):
    from agent.config import load_settings

    environ = {"AGENT_MODEL_PATH": str(model)}
    environ.update({"AGENT_LORA_PATH": str(adapter)} if adapter else {"AGENT_NO_ADAPTER": "1"})
    return load_settings({"data_dir": str(tmp_path)}, environ=environ)


def test_the_entry_point_reads_the_headers_once_and_the_backend_trusts_them(smollm2, smollm2_lora, tmp_path,
                                                                            monkeypatch) -> None:
    import models.check
    from agent.app import build_llama_backend

    checked: list[tuple] = []
    real = models.check.check_pair
    monkeypatch.setattr(models.check, "check_pair", lambda *paths: checked.append(paths) or real(*paths))
    backend = build_llama_backend(entry_point_settings(tmp_path, smollm2, smollm2_lora))
    assert checked == [(smollm2, smollm2_lora)]
    assert backend.identity()["adapter_path"] == str(smollm2_lora)


def test_a_mismatched_adapter_at_the_entry_point_is_one_line_and_exit_2(smollm2, tiny_qwen3_lora, tmp_path,
                                                                         capsys) -> None:
    from agent.app import build_llama_backend

    with pytest.raises(SystemExit) as exited:
        build_llama_backend(entry_point_settings(tmp_path, smollm2, tiny_qwen3_lora))
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(tiny_qwen3_lora) in lines[0], lines


def test_checked_files_carry_their_adapter(smollm2: Path, smollm2_lora: Path) -> None:
    """A ``ModelFiles`` names both files it was checked for; a second adapter beside it is refused."""
    files = ModelFiles.check(smollm2, smollm2_lora)
    with pytest.raises(TypeError, match="inside ModelFiles"):
        LlamaBackend(files, lora_path=smollm2_lora)


def test_decoding_uses_the_format_the_renderer_chose_for_the_model(qwen: LlamaBackend) -> None:
    """The decode loop's trigger, stops and grammar are the backend's one format (``call_opened``)."""
    assert qwen.decoder.chat_format is qwen.chat_format is qwen.renderer.chat_format
    assert qwen.identity()["chat_format"] == qwen.chat_format.name == "hermes"
    assert qwen.chat_format.stop_markers == ("<|im_end|>",)
    opens_call = qwen.decoder.chat_format.call_opened
    assert opens_call("ok <tool_call>", 0) == len("ok <tool_call>")
    assert opens_call("<think>maybe <tool_call></think>", 0) is None
    assert opens_call("<tool_call>{}</tool_call>", 0) is None
    assert opens_call("<think>x</think><tool_call>", 0) == len("<think>x</think><tool_call>")


@pytest.fixture(scope="module")
def qwen(tiny_qwen3_each: Path) -> LlamaBackend:
    """The tiny qwen3 with each production template in turn."""
    return LlamaBackend(tiny_qwen3_each, n_ctx=4096, n_threads=1)


def test_tiny_qwen3_tool_call_is_one_special_token(qwen: LlamaBackend, qwen3_variant: str) -> None:
    assert qwen.is_special_token("<tool_call>") and qwen.is_special_token("</tool_call>")
    prompt = qwen.render([{"role": "user", "content": "내일 3시 치과"}], [DELETE])
    assert "<tools>" in prompt and prompt.endswith("<|im_end|>\n" + mf.QWEN3_GENERATION_PROMPT[qwen3_variant])
    open_id = qwen.tokenize("<tool_call>", add_bos=False)
    assert open_id == [151657]
    result = qwen.complete([{"role": "user", "content": "Delete event 3."}], [DELETE],
                           max_tokens=int(max_text_bytes(HERMES.call_gbnf([DELETE]))), assistant_prefix="<tool_call>",
                           stop_after_call=True)
    assert result.finish_reason != "error", result.error
    # random weights, but the grammar still forces a call to the only tool with an integer id
    calls = parse_reply(result.text).tool_calls
    assert calls and calls[0].name == "delete_event" and isinstance(calls[0].arguments["event_id"], int), result.text


def test_a_tag_in_reasoning_opens_no_grammar_with_either_template(qwen: LlamaBackend) -> None:
    """After either generation prompt (the hybrid one ends in a closed empty think block), a
    ``<tool_call>`` inside reasoning the reply opens is text, one after it is a call."""
    messages = [{"role": "user", "content": "Delete event 3."}]
    inside = qwen.complete(messages, [DELETE], max_tokens=2, assistant_prefix="<think>\nmaybe <tool_call>")
    assert inside.timings["constrained_tokens"] == 0, inside.text
    after = qwen.complete(messages, [DELETE], max_tokens=2, assistant_prefix="<think>\nok\n</think>\n\n<tool_call>")
    assert after.timings["constrained_tokens"] == 2, after.text


def test_steps_and_turns_reuse_the_prefix_with_either_template(qwen: LlamaBackend) -> None:
    """A call, its result, an answer, a new user message: every later prompt starts with the
    earlier prompt and what the model wrote, so each step evaluates only the new turn's tokens
    (the hybrid template would drop the empty think block of an earlier turn: the splice keeps it)."""
    messages = [{"role": "system", "content": "You manage Kim's calendar."},
                {"role": "user", "content": "Delete event 3."}]
    call = qwen.complete(messages, [DELETE], max_tokens=int(max_text_bytes(HERMES.call_gbnf([DELETE]))),
                         assistant_prefix="<tool_call>", stop_after_call=True, session_id="kim")
    assert parse_reply(call.text).tool_calls, call.text
    steps = [(messages, call)]
    for next_turn in ({"role": "tool", "content": json.dumps({"ok": True, "data": {"deleted": 3}})},
                      {"role": "user", "content": "And event 4?"}):
        before, done = steps[-1]
        written = qwen.tokenize(qwen.render(before, [DELETE]) + done.text, add_bos=False)
        messages = before + [{"role": "assistant", "content": done.text}, next_turn]
        step = qwen.complete(messages, [DELETE], max_tokens=4, session_id="kim")
        assert step.finish_reason != "error", step.error
        new = step.prompt_tokens - len(written)
        assert 0 < new < 60 and step.reused_tokens + step.evaluated_tokens == step.prompt_tokens
        assert step.evaluated_tokens <= new + 1, (step, new)  # at most the last token written is not in the cache
        steps.append((messages, step))


class _Script:
    """Stands in for the sampler: returns the given tokens, then end of generation."""

    def __init__(self, tokens: list[int], eos: int) -> None:
        self.tokens, self.eos = list(tokens), eos

    def sample(self, ctx, idx) -> int:
        return self.tokens.pop(0) if self.tokens else self.eos


def test_characters_split_across_tokens_are_decoded_exactly(tiny_qwen3: Path, monkeypatch) -> None:
    """Rare Hangul and emoji are several byte tokens in Qwen3's vocabulary; the reply is decoded
    piece by piece and must come out as the text, with no NUL padding or replacement marks."""
    qwen = LlamaBackend(tiny_qwen3, n_ctx=512, n_threads=2)
    text = "뷁 똠방각하 🦜🪿 내일 3시"
    tokens = qwen.tokenize(text, add_bos=False)
    assert len(tokens) < len(text.encode()) and any(qwen.engine.piece(t)[0] & 0xC0 == 0x80 for t in tokens)
    script = _Script(tokens, qwen.engine.eos)
    monkeypatch.setattr(qwen.decoder, "sampler", lambda gbnf=None, settings=None: (script, None))
    result = qwen.complete([{"role": "user", "content": "hi"}], [], max_tokens=64)
    assert result.text == text
    assert result.generated_tokens == len(tokens) and result.finish_reason == "stop"


def oracle_calls(count: int) -> tuple[list[dict], list[str]]:
    """The first ``count`` distinct calls the eval oracle makes (text after ``<tool_call>``), one
    scenario per template, and the schemas of the calendar tools they call (the whole tool block
    would not fit the 2048-token context)."""
    from agent.backends.scripted import ScriptedBackend
    from agent.eval.dialogue import run_episode
    from tools.calendar.lab.eval_suite import load_eval_suite

    suite = load_eval_suite()
    calls: list[str] = []
    tools: list[dict] = []
    for scenario in suite.scenarios(per_template=1):
        environment = suite.make_environment(scenario)
        try:
            tools = environment.registry.schemas()
            trace = run_episode(scenario, ScriptedBackend(suite.policies["oracle"](scenario)), environment)
        finally:
            environment.close()
        for message in trace.messages:
            text = message.get("content") or ""
            if message.get("role") == "assistant" and "<tool_call>" in text:
                call = text.split("<tool_call>", 1)[1]
                if call not in calls:
                    calls.append(call)
    calls = calls[:count]
    names = {json.loads(c.split("</tool_call>")[0])["name"] for c in calls}
    return [t for t in tools if t["function"]["name"] in names], calls


@pytest.mark.timeout(1800)  # ~500 decoded tokens: minutes on a loaded 2-core machine
def test_jump_forward_writes_the_oracles_calls_as_token_by_token_decoding_does(backend, tiny_qwen3):
    """Jump-forward appends what the grammar forces without sampling it; with each call made the
    model's first choice by a logit bias, the text must be the call, exactly as token-by-token
    greedy decoding writes it, on both vocabularies (SmolLM2 49k, Qwen3 151k)."""
    from agent.bench.jump import write_call

    tools, calls = oracle_calls(2)
    assert len(calls) == 2
    messages = conversation("Alice")
    for model in (backend, LlamaBackend(tiny_qwen3, n_ctx=4096, n_threads=2)):
        for call in calls:
            jumped = write_call(model, messages, tools, call, jump_forward=True)
            stepped = write_call(model, messages, tools, call, jump_forward=False)
            assert stepped.text == call, (model.model_path, stepped.text)
            assert jumped.text == stepped.text, (model.model_path, jumped.text)
            assert jumped.forced > 0 and stepped.forced == 0
            assert jumped.sampled < stepped.sampled
            assert jumped.decodes < stepped.decodes  # each forced run rides in the batch before it


@pytest.mark.parametrize(("written", "forced", "closes"), [
    ('\n{"name": "create_event', '", "arguments": {"title": "', False),  # a required first key
    ('\n{"name": "create_event", "arguments": {"title": "Dentist"', ', "date": "', False),
    ('\n{"name": "create_event", "arguments": {"title": "Dentist", "date": "2026', "-", False),
    ('\n{"name": "create_event", "arguments": {"title": "x", "date": "2026-12-01", "start_time": "15:00", "d',
     'uration_minutes": ', False),  # an optional key once its first letter is unique
    ("", '\n{"name": "', False),  # the tag's newline and everything up to the tool's name
    ('\n{"name": "delete_event", "arguments": {"event_id": 3}', "}\n</tool_call>", True),
    ('\n{"name": "delete_event", "arguments": {"event_id": 3}}\n</', "tool_call>", True),
    ('\n{"name": "find_', "", False),  # find_free_slots or find_common_free_time
    ('\n{"name": "create_event", "arguments": {"title": "Dentist', "", False),  # a free string
])
def test_the_call_grammar_forces_everything_but_the_choices(backend, tiny_qwen3, calendar_tools, written, forced,
                                                           closes):
    """With ``json.dumps`` separators the grammar admits one spelling of a call, so between the
    model's choices (a tool, a value, whether an optional key follows) the text is forced: what
    jump-forward appends without sampling. Asked of llama.cpp's grammar on both vocabularies."""
    import llama_cpp

    for model in (backend, LlamaBackend(tiny_qwen3, n_ctx=512, n_threads=1)):
        chain, grammar = model.decoder.sampler(model.decoder.grammar_for(calendar_tools))
        for token in model.engine.tokenize(written.encode(), add_bos=False):
            llama_cpp.llama_sampler_accept(grammar, token)
        assert model.decoder.candidate_index().forced_run(grammar) == (forced, closes), model.model_path
