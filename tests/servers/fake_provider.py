"""Shared core of the fake model-provider servers (fake_anthropic.py,
fake_openai.py): a loopback HTTP server that answers an API endpoint from a
script of recorded responses and records every request it got.

Standard library only. Binds 127.0.0.1 on a free port, prints the port on
stdout (one line), and exits by itself after --lifetime seconds.

Control endpoints (for tests):
  POST /_script    body {"fixture": "<name or path>"} or {"responses": [...]}:
                   replace the script and forget recorded requests
  GET  /_requests  the requests so far: [{"path", "headers", "body"}]
                   (headers lower-cased, body parsed as JSON when it is)
  POST /_shutdown  stop now

A fixture is a JSON file {"description": ..., "responses": [...]} where each
response is one of
  {"status": 200, "headers": {...}, "json": {...}}      a JSON body
  {"status": 500, "body": "raw text"}                   a raw body
  {"status": 200, "body_latin1": "..."}                 raw bytes, one per character
                   (to send invalid UTF-8)
  {"sse": [{"event": "name", "data": {...} or "text"}, ...],
   "cut_after_bytes": N}                                an event stream,
                   optionally cut after N bytes (the connection then closes)
  "stall_after_events": N with an "sse" (or a streamed "json") response:
                   send N events, then hold the connection open without a
                   word for "stall_seconds" (default 60): a model that hangs
                   mid-answer, for tests that cancel it
and may carry "delay" (seconds before answering). A 200 "json" response
to a request with "stream": true is sent as the provider's event stream
(the wrapper's to_sse), so one fixture serves both modes. Each request to the API
endpoint takes the next response; past the end the server answers 500.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, fixtures_dir):
        self.lock = threading.Lock()
        self.fixtures_dir = fixtures_dir
        self.responses = []
        self.next = 0
        self.requests = []

    def load(self, spec):
        if "responses" in spec:
            responses = spec["responses"]
        else:
            name = spec["fixture"]
            path = name
            if not os.path.isabs(path) and not os.path.exists(path):
                path = os.path.join(self.fixtures_dir, name)
                if not path.endswith(".json"):
                    path += ".json"
            with open(path, encoding="utf-8") as f:
                responses = json.load(f)["responses"]
        with self.lock:
            self.responses = responses
            self.next = 0
            self.requests = []

    def take(self):
        with self.lock:
            if self.next >= len(self.responses):
                return None
            r = self.responses[self.next]
            self.next += 1
            return r


def sse_bytes(events):
    out = []
    for ev in events:
        data = ev.get("data", "")
        if not isinstance(data, str):
            data = json.dumps(data, separators=(",", ":"))
        lines = []
        if ev.get("event"):
            lines.append("event: " + ev["event"])
        for line in data.split("\n"):
            lines.append("data: " + line)
        out.append("\n".join(lines) + "\n\n")
    return "".join(out).encode("utf-8")


def make_handler(state, api_paths, check_request, to_sse):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def send_json(self, status, obj, headers=None):
            body = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(body)

        def read_body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def do_GET(self):
            if self.path == "/_requests":
                with state.lock:
                    reqs = list(state.requests)
                self.send_json(200, reqs)
            else:
                self.send_json(404, {"error": {"type": "not_found", "message": "no such path: " + self.path}})

        def do_POST(self):
            raw = self.read_body()
            if self.path == "/_script":
                try:
                    state.load(json.loads(raw or b"{}"))
                except Exception as e:  # report, do not die
                    self.send_json(400, {"error": {"type": "bad_script", "message": str(e)}})
                    return
                self.send_json(200, {"ok": True})
                return
            if self.path == "/_shutdown":
                self.send_json(200, {"ok": True})
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return
            if self.path not in api_paths:
                self.send_json(404, {"error": {"type": "not_found_error", "message": "no such endpoint: " + self.path}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            with state.lock:
                state.requests.append({
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                })
            problem = check_request(self.headers, body)
            if problem:
                status, obj = problem
                self.send_json(status, obj)
                return
            r = state.take()
            if r is None:
                self.send_json(500, {"error": {"type": "fake_server", "message": "script exhausted"}})
                return
            if r.get("delay"):
                time.sleep(r["delay"])
            if (isinstance(body, dict) and body.get("stream") and "json" in r
                    and r.get("status", 200) == 200 and to_sse):
                # the client asked for a stream: send the recorded answer
                # as the provider would have streamed it
                r = dict(r, sse=to_sse(r["json"]))
            self.answer(r)

        def answer(self, r):
            status = r.get("status", 200)
            headers = r.get("headers", {})
            if "sse" in r:
                data = sse_bytes(r["sse"])
                cut = r.get("cut_after_bytes")
                if cut is not None:
                    data = data[:cut]
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                for k, v in headers.items():
                    self.send_header(k, str(v))
                self.end_headers()
                # write event by event, as a real stream arrives
                pos = 0
                sent = 0
                while pos < len(data):
                    if r.get("stall_after_events") is not None and sent >= r["stall_after_events"]:
                        time.sleep(r.get("stall_seconds", 60))
                        break
                    nxt = data.find(b"\n\n", pos)
                    end = len(data) if nxt < 0 else nxt + 2
                    self.wfile.write(data[pos:end])
                    self.wfile.flush()
                    pos = end
                    sent += 1
                self.close_connection = True
                return
            if "json" in r:
                self.send_json(status, r["json"], headers)
                return
            if "body_latin1" in r:
                # bytes that are not UTF-8 (each character is one byte)
                body = r["body_latin1"].encode("latin-1")
            else:
                body = r.get("body", "").encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", headers.get("content-type", "text/plain"))
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                if k.lower() != "content-type":
                    self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def main(name, api_paths, fixtures_dir, check_request=lambda h, b: None, to_sse=None):
    ap = argparse.ArgumentParser(description="fake %s API server for tests" % name)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=120.0,
                    help="exit after this many seconds (default 120)")
    ap.add_argument("--fixture", help="fixture to load at start")
    args = ap.parse_args()
    state = State(fixtures_dir)
    if args.fixture:
        state.load({"fixture": args.fixture})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state, api_paths, check_request, to_sse))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)

    def expire():
        time.sleep(args.lifetime)
        os._exit(0)

    threading.Thread(target=expire, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    sys.stdout.flush()
