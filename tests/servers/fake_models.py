#!/usr/bin/env python3
"""Fake model-list endpoints for `lash models` tests: GET /v1/models in the
OpenAI shape ({"object": "list", "data": [{"id", "object", "created",
"owned_by"}]}, Bearer key optional unless --key) or, with --flavor
anthropic, in Anthropic's shape ({"data": [{"type": "model", "id",
"display_name", "created_at"}], "has_more", "first_id", "last_id"}, paged
by limit/after_id at most two per page, x-api-key and anthropic-version
required). --fail STATUS answers every request with that error. Loopback
only; prints its port; exits after --lifetime seconds."""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

OPENAI = [("gpt-4.1", "openai"), ("gpt-4.1-mini", "openai"), ("llama3.2", "library")]
ANTHROPIC = [("claude-sonnet-4-6", "Claude Sonnet 4.6"), ("claude-opus-4-1", "Claude Opus 4.1"),
             ("claude-haiku-4-5", "Claude Haiku 4.5")]


def make_handler(args):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def send(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            u = urlparse(self.path)
            if u.path != "/v1/models":
                return self.send(404, {"error": {"type": "not_found_error", "message": "no route " + u.path}})
            if args.fail:
                return self.send(args.fail, {"error": {"type": "server_error", "message": "the fake fails on purpose"}})
            if args.flavor == "anthropic":
                return self.anthropic(parse_qs(u.query))
            if args.key and self.headers.get("authorization") != "Bearer " + args.key:
                return self.send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                                 "code": "invalid_api_key"}})
            self.send(200, {"object": "list", "data": [{"id": i, "object": "model", "created": 1700000000,
                                                         "owned_by": o} for i, o in OPENAI]})

        def anthropic(self, q):
            if self.headers.get("x-api-key") != args.key or not self.headers.get("anthropic-version"):
                return self.send(401, {"type": "error", "error": {"type": "authentication_error",
                                                                  "message": "invalid x-api-key"}})
            ids = [i for i, _ in ANTHROPIC]
            start = 0
            if "after_id" in q:
                start = ids.index(q["after_id"][0]) + 1
            limit = min(int(q.get("limit", ["20"])[0]), 2)
            page = ANTHROPIC[start:start + limit]
            self.send(200, {"data": [{"type": "model", "id": i, "display_name": n,
                                      "created_at": "2025-01-01T00:00:00Z"} for i, n in page],
                            "has_more": start + limit < len(ANTHROPIC),
                            "first_id": page[0][0] if page else None, "last_id": page[-1][0] if page else None})
    return H


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavor", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--key")
    ap.add_argument("--fail", type=int)
    ap.add_argument("--lifetime", type=float, default=60.0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)

    def expire():
        time.sleep(args.lifetime)
        os._exit(0)

    threading.Thread(target=expire, daemon=True).start()
    server.serve_forever(poll_interval=0.2)
