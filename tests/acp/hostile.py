#!/usr/bin/env python3
"""tests/acp/hostile.py: `lash acp` against a client that misbehaves, as
raw JSON lines: malformed JSON, a batch, unknown methods, bad params, calls
before initialize, a 10 MB prompt, a permission request never answered.
Each must get a clear JSON-RPC error (or the documented outcome) and leave
lash serving; at the end lash exits 0 on EOF. Prints TAP.

Usage: hostile.py LASH SPEC WORKDIR
"""
import json
import os
import select
import subprocess
import sys
import time

lash, spec, workdir = sys.argv[1:4]
n = 0
failed = 0


def check(desc, cond, detail=None):
    global n, failed
    n += 1
    if cond:
        print("ok %d - %s" % (n, desc))
    else:
        failed += 1
        print("not ok %d - %s" % (n, desc))
        if detail is not None:
            print("#   " + str(detail)[:1500].replace("\n", "\n#   "))
    sys.stdout.flush()


class Conn:
    def __init__(self, args):
        self.p = subprocess.Popen([lash, "acp"] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(workdir, "hostile.err"), "ab"))
        self.buf = b""
        self.seen = []

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def read(self, timeout=30):
        """The next message from lash, or None past the timeout."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg = json.loads(line)
        self.seen.append(msg)
        return msg

    def until(self, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.read(deadline - time.time())
            if m is None:
                return None
            if pred(m):
                return m
        return None

    def response(self, rid, timeout=30):
        return self.until(lambda m: m.get("id") == rid and "method" not in m, timeout)


def err_of(m):
    return (m or {}).get("error") or {}


c = Conn([spec, "--permission-timeout", "2"])
c.send_raw(b"{this is not json\n")
m = c.read()
check("malformed JSON: Parse error -32700 with a null id",
      m is not None and err_of(m).get("code") == -32700 and m.get("id") is None and "Parse error" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
m = c.response(1)
check("a session before initialize: Invalid Request naming initialize",
      err_of(m).get("code") == -32600 and "initialize" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "one"}})
m = c.response(2)
check("initialize with a bad protocolVersion: Invalid params naming the field",
      err_of(m).get("code") == -32602 and "protocolVersion" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}})
m = c.response(3)
check("then initialize succeeds", m and m.get("result", {}).get("protocolVersion") == 1, m)
c.send([{"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 1}}])
m = c.read()
check("a batch: Invalid Request (ACP takes no batches)", err_of(m).get("code") == -32600 and "batch" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 5, "method": "session/teleport", "params": {}})
m = c.response(5)
check("an unknown method: Method not found naming it",
      err_of(m).get("code") == -32601 and "session/teleport" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {"cwd": "relative/dir", "mcpServers": []}})
m = c.response(6)
check("session/new with a relative cwd: Invalid params", err_of(m).get("code") == -32602 and "absolute" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": workdir, "mcpServers": [{"type": "sse", "name": "x", "url": "http://127.0.0.1:1/", "headers": []}]}})
m = c.response(7)
check("an SSE MCP server: Invalid params saying lash takes stdio and HTTP", err_of(m).get("code") == -32602 and "SSE" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 8, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}})
m = c.response(8)
check("a prompt to an unknown session: Resource not found", err_of(m).get("code") == -32002, m)
c.send({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": workdir, "mcpServers": []}})
m = c.response(9)
sid = (m or {}).get("result", {}).get("sessionId")
check("session/new", sid is not None, m)
c.send({"jsonrpc": "2.0", "id": 10, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}})
m = c.response(10)
check("an audio block: Invalid params (no audio capability)", err_of(m).get("code") == -32602 and "audio" in err_of(m).get("message", ""), m)
c.send({"jsonrpc": "2.0", "id": 11, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "image", "data": "not base64!", "mimeType": "image/png"}]}})
m = c.response(11)
check("an image that is not base64: Invalid params", err_of(m).get("code") == -32602 and "base64" in err_of(m).get("message", ""), m)
big = "x" * (10 * 1024 * 1024)
t0 = time.time()
c.send({"jsonrpc": "2.0", "id": 12, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": big}]}})
m = c.response(12, 60)
check("a 10 MB prompt: Invalid params naming the limit and the option",
      err_of(m).get("code") == -32602 and "--max-prompt-bytes" in err_of(m).get("message", ""), (m, time.time() - t0))
status = open("/proc/%d/status" % c.p.pid).read()
rss = int([l for l in status.splitlines() if l.startswith("VmHWM")][0].split()[1])
check("lash's peak memory after a 10 MB prompt stays under 256 MiB (%d KiB)" % rss, rss < 256 * 1024, rss)
# a permission request nobody answers: denied after --permission-timeout
c.send({"jsonrpc": "2.0", "id": 13, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "write it"}]}})
perm = c.until(lambda m: m.get("method") == "session/request_permission")
check("a permission request comes", perm is not None)
t0 = time.time()
m = c.response(13, 60)
txt = "".join(x["params"]["update"]["content"]["text"] for x in c.seen
              if x.get("method") == "session/update" and x["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
check("unanswered, it is denied after the permission timeout and the turn ends",
      m and m.get("result", {}).get("stopReason") == "end_turn" and "No answer to the permission request within 2 s" in txt,
      (m, txt[-300:]))
cancels = [x for x in c.seen if x.get("method") == "$/cancel_request"]
check("lash withdraws the unanswered requests ($/cancel_request)", len(cancels) >= 1 and cancels[0]["params"]["requestId"] == perm["id"], cancels)
# a response to a request lash never sent, and a notification it does not know: ignored
c.send({"jsonrpc": "2.0", "id": 999, "result": {}})
c.send({"jsonrpc": "2.0", "method": "_vendor/thing", "params": {}})
c.send({"jsonrpc": "2.0", "id": 14, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "yolo"}})
m = c.response(14)
check("after stray messages lash still answers: an unknown mode is Invalid params naming the modes",
      err_of(m).get("code") == -32602 and "ask, auto" in err_of(m).get("message", ""), m)
c.p.stdin.close()
try:
    rc = c.p.wait(60)
except subprocess.TimeoutExpired:
    c.p.kill()
    rc = "hung"
check("lash acp exits 0 at the end of its input", rc == 0, rc)
print("1..%d" % n)
