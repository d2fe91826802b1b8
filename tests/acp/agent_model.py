#!/usr/bin/env python3
"""tests/acp/agent_model.py: a scripted model server for the external ACP
agents' own model calls, in the providers' wire formats: Anthropic's
Messages API (Claude Code, through claude-code-acp) and OpenAI's Responses
API (Codex, through codex-acp), streamed as the providers stream them (the
event builders of tests/servers/fake_anthropic.py and fake_openai.py).

The agents make side requests too (titles, token counts, a quota probe):
only a request that offers the agent's editing tools is its main loop, and
its answer depends on how many tool results the request already carries:

  Claude:  1. Write hello.txt   2. Bash "cat hello.txt; id -u"   3. a text answer
  Codex:   1. apply_patch adding hello.txt (through exec_command)
           2. exec_command "cat hello.txt; id -u"                3. a text answer

Anything else gets a short text. Binds 127.0.0.1, prints its port, records
every request (GET /_requests), exits after --lifetime seconds.
"""
import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
import fake_anthropic  # noqa: E402
import fake_openai  # noqa: E402
import fake_provider  # noqa: E402

WORK = "/workspace"
requests = []
lock = threading.Lock()


def anthropic_answer(body):
    tools = [t.get("name") for t in body.get("tools") or []]
    write = next((t for t in tools if t in ("mcp__acp__Write", "Write")), None)
    bash = next((t for t in tools if t in ("mcp__acp__Bash", "Bash")), None)
    content = [{"type": "text", "text": "ok"}]
    stop = "end_turn"
    if write and bash and body.get("stream"):
        done = sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                   for b in m["content"] if b.get("type") == "tool_result")
        if done == 0:
            content = [{"type": "text", "text": "I will write the file."},
                       {"type": "tool_use", "id": "toolu_write", "name": write,
                        "input": {"file_path": WORK + "/hello.txt", "content": "hello from claude\n"}}]
            stop = "tool_use"
        elif done == 1:
            content = [{"type": "tool_use", "id": "toolu_bash", "name": bash,
                        "input": {"command": "cat " + WORK + "/hello.txt; id -u", "description": "Show the file",
                                  "timeout": 60000}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "Claude is done: the file is written and shown."}]
    return {"id": "msg_%d" % len(requests), "type": "message", "role": "assistant", "model": body.get("model"),
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 10}}


PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from codex\n*** End Patch\n"


def responses_answer(body):
    tools = [t.get("name") or t.get("type") for t in body.get("tools") or []]
    items = body.get("input") or []
    done = sum(1 for i in items if isinstance(i, dict) and i.get("type") in ("function_call_output",
                                                                              "custom_tool_call_output"))
    out = [{"type": "message", "id": "msg_x", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]
    if "exec_command" in tools:
        if done == 0:
            if "apply_patch" in tools:
                out = [{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_patch", "name": "apply_patch",
                        "input": PATCH, "status": "completed"}]
            else:
                out = [{"type": "function_call", "id": "fc_1", "call_id": "call_patch", "name": "exec_command",
                        "arguments": json.dumps({"cmd": "apply_patch <<'EOF'\n" + PATCH + "EOF\n"}),
                        "status": "completed"}]
        elif done == 1:
            out = [{"type": "function_call", "id": "fc_2", "call_id": "call_cat", "name": "exec_command",
                    "arguments": json.dumps({"cmd": "cat hello.txt; id -u"}), "status": "completed"}]
        else:
            out = [{"type": "message", "id": "msg_done", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Codex is done: the file is written and shown.",
                                 "annotations": []}]}]
    return {"id": "resp_%d" % len(requests), "object": "response", "created_at": int(time.time()),
            "status": "completed", "model": body.get("model"), "output": out,
            "usage": {"input_tokens": 50, "output_tokens": 10, "total_tokens": 60,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(fake_provider.sse_bytes(events))
        self.close_connection = True

    def do_GET(self):
        if self.path == "/_requests":
            with lock:
                self.send(200, list(requests))
        else:
            # e.g. a models list: nothing to offer
            self.send(200, {"data": [], "models": []})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        with lock:
            requests.append({"path": self.path, "body": body})
        if path.endswith("/messages/count_tokens"):
            self.send(200, {"input_tokens": 50})
        elif path.endswith("/messages"):
            msg = anthropic_answer(body)
            if body.get("stream"):
                self.stream(fake_anthropic.to_sse(msg))
            else:
                self.send(200, msg)
        elif path.endswith("/responses"):
            self.stream(fake_openai.responses_sse(responses_answer(body)))
        else:
            self.send(404, {"error": {"message": "no such endpoint: " + self.path}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lifetime", type=float, default=600)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=lambda: (time.sleep(args.lifetime), os._exit(0)), daemon=True).start()
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
