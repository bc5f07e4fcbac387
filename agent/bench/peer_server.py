"""Peers (c) and (d) of figure 4, each a subprocess on loopback for the time of a block:
``llama_cpp.server`` and llama.cpp's own ``llama-server`` (built on request, ``llama_server_build``).

(c) is started with the settings of the in-process peer (model, adapter, context, batch, threads,
seed, chat format), so that the HTTP hop is the only difference between peers (b) and (c); (d) with
the runtime engine's settings, the same adapter and a Hermes tool template. Both are always
terminated, whatever happens inside the block.

Before either starts, its model and adapter go through ``models.check.check_pair`` (the runtime's
own check): llama-cpp-python accepts a wrong adapter silently and segfaults on the first decode, so
no path reaches a server unchecked; a refused pair is a peer "not measured", with the check's line.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

READY_TIMEOUT_S = 180.0  # loading SmolLM2 takes seconds; a loaded shared machine takes longer


class ServerUnavailable(RuntimeError):
    """The server could not be started; the message says why (it goes into the figure's note)."""


def check_files(model_path: str, lora_path: str | None) -> None:
    """``ServerUnavailable`` with the check's one line unless llama.cpp may load this model and adapter."""
    from models.check import check_pair

    result = check_pair(model_path, lora_path)
    if not result.ok:
        raise ServerUnavailable(f"not measured: {result.error_line()}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def python_server_command(model_path: str, *, port: int, n_ctx: int, n_threads: int,
                          n_threads_batch: int | None = None, chat_format: str | None = None,
                          lora_path: str | None = None, lora_scale: float = 1.0, alias: str = "peer") -> list[str]:
    """``python -m llama_cpp.server`` with the in-process peer's ``Llama`` settings.

    Its ``ModelSettings`` (0.3.36) have ``lora_path`` and no scale: ``Llama`` then applies the
    adapter at 1.0, so a scale other than 1 cannot be served the same, and is refused."""
    if lora_path is not None and lora_scale != 1.0:
        raise ServerUnavailable(f"not measured: llama_cpp.server has no lora_scale setting (only lora_path, "
                                f"applied at 1.0), and the adapter's scale is {lora_scale:g}")
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", str(n_ctx), "--n_batch", str(min(512, n_ctx)),
        "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads_batch or n_threads),
        "--seed", "0", "--model_alias", alias,
        # the server's defaults differ from ``Llama``'s here: align them with the in-process peer
        "--logits_all", "False", "--use_mlock", "False", "--verbose", "False",
    ]
    if chat_format:
        command += ["--chat_format", chat_format]
    if lora_path is not None:
        command += ["--lora_path", lora_path]
    return command


@contextmanager
def llama_server(model_path: str, *, n_ctx: int, n_threads: int, n_threads_batch: int | None = None,
                 chat_format: str | None = None, lora_path: str | None = None, lora_scale: float = 1.0,
                 alias: str = "peer", log_path: Path) -> Iterator[str]:
    """Yields the server's base URL once it answers ``/v1/models``; raises ``ServerUnavailable``.

    Without ``chat_format`` the server uses the GGUF's own chat template (what the OpenAI
    backend's tests talk to). The files are checked first (``check_files``)."""
    port = free_port()
    command = python_server_command(model_path, port=port, n_ctx=n_ctx, n_threads=n_threads,
                                    n_threads_batch=n_threads_batch, chat_format=chat_format,
                                    lora_path=lora_path, lora_scale=lora_scale, alias=alias)
    check_files(model_path, lora_path)
    with _serving(command, port, log_path, probe="/v1/models", name="llama_cpp.server") as base_url:
        yield base_url


