"""A local stand-in for the Telegram Bot API, so the real bot process can be tested end to end.

Only the Telegram cloud is faked: the bot under test talks real HTTP to this server
(``TELEGRAM_API_BASE_URL``). The server records every request (method and parameters as
sent), serves ``getUpdates`` long polls from updates the test injects, and confirms updates
the way Telegram does: an update is dropped once a later ``getUpdates`` asks for an offset
past it. A message text over 4096 characters is refused (400 "message is too long"), as Telegram does. Faults to inject: fail the next N calls of a method (HTTP 502, or any status and
description Telegram uses, e.g. 400 "query is too old"); a whole outage for a while (every
method answers 502); chats that answer 403 (the user blocked the bot) or 400 (chat not
found); and a wrong (or, after ``revoke_token``, revoked) token gets 401 Unauthorized, as
from Telegram.

``sendDocument`` takes only what the real API takes for a new file: multipart/form-data with
``chat_id`` and a ``document`` part that is a file (with a file name) and not empty; anything
else answers 400 with Telegram's description. The file is kept (``documents``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MESSAGE_LIMIT = 4096  # characters of one message's text; a longer one is refused (400)
BOT_USER = {"id": 999000, "is_bot": True, "first_name": "Iljeong", "username": "iljeong_test_bot",
            "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart request, as received."""

    filename: str
    content_type: str
    data: bytes


class BadForm(ValueError):
    """A body that is not the multipart/form-data it claims to be."""


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, Upload]]:
    """Form fields and file parts of a multipart/form-data body (a part with a file name is a file)."""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart() or message.defects:
        raise BadForm("not a multipart body")
    fields: dict[str, str] = {}
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            raise BadForm("a part without a name")
        data = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is None:
            fields[str(name)] = data.decode()
        else:
            files[str(name)] = Upload(filename, part.get_content_type(), data)
    return fields, files


@dataclass
class Call:
    """One request the bot made: the Bot API method and its parameters (values as strings)."""

    method: str
    params: dict[str, str]
    at: float
    status: int = 200  # what the fake answered (502 when told to fail)
    files: dict[str, Upload] = field(default_factory=dict)  # multipart file parts, by field name

    def json(self, name: str) -> Any:
        """A parameter the client sent JSON-encoded (reply_markup, allowed_updates, commands)."""
        return json.loads(self.params[name])

    @property
    def chat_id(self) -> int | None:
        value = self.params.get("chat_id")
        return int(value) if value is not None else None

    @property
    def text(self) -> str | None:
        return self.params.get("text")


