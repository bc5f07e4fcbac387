"""Downloads against a local server that speaks the hub's endpoints.

``GET/HEAD /{repo_id}/resolve/{revision}/{filename}`` with the headers huggingface_hub
reads: X-Repo-Commit, ETag (git blob sha1; for an LFS file its sha256, also in X-Linked-Etag),
X-Linked-Size, Content-Length, and Range requests for resuming. For ``snapshot_download``:
``GET /api/models/{repo_id}/revision/{revision}`` (repo info, the commit) and
``GET /api/models/{repo_id}/tree/{revision}`` (the recursive file listing, LFS metadata).
"""

from __future__ import annotations

import hashlib
import json
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

from models.profiles import PROFILES
from models.pull import download, list_present, pull
from models.resolve import find_pulled

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


LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")


def is_lfs(filename: str) -> bool:
    return filename.endswith(LFS_SUFFIXES)


def git_blob_sha1(body: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if status == 404:
                self.send_header("X-Error-Code", "RepoNotFound")
            self.end_headers()
            self.wfile.write(body)

        def _api(self) -> bool:
            """Repo info and tree listing; True when the path was an API call."""
            path = self.path.split("?")[0]
            m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?", path)
            if not m:
                return False
            repo, kind = m[1], m[2]
            files = {name: body for (r, name), body in hub.files.items() if r == repo}
            if not files:
                self._json(404, {"error": "Repository not found"})
                return True
            if kind == "revision":
                self._json(200, {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in sorted(files)]})
                return True
            entries: list[dict[str, object]] = []
            for folder in sorted({n.rsplit("/", 1)[0] for n in files if "/" in n}):
                entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": folder})
            for name, body in sorted(files.items()):
                entry: dict[str, object] = {"type": "file", "oid": git_blob_sha1(body), "size": len(body), "path": name}
                if is_lfs(name):
                    entry["lfs"] = {"oid": hashlib.sha256(body).hexdigest(), "size": len(body), "pointerSize": 134}
                entries.append(entry)
            self._json(200, entries)
            return True

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
            self.send_header("X-Repo-Commit", COMMIT)
            if is_lfs(key[1]):
                sha = "0" * 64 if key in hub.wrong_etag else hashlib.sha256(body).hexdigest()
                self.send_header("ETag", f'"{sha}"')
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(body)))
            else:
                self.send_header("ETag", f'"{git_blob_sha1(body)}"')
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
            if self._api():
                return
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
    # A refused file is removed, so nothing resolves to it later.
    assert announced.path is None and not (tmp_path / "b" / "bad.gguf").exists()


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


# --------------------------------------------------------------------------- profiles, end to end

REFERENCE = PROFILES["reference"]
RLVR = PROFILES["calendar-rlvr"]


def cli_env(hub: FakeHub, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HUB_CACHE=str(tmp_path / "hub"), AGENT_DATA_DIR=str(tmp_path / "data"), **extra)
    return env


def run_module(module: str, args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, input=stdin,
                          capture_output=True, text=True, timeout=600)


def file_gets(hub: FakeHub) -> set[str]:
    return {path.split("?")[0] for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path}


def test_bare_pull_fetches_exactly_the_reference_pair_and_everything_resolves_it(
    hub: FakeHub, tiny_qwen3: Path, tiny_qwen3_lora: Path, tmp_path: Path
) -> None:
    """``python -m models pull`` with no flags: the two reference files, nothing else; then every
    entry point (models verify, the agent, the bot's launchd check) finds both with no flags."""
    hub.files[(REFERENCE.model_repo, REFERENCE.model_file)] = tiny_qwen3.read_bytes()
    hub.files[(REFERENCE.adapter_repo, REFERENCE.adapter_file)] = tiny_qwen3_lora.read_bytes()
    hub.files[(REFERENCE.model_repo, "Qwen3-4B-Instruct-2507-Q4_K_M.gguf")] = b"GGUF other quantization"
    env = cli_env(hub, tmp_path)

    pulled = run_module("models", ["pull"], env)
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.count("sha256 verified") == 2
    assert file_gets(hub) == {
        f"/{REFERENCE.model_repo}/resolve/main/{REFERENCE.model_file}",
        f"/{REFERENCE.adapter_repo}/resolve/main/{REFERENCE.adapter_file}",
    }
    assert hub.endpoint.startswith("http://127.0.0.1:")  # HF_ENDPOINT was honoured: the fake saw the GETs

    verified = run_module("models", ["verify"], env)
    assert verified.returncode == 0, verified.stderr
    assert "model: " in verified.stdout and "rank: 4" in verified.stdout

    code = (
        "from agent.config import load_settings; from bot.launchd_service import check_model; "
        "from models.resolve import resolve_or_exit; s = load_settings(); "
        "print(resolve_or_exit(s.model_choice(), fallback_demo=True)); print(check_model(s))"
    )
    both = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert both.returncode == 0, both.stderr
    agent_pair, launchd_pair = both.stdout.strip().splitlines()
    for line in (agent_pair, launchd_pair):
        assert REFERENCE.model_file in line and REFERENCE.adapter_file in line, line
    assert "note:" not in both.stderr  # the pulled pair, not the demo

    listing = run_module("models", ["list"], env)
    assert listing.returncode == 0, listing.stderr
    marked = [line for line in listing.stdout.splitlines() if line.startswith("*")]
    assert any(REFERENCE.model_file in line for line in marked) and any(REFERENCE.adapter_file in line for line in marked)
    assert any(line.split()[1:3] == ["reference", "pulled"] for line in marked)
    assert "demo" in listing.stdout


