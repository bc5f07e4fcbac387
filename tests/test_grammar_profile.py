"""The grammar profile (a lab tool): its rows describe the grammar it was given, its stage clocks
see the runtime's own constrained path, and it puts back every function it clocked."""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from agent.backends import candidates
from agent.backends.llama import LlamaBackend, decode
from agent.bench import grammar_profile


def test_rows_follow_the_schemas_and_the_stage_clocks_are_taken_off_again(smollm2: Path) -> None:
    sets = grammar_profile.schema_sets([], one_tool="create_event")
    assert set(sets) == {"today", "create_event alone"} and len(sets["create_event alone"]) == 1
    backend = LlamaBackend(str(smollm2), n_ctx=4096, n_threads=1)
    whole = grammar_profile.grammar_row(backend, "today", sets["today"])
    alone = grammar_profile.grammar_row(backend, "alone", sets["create_event alone"])
    assert whole.vocabulary == backend.engine.n_vocab
    assert alone.gbnf_bytes < whole.gbnf_bytes and alone.rules < whole.rules
    assert whole.full_mask_us > whole.ask_one_us > 0  # the whole vocabulary costs more than one token
    before = (decode.grammar_keeps, decode.best_allowed, candidates.CandidateIndex.candidates,
              llama_cpp.llama_sampler_accept)
    stages, decode_us = grammar_profile.stage_times(backend, sets["today"], length=8)
    after = (decode.grammar_keeps, decode.best_allowed, candidates.CandidateIndex.candidates,
             llama_cpp.llama_sampler_accept)
    assert after == before and "sample" not in vars(backend.engine)
    assert set(stages) == set(grammar_profile.STAGES) and decode_us > 0
    assert stages["unconstrained"] > 0 and stages["accept"] > 0  # every token is chosen and accepted


def test_an_unknown_tool_name_is_one_line_naming_the_tools() -> None:
    import pytest

    with pytest.raises(SystemExit) as exit_:
        grammar_profile.schema_sets([], one_tool="no_such_tool")
    assert "create_event" in str(exit_.value) and "\n" not in str(exit_.value)