@contextmanager
def _serving(command: list[str], port: int, log_path: Path, *, probe: str, name: str) -> Iterator[str]:
    """Runs ``command`` with its output in ``log_path``, yields its base URL once ``probe`` answers
    200, and terminates it (killed after 20 s) whatever happens inside the block."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:  # a pipe nobody reads would block the server
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ServerUnavailable(f"could not start {name}: {exc}") from exc
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_until_ready(process, base_url, log_path, probe=probe, name=name)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(process: subprocess.Popen[bytes], base_url: str, log_path: Path, *, probe: str,
                      name: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise ServerUnavailable(f"{name} exited with status {process.returncode}: {tail[0][:200]}")
        try:
            if httpx.get(f"{base_url}{probe}", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"{name} did not answer {probe} within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.5)


# -- peer (d): llama.cpp's own llama-server ---------------------------------------------------------

# A Hermes tool template from llama.cpp's own collection (in the same sources the server is built
# from): ChatML turns, the tools as JSON in the system message inside <tools>, calls as
# <tool_call>{...}</tool_call>, tool results as <tool_response> in a user turn. SmolLM2's own
# template has no tools at all, and with it llama-server drops them without a word.
HERMES_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"


def native_server_command(binary: Path, model_path: str, *, port: int, n_ctx: int, n_threads: int,
                          n_threads_batch: int | None = None, template: Path, lora_path: str | None = None,
                          lora_scale: float = 1.0, alias: str = "peer") -> list[str]:
    """``llama-server --jinja`` with the runtime's engine settings (``agent.backends.llama.engine``):
    batch 512, its threads for generation and for batches, seed 0, no flash attention; one slot
    (the default ``auto`` makes four and splits the context between them) and ``--fit off`` (it
    would otherwise change unset sizes to fit memory). Everything else is the server's default,
    prompt cache included: that is what a user who runs it gets.

    The adapter: ``--lora FILE`` at scale 1, else ``--lora-scaled FILE:SCALE``. llama.cpp splits
    both values on commas (a list of adapters, with CSV quoting) and the scaled one on ``:`` too,
    so a path holding one of those would load something else: refused."""
    adapter: list[str] = []
    if lora_path is not None:
        reserved = ',"' if lora_scale == 1.0 else ',":'
        if any(c in lora_path for c in reserved):
            raise ServerUnavailable(f"not measured: llama-server would split the adapter path {lora_path!r} "
                                    f"(its --lora flags treat {' '.join(reserved)} as separators)")
        adapter = ["--lora", lora_path] if lora_scale == 1.0 else ["--lora-scaled", f"{lora_path}:{lora_scale!r}"]
    return [
        str(binary), "--model", model_path, "--host", "127.0.0.1", "--port", str(port), "--alias", alias,
        "--ctx-size", str(n_ctx), "--batch-size", str(min(512, n_ctx)), "--threads", str(n_threads),
        "--threads-batch", str(n_threads_batch or n_threads), "--seed", "0", "--flash-attn", "off", "--parallel", "1",
        "--fit", "off", "--no-webui", "--jinja", "--chat-template-file", str(template), *adapter,
    ]


@contextmanager
def native_llama_server(binary: Path | None, model_path: str, *, n_ctx: int, n_threads: int,
                        n_threads_batch: int | None = None, template: Path, lora_path: str | None = None,
                        lora_scale: float = 1.0, log_path: Path) -> Iterator[str]:
    """Yields the base URL of a ``llama-server`` subprocess once ``/health`` answers 200; raises
    ``ServerUnavailable`` when there is no binary (it is built only on request), the files do not
    pass ``check_files``, or it fails."""
    if binary is None or not binary.exists():
        raise ServerUnavailable("not measured: llama-server is not built (python -m agent bench --build-llama-server)")
    if not template.exists():
        raise ServerUnavailable(f"not measured: the Hermes template {template} is missing")
    port = free_port()
    command = native_server_command(binary, model_path, port=port, n_ctx=n_ctx, n_threads=n_threads,
                                    n_threads_batch=n_threads_batch, template=template, lora_path=lora_path,
                                    lora_scale=lora_scale)
    check_files(model_path, lora_path)
    with _serving(command, port, log_path, probe="/health", name="llama-server") as base_url:
        yield base_url
