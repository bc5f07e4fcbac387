"""Peer (c) of figure 4: ``llama_cpp.server`` as a subprocess on loopback, for the time of a block.

Started with the settings of the in-process peer (model, context, batch, threads, seed, chat
format), so that the HTTP hop is the only difference between peers (b) and (c); always
terminated, whatever happens inside the block.
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llama_server(model_path: str, *, n_ctx: int, n_threads: int, n_threads_batch: int | None = None,
                 chat_format: str | None = None, alias: str = "peer", log_path: Path) -> Iterator[str]:
    """Yields the server's base URL once it answers ``/v1/models``; raises ``ServerUnavailable``.

    Without ``chat_format`` the server uses the GGUF's own chat template (what the OpenAI
    backend's tests talk to)."""
    port = free_port()
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
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:  # a pipe nobody reads would block the server
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ServerUnavailable(f"could not start llama_cpp.server: {exc}") from exc
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_until_ready(process, base_url, log_path)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(process: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise ServerUnavailable(f"llama_cpp.server exited with status {process.returncode}: {tail[0][:200]}")
        try:
            if httpx.get(f"{base_url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"llama_cpp.server did not answer /v1/models within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.5)