def build_peft_adapter(base_gguf: Path, out: Path) -> None:
    """A real PEFT LoRA (q and v projections, rank 4) on the tiny qwen3, as TRL/peft save it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from agent.train.base import gguf_config

    model = AutoModelForCausalLM.from_pretrained(
        str(base_gguf.parent), gguf_file=base_gguf.name, config=gguf_config(base_gguf), dtype=torch.float32
    )
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    with torch.no_grad():  # B is zero after init: give it values, so the converted file carries them
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.full_like(param, 0.01))
    peft_model.save_pretrained(str(out))


def test_peft_profile_is_downloaded_converted_and_verified(hub: FakeHub, tiny_qwen3: Path, tmp_path: Path) -> None:
    import peft  # noqa: F401  (the train extra installs it: a broken install fails here, it is not skipped)
    peft_dir = tmp_path / "peft"
    build_peft_adapter(tiny_qwen3, peft_dir)
    hub.files[(RLVR.model_repo, RLVR.model_file)] = tiny_qwen3.read_bytes()
    for f in peft_dir.iterdir():
        hub.files[(RLVR.adapter_repo, f"{RLVR.adapter_subdir}/{f.name}")] = f.read_bytes()
    hub.files[(RLVR.adapter_repo, "model.safetensors")] = b"merged full weights: must not be fetched"
    hub.files[(RLVR.adapter_repo, "README.md")] = b"# model card"
    env = cli_env(hub, tmp_path)

    pulled = run_module("models", ["pull", "--profile", "calendar-rlvr"], env)
    assert pulled.returncode == 0, pulled.stderr
    fetched = file_gets(hub)
    files = {p.split("/resolve/", 1)[1].split("/", 1)[1] for p in fetched if p.startswith(f"/{RLVR.adapter_repo}/")}
    assert files and all(f.startswith("adapter/") for f in files), fetched  # allow_patterns: adapter/ only
    assert f"/{RLVR.adapter_repo}/resolve/{COMMIT}/adapter/adapter_model.safetensors" in fetched
    converted = tmp_path / "data" / "models" / RLVR.converted_file
    assert converted.is_file()
    assert "AGENT_PROFILE=calendar-rlvr" in pulled.stdout

    verified = run_module("models", ["verify"], {**env, "AGENT_PROFILE": "calendar-rlvr"})
    assert verified.returncode == 0, verified.stderr
    assert f"adapter: {converted}" in verified.stdout
    assert "rank: 4" in verified.stdout and "tensor pairs: 4" in verified.stdout  # q and v of 2 layers
    # The default profile is still the reference pair, which is not pulled.
    assert run_module("models", ["verify"], env).returncode == 2


@pytest.mark.parametrize("missing", ["model", "adapter", "peft"])
def test_a_404_is_one_line_exit_2_and_leaves_nothing_the_agent_would_load(
    hub: FakeHub, tiny_qwen3: Path, tiny_qwen3_lora: Path, tmp_path: Path, missing: str
) -> None:
    if missing != "model":
        hub.files[(REFERENCE.model_repo, REFERENCE.model_file)] = tiny_qwen3.read_bytes()
    if missing == "model":
        hub.files[(REFERENCE.adapter_repo, REFERENCE.adapter_file)] = tiny_qwen3_lora.read_bytes()
    if missing == "peft":  # the repo exists, but holds no adapter/ folder
        hub.files[(RLVR.adapter_repo, "README.md")] = b"# model card"
    env = cli_env(hub, tmp_path)

    pulled = run_module("models", ["pull"] + (["--profile", "calendar-rlvr"] if missing == "peft" else []), env)
    assert pulled.returncode == 2
    lines = pulled.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, pulled.stderr
    repo, name = {
        "model": (REFERENCE.model_repo, REFERENCE.model_file),
        "adapter": (REFERENCE.adapter_repo, REFERENCE.adapter_file),
        "peft": (RLVR.adapter_repo, "adapter/"),
    }[missing]
    assert f"{repo}/{name}" in errors[0]
    assert "404" in errors[0] or "EntryNotFound" in errors[0] or "no PEFT adapter" in errors[0]
    if missing == "peft":
        assert "not confirmed" in errors[0]
    # Nothing an entry point would pick up: verify refuses, the converted adapter does not exist.
    profile_env = {**env, "AGENT_PROFILE": "calendar-rlvr"} if missing == "peft" else env
    assert run_module("models", ["verify"], profile_env).returncode == 2
    assert not (tmp_path / "data" / "models" / RLVR.converted_file).exists()
    if missing != "peft":
        assert find_pulled(repo, name, tmp_path / "data" / "models", cache_dir=tmp_path / "hub") is None


def test_unknown_profile_is_one_line_listing_the_known_ones(hub: FakeHub, tmp_path: Path) -> None:
    for args, extra in ((["pull", "--profile", "nope"], {}), (["verify"], {"AGENT_PROFILE": "nope"})):
        result = run_module("models", args, cli_env(hub, tmp_path, **extra))
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == ["error: unknown profile 'nope': known profiles are reference, calendar-rlvr"]
    assert hub.requests == []