class FakeTelegram:
    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[Call] = []
        self._updates: list[dict[str, Any]] = []
        self._confirmed = 0  # every update_id below this has been acknowledged
        self._cond = threading.Condition()
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._failures: dict[str, list[tuple[int, str]]] = {}
        self._outage_until = 0.0  # time.monotonic() before which every method answers 502
        self._refusing: dict[int, tuple[int, str]] = {}  # chat id -> (status, description)
        self._revoked = False  # every request answers 401, as for a wrong token
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ---- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeTelegram:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # ---- what the test injects --------------------------------------------------------------

    def push(self, body: dict[str, Any]) -> int:
        """Any update body (without update_id), e.g. an edited message or a malformed poll."""
        return self._push(body)

    def _push(self, body: dict[str, Any]) -> int:
        with self._cond:
            update_id = next(self._update_ids)
            self._updates.append({"update_id": update_id, **body})
            self._cond.notify_all()
        return update_id

    def send_text(self, chat_id: int, user_id: int, text: str, chat_type: str = "private") -> int:
        """A user writes ``text`` in a chat; returns the update id."""
        chat = {"id": chat_id, "type": chat_type}
        chat.update({"first_name": "U"} if chat_type == "private" else {"title": "Group"})
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
            "text": text,
        }
        if text.startswith("/"):
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        return self._push({"message": message})

    def tap(self, chat_id: int, user_id: int, data: Any, message_id: int = 1, chat_type: str = "private") -> int:
        """A user taps an inline button carrying ``data`` under message ``message_id``."""
        message = {"message_id": message_id, "date": int(time.time()),
                   "chat": {"id": chat_id, "type": chat_type}, "from": BOT_USER, "text": "…"}
        query = {"id": str(next(self._update_ids)), "chat_instance": f"ci{chat_id}",
                 "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"},
                 "message": message, "data": data}
        return self._push({"callback_query": query})

    def fail_next(self, method: str, times: int, status: int = 502, description: str = "Bad Gateway") -> None:
        """Answer the next ``times`` calls of ``method`` with ``status`` (502 Bad Gateway by default)."""
        with self._cond:
            self._failures[method] = [(status, description)] * times

    def outage(self, seconds: float | None = None) -> None:
        """Every method (getUpdates too) answers 502 Bad Gateway: for the next ``seconds``, or
        (None) until ``end_outage``, so a test can end it once it has seen what it waits for
        rather than hope the bot gets there within a wall-clock window."""
        with self._cond:
            self._outage_until = float("inf") if seconds is None else time.monotonic() + seconds

    def end_outage(self) -> None:
        with self._cond:
            self._outage_until = 0.0
            self._cond.notify_all()

    def revoke_token(self) -> None:
        """From now on the token is refused (401 Unauthorized), as after a revoke in @BotFather."""
        with self._cond:
            self._revoked = True
            self._cond.notify_all()

    def refuse_chat(self, chat_id: int, status: int, description: str) -> None:
        """Sends to this chat fail for good, e.g. 403 "Forbidden: bot was blocked by the user"."""
        with self._cond:
            self._refusing[chat_id] = (status, description)

    # ---- what the test inspects -------------------------------------------------------------

    def requests(self, method: str | None = None, chat_id: int | None = None) -> list[Call]:
        with self._cond:
            calls = list(self.calls)
        return [c for c in calls if (method is None or c.method == method)
                and (chat_id is None or c.chat_id == chat_id)]

    def documents(self, chat_id: int) -> list[Call]:
        """The sendDocument calls Telegram would have delivered to a chat (files in ``.files``)."""
        return [c for c in self.requests("sendDocument", chat_id) if c.status == 200]

    def texts(self, chat_id: int) -> list[str]:
        """The texts delivered to a chat (sends the fake failed on purpose are left out)."""
        return [c.text or "" for c in self.requests("sendMessage", chat_id) if c.status == 200]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        """Poll until ``predicate()`` is truthy (bounded); return its value or fail with ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            with self._cond:
                self._cond.wait(0.05)

    def confirmed_below(self) -> int:
        with self._cond:
            return self._confirmed

    # ---- the HTTP side ----------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                kind = self.headers.get("Content-Type", "")
                files: dict[str, Upload] = {}
                if kind.startswith("multipart/form-data"):
                    try:
                        params, files = parse_multipart(kind, body)
                    except (BadForm, UnicodeDecodeError):
                        return self._reply(400, {"ok": False, "error_code": 400,
                                                 "description": "Bad Request: can't parse request body"})
                elif "json" in kind:
                    raw = body.decode()
                    params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in json.loads(raw or "{}").items()}
                else:
                    params = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
                prefix = f"/bot{fake.token}/"
                if fake._revoked or not self.path.startswith(prefix):
                    with fake._cond:
                        fake.calls.append(Call("?" + self.path.rsplit("/", 1)[-1], params, time.monotonic(), 401))
                        fake._cond.notify_all()
                    if self.path.startswith("/bot"):  # a well-formed path with someone else's token
                        return self._reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
                    return self._reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                method = self.path[len(prefix):]
                status, answer = fake._dispatch(method, params, files)
                self._reply(status, answer)

            do_GET = do_POST

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the bot hung up (stopped, killed)
                    pass

        return Handler

    def _dispatch(
        self, method: str, params: dict[str, str], files: dict[str, Upload] | None = None
    ) -> tuple[int, dict[str, Any]]:
        with self._cond:
            if method == "getUpdates" and time.monotonic() < self._outage_until:
                self.calls.append(Call(method, params, time.monotonic(), 502))
                self._cond.notify_all()
                return 502, {"ok": False, "error_code": 502, "description": "Bad Gateway"}
        if method != "getUpdates":
            with self._cond:
                call = Call(method, params, time.monotonic(), files=dict(files or {}))
                self.calls.append(call)
                self._cond.notify_all()
                failure = None
                if time.monotonic() < self._outage_until:
                    failure = (502, "Bad Gateway")
                elif self._failures.get(method):
                    failure = self._failures[method].pop(0)
                elif call.chat_id in self._refusing and method.startswith(("send", "edit")):
                    failure = self._refusing[call.chat_id]
                if failure is not None:
                    call.status = failure[0]
                    return failure[0], {"ok": False, "error_code": failure[0], "description": failure[1]}
        if method == "getMe":
            return 200, {"ok": True, "result": BOT_USER}
        if method == "getUpdates":
            return 200, {"ok": True, "result": self._get_updates(params)}
        if method in ("sendMessage", "editMessageText"):
            if len(params.get("text", "")) > MESSAGE_LIMIT:  # Telegram: 4096 characters at most
                with self._cond:
                    call.status = 400
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}
            chat_id = int(params["chat_id"])
            message_id = next(self._message_ids) if method == "sendMessage" else int(params["message_id"])
            result = {"message_id": message_id, "date": int(time.time()),
                      "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
                      "from": BOT_USER, "text": params.get("text", "")}
            if "reply_markup" in params:
                result["reply_markup"] = json.loads(params["reply_markup"])
            return 200, {"ok": True, "result": result}
        if method == "sendDocument":
            return self._send_document(call)
        if method == "getMyCommands":
            return 200, {"ok": True, "result": []}
        if method in ("deleteWebhook", "setMyCommands", "answerCallbackQuery", "sendChatAction",
                      "editMessageReplyMarkup", "close", "logOut"):
            return 200, {"ok": True, "result": True}
        return 404, {"ok": False, "error_code": 404, "description": f"Not Found: method {method}"}

    def _send_document(self, call: Call) -> tuple[int, dict[str, Any]]:
        """A new file, as the real API checks it (a file_id or URL string is not accepted here:
        the bot only ever uploads); a refused call keeps status 400 in ``calls``."""
        upload = call.files.get("document")
        problem = None
        if not call.params.get("chat_id"):
            problem = "Bad Request: chat_id is empty"
        elif upload is None and "document" in call.params:
            problem = "Bad Request: wrong remote file identifier specified: Wrong string length"
        elif upload is None:
            problem = "Bad Request: there is no document in the request"
        elif not upload.data:
            problem = "Bad Request: file must be non-empty"
        elif len(call.params.get("caption", "")) > 1024:
            problem = "Bad Request: message caption is too long"
        if problem is not None:
            with self._cond:
                call.status = 400
            return 400, {"ok": False, "error_code": 400, "description": problem}
        chat_id = int(call.params["chat_id"])
        result = {"message_id": next(self._message_ids), "date": int(time.time()),
                  "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"}, "from": BOT_USER,
                  "document": {"file_id": f"doc{call.at}", "file_unique_id": f"u{call.at}",
                               "file_name": upload.filename, "mime_type": upload.content_type,
                               "file_size": len(upload.data)}}
        if call.params.get("caption"):
            result["caption"] = call.params["caption"]
        return 200, {"ok": True, "result": result}

    def _get_updates(self, params: dict[str, str]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), 2.0)  # short polls keep tests snappy
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        with self._cond:
            self.calls.append(Call("getUpdates", params, time.monotonic()))
            self._cond.notify_all()
            if offset:
                self._confirmed = max(self._confirmed, offset)
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while True:
                ready = [u for u in self._updates if u["update_id"] >= offset][:limit]
                remaining = deadline - time.monotonic()
                if ready or remaining <= 0:
                    return ready
                self._cond.wait(remaining)
