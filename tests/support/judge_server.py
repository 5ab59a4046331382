"""A local OpenAI-compatible judge server (``http.server`` on 127.0.0.1, port 0) that plays back a
script of answers and records every request, and the chat-completion answers it plays; no network,
no real model."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The judge's API key in the tests (a secret the pages and logs must never show).
SECRET = "sk-test-SECRET-0123456789abcdefXYZ"
#: A well-formed studio-dialect answer: E4 set with a reason, grade 0.6.
GOOD = json.dumps({
    "errors": {c: {"present": c == "E4", "reason": "step 3 uses trajectory[5]" if c == "E4" else ""}
               for c in ("E1", "E2", "E3", "E4", "E5", "E6")},
    "grade": 0.6,
    "is_correct": False,
    "reasoning": "main flow right, one dependency broken",
})
#: A clean answer in the error_list dialect.
GOOD_CLEAN = json.dumps({"is_correct": True, "grade": 1.0, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "ok"})


def completion(content: str, model: str = "judge-m") -> dict:
    """An OpenAI chat-completion response body whose one choice says ``content``."""
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


class FakeServer:
    """Plays back a script of (status, body, headers); records every request."""

    def __init__(self):
        self.script: list[tuple[int, object, dict]] = []
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                status, payload, headers = server.script.pop(0) if server.script else (500, {"error": "script empty"}, {})
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, content: str):
        self.script.append((200, completion(content), {}))

    def fail(self, status: int, body: object = None, headers: dict | None = None):
        self.script.append((status, body if body is not None else {"error": {"message": f"status {status}"}}, headers or {}))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
