#!/usr/bin/env python3
"""The scenario of test_chat.sh: drives `lash chat` through a real pty
(the pty module: the kernel's terminal, libedit's real line editing), with
stdin piped, and under tmux. Prints TAP.

usage: CHAT_MARK="sleep N" chat_pty.py LASH WORKDIR SANDBOX(0|1) OPENAI_PORT

Every wait is a hang guard (HANG seconds), never a timing assertion: each
check waits for a state (text on the screen, a file, a process) and the
scripted model blocks on a gate file where the test needs it to.
"""

import atexit
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
import urllib.request

LASH, T, SANDBOX, OPENAI_PORT = sys.argv[1:5]
# the sandbox command, from the environment: in argv, pgrep -f would find us
MARK = os.environ["CHAT_MARK"]
SANDBOX = SANDBOX == "1"
SPEC = os.path.join(T, "spec.lua")
HANG = float(os.environ.get("CHAT_TEST_HANG", "60"))  # seconds; lower it to see failures sooner

n = 0
failed = 0


def check(desc, cond, info=""):
    global n, failed
    n += 1
    if cond:
        print(f"ok {n} - {desc}", flush=True)
    else:
        failed += 1
        print(f"not ok {n} - {desc}", flush=True)
        for line in str(info).splitlines()[-25:]:
            print(f"# {line}", flush=True)


def skip(desc, why):
    global n
    n += 1
    print(f"ok {n} - {desc} # SKIP {why}", flush=True)


def base_env(**extra):
    env = dict(os.environ, CHAT_T=T, TERM="xterm-256color", XDG_STATE_HOME=os.path.join(T, "state"),
               HOME=os.path.join(T, "home"), CHAT_SANDBOX="1" if SANDBOX else "0", CHAT_MARK=MARK,
               OPENAI_BASE_URL=f"http://127.0.0.1:{OPENAI_PORT}/v1", OPENAI_API_KEY="sk-test-chat")
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


LIVE = []


@atexit.register
def stop_all():
    # a check that threw or hung leaves no lash (or sandbox command) behind
    for chat in LIVE:
        try:
            chat.stop()
        except OSError:
            pass


