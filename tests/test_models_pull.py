"""Downloads against a local server that speaks the hub's file endpoint.

``GET/HEAD /{repo_id}/resolve/{revision}/{filename}`` with the headers huggingface_hub
reads: X-Repo-Commit, ETag / X-Linked-Etag (the sha256 of an LFS file), X-Linked-Size,
Content-Length, and Range requests for resuming.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from models.pull import download, list_present, pull

REPO = Path(__file__).resolve().parent.parent
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    """Files served by the fake hub, and a record of the requests it saw."""

    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    interrupt_once: set[tuple[str, str]] = field(default_factory=set)
    wrong_etag: set[tuple[str, str]] = field(default_factory=set)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range
    endpoint: str = ""


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _lookup(self) -> tuple[tuple[str, str], bytes] | None:
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path.split("?")[0])
            if not m or (m[1], m[3]) not in hub.files:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            key = (m[1], m[3])
            return key, hub.files[key]

        def _meta_headers(self, key: tuple[str, str], body: bytes) -> None:
            sha = hashlib.sha256(body).hexdigest()
            if key in hub.wrong_etag:
                sha = "0" * 64
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{sha}"')
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")

        def do_HEAD(self) -> None:
            hub.requests.append(("HEAD", self.path, None))
            found = self._lookup()
            if found is None:
                return
            key, body = found
            self.send_response(200)
            self._meta_headers(key, body)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()

        def do_GET(self) -> None:
            range_header = self.headers.get("Range")
            hub.requests.append(("GET", self.path, range_header))
            found = self._lookup()
            if found is None:
                return
            key, body = found
            start = 0
            if range_header:
                start = int(re.fullmatch(r"bytes=(\d+)-", range_header)[1])  # type: ignore[index]
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self._meta_headers(key, body)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if key in hub.interrupt_once:
                hub.interrupt_once.discard(key)
                self.wfile.write(body[start : start + (len(body) - start) // 3])
                self.wfile.flush()
                self.close_connection = True  # the peer sees a short body
                return
            self.wfile.write(body[start:])

    return Handler


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    state = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def gets(hub: FakeHub) -> list[str | None]:
    return [rng for method, _, rng in hub.requests if method == "GET"]


def test_download_into_cache_verifies_sha256(hub: FakeHub, tiny_qwen3: Path, tmp_path: Path) -> None:
    body = tiny_qwen3.read_bytes()
    hub.files[("acme/tiny-GGUF", "tiny.gguf")] = body
    result = download("acme/tiny-GGUF", "tiny.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    assert not result.error, result.error
    assert result.path is not None and result.path.read_bytes() == body
    assert result.sha256 == result.expected_sha256 == hashlib.sha256(body).hexdigest()
    assert "models--acme--tiny-GGUF" in str(result.path)  # the hub cache layout
    # Present in the cache now: a second call makes no GET.
    n = len(gets(hub))
    again = download("acme/tiny-GGUF", "tiny.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    assert again.path == result.path and len(gets(hub)) == n


def test_interrupted_download_resumes_with_range(hub: FakeHub, tmp_path: Path) -> None:
    # huggingface_hub writes in 10 MiB chunks, so only a break after the first chunk leaves
    # something to resume from: the server breaks off after a third of 36 MiB.
    body = os.urandom(36 * 1024 * 1024 + 17)
    key = ("acme/big-GGUF", "big.gguf")
    hub.files[key] = body
    hub.interrupt_once.add(key)
    result = download(*key, local_dir=tmp_path / "models", endpoint=hub.endpoint)
    assert not result.error, result.error
    assert result.path == tmp_path / "models" / "big.gguf"
    assert result.path.read_bytes() == body
    assert result.sha256 == hashlib.sha256(body).hexdigest()
    ranges = gets(hub)
    assert ranges[0] is None and len(ranges) == 2  # the first GET broke off...
    resumed_at = int(re.fullmatch(r"bytes=(\d+)-", ranges[1] or "")[1])  # type: ignore[index]
    assert 0 < resumed_at <= len(body) // 3  # ...the second asked only for the rest


def test_sha256_mismatch_is_reported(hub: FakeHub, tmp_path: Path) -> None:
    key = ("acme/tiny-GGUF", "bad.gguf")
    hub.files[key] = b"GGUF" + os.urandom(1000)
    given = download(*key, local_dir=tmp_path / "a", endpoint=hub.endpoint, sha256="ab" * 32)
    assert given.error.startswith("sha256 mismatch: expected " + "ab" * 32)
    hub.wrong_etag.add(key)
    announced = download(*key, local_dir=tmp_path / "b", endpoint=hub.endpoint)
    assert "sha256 mismatch" in announced.error


def test_missing_file_is_a_result_not_an_exception(hub: FakeHub, tmp_path: Path) -> None:
    result = download("acme/none", "nothing.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    assert result.path is None and result.error.startswith("download failed")


def test_pull_checks_model_and_adapter(hub: FakeHub, tiny_qwen3: Path, tiny_qwen3_lora: Path, broken_adapters: dict[str, Path], tmp_path: Path) -> None:
    hub.files[("acme/tiny-GGUF", "tiny.gguf")] = tiny_qwen3.read_bytes()
    hub.files[("acme/lora", "good.gguf")] = tiny_qwen3_lora.read_bytes()
    hub.files[("acme/lora", "wrong.gguf")] = broken_adapters["wrong_shapes"].read_bytes()
    ok = pull("acme/tiny-GGUF", "tiny.gguf", "acme/lora", "good.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    assert [r.ok for r in ok] == [True, True]
    assert ok[1].check is not None and ok[1].check.info["rank"] == 4
    bad = pull("acme/tiny-GGUF", "tiny.gguf", "acme/lora", "wrong.gguf", cache_dir=tmp_path / "hub", endpoint=hub.endpoint)
    assert bad[0].ok and not bad[1].ok
    assert "do not multiply" in bad[1].error_line()

    listed = {p.path.name: p for p in list_present([], cache_dir=tmp_path / "hub")}
    assert set(listed) == {"tiny.gguf", "good.gguf", "wrong.gguf"}
    assert listed["tiny.gguf"].check.ok and listed["good.gguf"].check.ok
    assert listed["tiny.gguf"].size == tiny_qwen3.stat().st_size


def test_cli_pull_then_list_and_verify(hub: FakeHub, tiny_qwen3: Path, tiny_qwen3_lora: Path, tmp_path: Path) -> None:
    """``python -m models pull`` honours HF_ENDPOINT; verify then finds the pulled pair by itself."""
    hub.files[("acme/tiny-GGUF", "tiny.gguf")] = tiny_qwen3.read_bytes()
    hub.files[("acme/lora", "good.gguf")] = tiny_qwen3_lora.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=str(tmp_path / "hub"), AGENT_DATA_DIR=str(tmp_path / "data"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "models", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

    proc = run("pull", "--model-repo", "acme/tiny-GGUF", "--model-file", "tiny.gguf", "--adapter-repo", "acme/lora", "--adapter-file", "good.gguf")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("sha256 verified") == 2
    listing = run("list")
    assert listing.returncode == 0 and "tiny.gguf" in listing.stdout and "good.gguf" in listing.stdout
    assert "refused" not in listing.stdout
