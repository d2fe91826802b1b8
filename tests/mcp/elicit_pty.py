#!/usr/bin/env python3
"""tests/mcp/elicit_pty.py: run CMD... on a pseudo-terminal and answer an
elicitation the way a user would (y, a name, Enter for every default);
prints what the terminal showed, then EXIT <code>."""
import os, pty, sys, time, select
argv = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
def pump(t):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: d = os.read(fd, 4096)
            except OSError: return False
            if not d: return False
            out += d
    return True
def until(s, t=30):
    end = time.time() + t
    while s.encode() not in out and time.time() < end:
        if not pump(0.2): break
    return s.encode() in out
until("Answer? ")
os.write(fd, b"y\r")
until("required")
os.write(fd, b"Ada\r")
for _ in range(20):
    pump(0.3)
    if b"User provided" in out or b"declined" in out or b"cancel" in out.lower(): break
    os.write(fd, b"\r")
pump(1)
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
print("\nEXIT", os.waitstatus_to_exitcode(st))