class Chat:
    """`lash chat` on a pty; `out` is everything it wrote, `pos` how far
    the checks have read."""

    def __init__(self, env, args=()):
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(LASH, [LASH, "chat", "--trust", SPEC, *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        LIVE.append(self)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.out = b""
        self.pos = 0
        self.eof = False
        self.status = None

    def pump(self, timeout):
        if self.eof:
            time.sleep(min(timeout, 0.05))
            return
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if data:
                self.out += data
            else:
                self.eof = True

    def expect(self, text):
        """Wait until `text` appears after what was already read; returns
        whether it did (the read position moves past it)."""
        needle = text.encode()
        deadline = time.time() + HANG
        while True:
            i = self.out.find(needle, self.pos)
            if i >= 0:
                self.pos = i + len(needle)
                return True
            if self.eof or time.time() > deadline:
                return False
            self.pump(0.2)

    def expect_re(self, pattern):
        """Wait for a regex after what was read; returns the match or None."""
        rx = re.compile(pattern.encode())
        deadline = time.time() + HANG
        while True:
            m = rx.search(self.out, self.pos)
            if m:
                self.pos = m.end()
                return m
            if self.eof or time.time() > deadline:
                return None
            self.pump(0.2)

    def prompt(self):
        return self.expect("> ")

    def send(self, s):
        os.write(self.fd, s.encode())

    def line(self, s):
        """Type a line at the prompt and press Enter."""
        ok = self.prompt()
        self.send(s + "\r")
        return ok

    def recent(self):
        return self.out[max(0, self.pos - 2000):].decode(errors="replace")

    def wait(self):
        deadline = time.time() + HANG
        while time.time() < deadline:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
            self.pump(0.1)
        self.stop()
        return "hung"

    def stop(self):
        """End a session that did not exit: SIGTERM first, so lash still
        kills its sandbox commands; SIGKILL if even that hangs."""
        if self.status is not None:
            return
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                self.status = "stopped"
                return
            self.pump(0.1)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.status = "killed"


def until(pred):
    deadline = time.time() + HANG
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def running(mark):
    """Is anything with `mark` in its command line alive (the command, or
    the jail's bwrap around it)?"""
    return subprocess.run(["pgrep", "-f", mark], stdout=subprocess.DEVNULL).returncode == 0


def command_started(mark):
    """Has the command itself started (not only bwrap, still setting up)?"""
    return subprocess.run(["pgrep", "-f", "^" + mark], stdout=subprocess.DEVNULL).returncode == 0


# ---- session 1: a terminal, colour on -------------------------------------
c = Chat(base_env())
check("the session starts with the agent and its model", c.expect("chatty · function:scripted"), c.recent())

c.line("hello")
check("streamed text is shown while the model is still answering", c.expect("Hello "), c.recent())
until(lambda: os.path.exists(os.path.join(T, "at_gate")))
check("... and the rest is not there yet (the model waits on the gate)",
      b"world" not in c.out and os.path.exists(os.path.join(T, "at_gate")), c.recent())
open(os.path.join(T, "gate"), "w").close()
check("the rest of the text arrives when the model goes on", c.expect("world"), c.recent())
check("a usage line ends the turn", c.expect("── 1 request"), c.recent())

c.line("hang")
check("a model that streams and then hangs shows what it streamed", c.expect("Thinking"), c.recent())
c.send("\x03")
check("Ctrl-C cancels a turn while the model is answering", c.expect("turn cancelled"), c.recent())
c.line("roles")
check("... the session goes on; the cancelled turn stays, what it streamed as its answer (no two user messages "
      "in a row)", c.expect("roles: user,assistant,user,assistant,user; last said: Thinking"), c.recent())
c.line("/reset")

c.line("tool")
check("a tool call is shown as lash run shows it", c.expect("▸ echo_tool") and c.expect('{"word":"ping"}'),
      c.recent())
check("its result is shown", c.expect("✓ ") and c.expect("echo ping"), c.recent())
check("the model's answer after the tool", c.expect("after echo_tool: ok echo ping"), c.recent())
check("colour is on on a terminal without NO_COLOR", b"\x1b[36m\xe2\x96\xb8 echo_tool" in c.out, c.recent())

c.line("approve")
check("an approval is asked inline", c.expect("Allow danger {\"target\":\"disk\"}? [y/n/e]"), c.recent())
c.send("y\r")
check("answered y: the tool runs", c.expect("after danger: ok danger ran on disk"), c.recent())

c.line("approve")
check("asked again", c.expect("[y/n/e]"), c.recent())
c.send("n\r")
check("answered n: the call is denied and the model told", c.expect("after danger: denied"), c.recent())

c.line("approve")
check("asked a third time", c.expect("[y/n/e]"), c.recent())
c.send("e\r")
check("e: the arguments are offered for editing", c.expect("args> ") and c.expect('{"target":"disk"}'),
      c.recent())
c.send("\x01\x0b" + '{"target":"tape"}' + "\r")   # Ctrl-A, Ctrl-K: replace the line
check("edited: the tool runs with the edited arguments", c.expect("danger ran on tape"), c.recent())

c.line("approve")
check("asked a fourth time", c.expect("[y/n/e]"), c.recent())
c.send("\x03")
check("Ctrl-C at an approval question cancels the turn", c.expect("turn cancelled"), c.recent())

c.line("count")
check("the conversation carries over between turns", c.expect("you said: count (history 20)"), c.recent())
c.line("/reset")
check("/reset says it cleared the conversation", c.expect("conversation cleared"), c.recent())
c.line("count")
check("after /reset the history starts again", c.expect("you said: count (history 1)"), c.recent())

if SANDBOX:
    c.line("sleep")
    started = c.expect("▸ run_command") and until(lambda: command_started(MARK))
    check("a sandbox command starts", started, c.recent())
    c.send("\x03")
    check("Ctrl-C cancels the turn", c.expect("turn cancelled"), c.recent())
    check("... and the sandbox command is killed", started and until(lambda: not running(MARK)))
    c.line("count")
    check("the session goes on; the cancelled turn stays, its call answered as interrupted",
          c.expect("you said: count (history 6)"), c.recent())
    # the terminal's Ctrl-C reaches the whole foreground group, the jail's
    # bwrap too; SIGINT to lash alone shows that lash itself kills the command
    c.line("sleep")
    started = c.expect("▸ run_command") and until(lambda: command_started(MARK))
    os.kill(c.pid, signal.SIGINT)
    check("SIGINT to lash alone cancels the turn", started and c.expect("turn cancelled"), c.recent())
    check("... and lash kills the sandbox command", started and until(lambda: not running(MARK)))
    c.line("/reset")
    m = c.expect_re(r"the last one is saved as session ([0-9a-f]{12})")
    cancelled_sid = m.group(1).decode() if m else "none"
    c.line("count")
    c.expect("you said: count (history 1)")
    c.line("count")
    c.expect("you said: count (history 3)")
else:
    for d in ("a sandbox command starts", "Ctrl-C cancels the turn", "... and the sandbox command is killed",
              "the session goes on; the cancelled turn stays, its call answered as interrupted", "SIGINT to lash alone cancels the turn",
              "... and lash kills the sandbox command"):
        skip(d, "no bubblewrap jail here")

c.line("/model")
check("/model shows the model", c.expect("model: function:scripted"), c.recent())
c.line("/tools")
check("/tools lists the spec's tools", c.expect("echo_tool") and c.expect("echo a word back")
      and c.expect("danger"), c.recent())
if SANDBOX:
    check("/tools lists the sandbox capability's tools", c.expect("run_command"), c.recent())
else:
    skip("/tools lists the sandbox capability's tools", "no bubblewrap jail here")
c.line("/help")
check("/help lists the commands", c.expect("/reset") and c.expect("/tools") and c.expect("/save [TITLE]") and c.expect("/export FILE"),
      c.recent())
c.line("/bogus")
check("an unknown command gets a clear message", c.expect("unknown command /bogus: type /help"), c.recent())
c.line("/save")
m = c.expect_re(r"saved as session ([0-9a-f]{12}): `lash chat \S+ --resume \1` continues it")
sid = m.group(1).decode() if m else "none"
check("/save says which saved session holds the chat", m is not None, c.recent())
c.line("/save my chat")
check("/save TITLE names it", c.expect(f'saved as session {sid} "my chat"'), c.recent())
c.line("/export")
check("/export without a file says what to give", c.expect("give a file name: /export FILE"), c.recent())
saved = os.path.join(T, "conv.json")
c.line("/export " + saved)
check("/export FILE writes the conversation there", c.expect("wrote 4 messages to " + saved), c.recent())
try:
    doc = json.load(open(saved))
    texts = [p.get("text") for m in doc["messages"] for p in m["parts"]]
    check("the saved file holds the conversation", doc["agent"] == "chatty" and "count" in texts, doc)
except Exception as e:  # noqa: BLE001
    check("the saved file holds the conversation", False, repr(e))

# history: the up arrow brings back the last line ("/save FILE" is not a turn; count is)
c.line("count")
c.expect("you said: count (history 5)")
c.prompt()
c.send("\x1b[A")
check("the up arrow recalls the last line", c.expect("count"), c.recent())
c.send("\r")
check("... and Enter sends it", c.expect("you said: count (history 7)"), c.recent())

c.prompt()
c.send("abc")
c.expect("abc")
c.send("\x03")
check("Ctrl-C on a typed line clears it and keeps the session", c.expect("^C") and c.expect("> "), c.recent())
c.send("xyz\r")
check("... the next line starts empty", c.expect("you said: xyz (history 9)"), c.recent())
c.prompt()
c.send("\x03")
check("Ctrl-C at an empty prompt says how to exit", c.expect("(Ctrl-C again or Ctrl-D to exit)"), c.recent())
c.line("/model test")
check("/model M switches the model for the next turns", c.expect("model: test (from the next turn)"), c.recent())
c.line("/model openai:gpt-4.1")
c.expect("model: openai:gpt-4.1")
c.line("hi")
check("the next turn uses the new model (a real OpenAI stream from the fake server)",
      c.expect("Hello there, how may I assist you today?"), c.recent())


# Ctrl-C mid-stream, on the wire: the next request carries what the model
# streamed as its answer, never two user messages in a row
def fake(path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{OPENAI_PORT}{path}",
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def completion(text):
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 1741569952, "model": "gpt-4.1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


fake("/_script", {"responses": [{"json": completion("Partly said"), "stall_after_events": 2, "stall_seconds": 30},
                                {"json": completion("Second answer")}]})
c.line("tell me")
check("an OpenAI stream that stalls shows what it streamed", c.expect("Partly said"), c.recent())
c.send("\x03")
check("Ctrl-C cancels it", c.expect("turn cancelled"), c.recent())
c.line("go on")
check("the next turn is answered", c.expect("Second answer"), c.recent())
try:
    msgs = fake("/_requests")[-1]["body"]["messages"]
except Exception as e:  # noqa: BLE001
    msgs = [repr(e)]
roles = [m.get("role") for m in msgs if isinstance(m, dict)]
tail = [(m.get("role"), m.get("content")) for m in msgs[-3:] if isinstance(m, dict)]
check("on the wire: the cancelled turn's streamed text is its answer, then the new prompt",
      len(tail) == 3 and tail[0][0] == "user" and "tell me" in json.dumps(tail[0][1])
      and tail[1] == ("assistant", "Partly said") and tail[2][0] == "user" and "go on" in json.dumps(tail[2][1]),
      json.dumps(msgs[-4:]))
check("... and no two user messages follow each other",
      all(not (a == "user" and b == "user") for a, b in zip(roles, roles[1:])), roles)
c.prompt()
c.send("\x04")
check("Ctrl-D exits 0", c.wait() == 0, f"status {c.status}\n" + c.recent())
check("... saying where the session is saved", f"saved as session {sid}".encode() in c.out, c.recent())
show = subprocess.run([LASH, "sessions", "show", sid], env=base_env(), capture_output=True, text=True).stdout
lst = subprocess.run([LASH, "sessions", "list"], env=base_env(), capture_output=True, text=True).stdout
check("... listed with its title", any(l.startswith(sid) and l.rstrip().endswith("my chat") for l in lst.splitlines()), lst)
check("the chat is recorded as a saved session (lash sessions show)",
      f"session {sid} (chat)" in show and "Hello there, how may I assist you today?" in show, show)
if SANDBOX:
    show = subprocess.run([LASH, "sessions", "show", cancelled_sid], env=base_env(), capture_output=True,
                          text=True).stdout
    check("a cancelled turn is recorded as cancelled, its call as interrupted",
          "run 2: cancelled" in show and "run 4: cancelled" in show and "did not finish" in show, show)
else:
    skip("a cancelled turn is recorded as cancelled, its call as interrupted", "no bubblewrap jail here")

hist = os.path.join(T, "state", "lash", "chat_history")
check("the history is kept under $XDG_STATE_HOME/lash/", os.path.exists(hist))
check("... private (0600)", os.path.exists(hist) and stat.S_IMODE(os.stat(hist).st_mode) == 0o600,
      oct(os.stat(hist).st_mode) if os.path.exists(hist) else "missing")

# ---- session 2: the history persists; NO_COLOR; Ctrl-C twice ---------------
c = Chat(base_env(NO_COLOR="1"), ["--continue"])
m = c.expect_re(r"session ([0-9a-f]{12}) \((\d+) messages\)")
check("--continue goes on with the last session", m is not None and m.group(1).decode() == sid, c.recent())
check("... with the model it last used (the /model switch)", b"chatty \xc2\xb7 openai:gpt-4.1 \xc2\xb7 session"
      in c.out, c.recent())
check("... showing its last turns", c.expect("> hi") and c.expect("Hello there, how may I assist you today?"),
      c.recent())

c.prompt()
c.send("\x1b[A")
check("a new session recalls the last session's last line", c.expect("go on"), c.recent())
c.send("\x01\x0b/tools\r")
check("a line typed after recalling one", c.expect("echo a word back"), c.recent())
c.line("/model default")
check("/model default goes back to the spec's model", c.expect("model: function:scripted (from the next turn)"),
      c.recent())
c.line("count")
n_before = int(m.group(2)) if m else -1
check("... with its conversation", c.expect(f"you said: count (history {n_before + 1})"), c.recent())
c.line("tool")
c.expect("after echo_tool")
check("NO_COLOR: no colour at all", b"\x1b[36m" not in c.out and b"\x1b[2m" not in c.out
      and "▸ echo_tool".encode() in c.out, repr(c.out[-600:]))
c.prompt()
c.send("\x03")
c.expect("Ctrl-C again")
c.prompt()
c.send("\x03")
check("a second Ctrl-C at an empty prompt exits 130", c.wait() == 130, f"status {c.status}\n" + c.recent())

# ---- SIGTERM stops lash as for `lash run` -----------------------------------
c = Chat(base_env(LASH_NO_SAVE="1"))
c.prompt()
os.kill(c.pid, signal.SIGTERM)
check("SIGTERM at the prompt exits 143", c.wait() == 143, f"status {c.status}\n" + c.recent())
if SANDBOX:
    c = Chat(base_env(LASH_NO_SAVE="1"))
    c.line("sleep")
    started = c.expect("▸ run_command") and until(lambda: command_started(MARK))
    os.kill(c.pid, signal.SIGTERM)
    check("SIGTERM mid-tool exits 143", started and c.wait() == 143, f"status {c.status}\n" + c.recent())
    check("... with the sandbox command killed", started and until(lambda: not running(MARK)))
else:
    skip("SIGTERM mid-tool exits 143", "no bubblewrap jail here")
    skip("... with the sandbox command killed", "no bubblewrap jail here")

# ---- stdin not a terminal: scripted line by line ----------------------------
p = subprocess.run([LASH, "chat", "--trust", SPEC], input="tool\napprove\ny\n/model\ncount\n", env=base_env(),
                   capture_output=True, text=True, timeout=HANG * 2)
check("piped: exits 0 at the end of the input", p.returncode == 0, p.stdout + p.stderr)
check("piped: the tool call is shown", "▸ echo_tool" in p.stdout, p.stdout)
check("piped: the approval is answered from the input",
      "Allow danger" in p.stdout and "danger ran on disk" in p.stdout, p.stdout)
check("piped: commands work", "model: function:scripted" in p.stdout, p.stdout)
check("piped: the conversation goes on", "you said: count (history 9)" in p.stdout, p.stdout)
check("piped: no colour, no prompt", "▸ echo_tool" in p.stdout and "\x1b[" not in p.stdout
      and "> " not in p.stdout, repr(p.stdout))
if SANDBOX:
    # one sandbox for the whole conversation: a file written in one turn is
    # there in the next, and the sandbox is gone when the chat ends
    p = subprocess.run([LASH, "chat", "--trust", SPEC, "--no-save"], input="keep\nrecall\n", env=base_env(),
                       capture_output=True, text=True, timeout=HANG * 2)
    check("piped: the turns share one sandbox (turn 2 reads what turn 1 wrote)",
          p.returncode == 0 and "after read_file: ok" in p.stdout and "from turn one" in p.stdout,
          f"rc {p.returncode}\n" + p.stdout + p.stderr)
    left = subprocess.run([LASH, "sandbox", "list", "--json"], env=base_env(), capture_output=True, text=True)
    check("... and the chat's sandbox is destroyed when it ends", left.stdout.strip() == "[]", left.stdout)
else:
    skip("piped: the turns share one sandbox (turn 2 reads what turn 1 wrote)", "no bubblewrap jail here")
    skip("... and the chat's sandbox is destroyed when it ends", "no bubblewrap jail here")
p = subprocess.run([LASH, "chat", "--trust", SPEC], input="fail\ncount\n", env=base_env(),
                   capture_output=True, text=True, timeout=HANG * 2)
check("piped: a failed turn ends the session with its exit code (7: provider)", p.returncode == 7,
      f"rc {p.returncode}\n" + p.stdout + p.stderr)
check("piped: ... and says why", "scripted failure" in p.stdout + p.stderr and "you said" not in p.stdout,
      p.stdout + p.stderr)
p = subprocess.run([LASH, "chat", "--trust", SPEC, "--no-save"], input="/save\n", env=base_env(),
                   capture_output=True, text=True, timeout=HANG)
check("--no-save: /save says the session is not recorded", "not recorded (--no-save" in p.stdout + p.stderr,
      p.stdout + p.stderr)
p = subprocess.run([LASH, "chat"], input="", env=base_env(), capture_output=True, text=True, timeout=HANG)
check("no spec and no model: says where a model comes from (6)",
      p.returncode == 6 and "the built-in agent uses the configured model, and none is set: pass --model M"
      in p.stderr, p.stderr)
if SANDBOX:
    p = subprocess.run([LASH, "chat", "--model", "test", "--no-save"], input="hello\n", env=base_env(),
                       capture_output=True, text=True, timeout=HANG * 2)
    check("no spec: the built-in agent (a coder in a sandbox) answers", p.returncode == 0
          and "▸ write_file" in p.stdout and "Wrote 1 byte to 'a'." in p.stdout, p.stdout + p.stderr)
else:
    skip("no spec: the built-in agent (a coder in a sandbox) answers", "no bubblewrap jail here")
p = subprocess.run([LASH, "chat", "hello", "there"], input="", env=base_env(), capture_output=True, text=True,
                   timeout=HANG)
check("a prompt on the command line: chat takes a spec or nothing (2)", p.returncode == 2
      and "the first argument is a spec file" in p.stderr, p.stderr)

# ---- under tmux, with each terminal type it may give -----------------------
def under_tmux(tmux, term):
    sock = "lash-chat-test-%d-%s" % (os.getpid(), term)
    exitf = os.path.join(T, f"tmux-{term}.exit")
    env = base_env(LASH_NO_SAVE="1")
    env.pop("TERM", None)
    conf = os.path.join(T, f"tmux-{term}.conf")
    with open(conf, "w") as f:
        f.write(f"set -g default-terminal {term}\n")
    tm = [tmux, "-L", sock, "-f", conf]
    cmd = f"'{LASH}' chat --trust '{SPEC}'; echo $? > '{exitf}'"
    subprocess.run(tm + ["new-session", "-d", "-x", "160", "-y", "40", "sh", "-c", cmd], env=env, check=False)

    def screen():
        return subprocess.run(tm + ["capture-pane", "-p", "-J"], capture_output=True, text=True, env=env).stdout

    def keys(*k):
        subprocess.run(tm + ["send-keys"] + list(k), env=env, check=False)

    try:
        until(lambda: "/help for commands" in screen())
        keys("hello", "Enter")
        check(f"tmux (TERM={term}): streamed text", until(lambda: "Hello world" in screen()), screen())
        keys("Up")
        check(f"tmux (TERM={term}): history recall", until(lambda: screen().rstrip().endswith("> hello")),
              screen())
        keys("C-a", "C-k", "C-d")
        until(lambda: os.path.exists(exitf) and open(exitf).read().strip() != "")
        code = open(exitf).read().strip() if os.path.exists(exitf) else "none"
        check(f"tmux (TERM={term}): Ctrl-D exits 0", code == "0", f"exit {code}\n" + screen())
    finally:
        subprocess.run(tm + ["kill-server"], capture_output=True)


def has_terminfo(term):
    if shutil.which("infocmp"):
        return subprocess.run(["infocmp", term], capture_output=True).returncode == 0
    return any(os.path.exists(os.path.join(d, term[0], term))
               for d in ("/etc/terminfo", "/lib/terminfo", "/usr/share/terminfo"))


tmux = shutil.which("tmux")
for term in ("tmux-256color", "screen"):
    if not tmux:
        why = "tmux is not installed"
    elif not has_terminfo(term):
        why = f"no terminfo entry for {term} here"
    else:
        under_tmux(tmux, term)
        continue
    for d in ("streamed text", "history recall", "Ctrl-D exits 0"):
        skip(f"tmux (TERM={term}): {d}", why)

print(f"1..{n}")
sys.exit(1 if failed else 0)
