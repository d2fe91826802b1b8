#!/usr/bin/env python3
"""A helper of test_terminal.sh: run a command on a real pty (its stdin,
stdout and stderr all the terminal), answer prompts, and say whether what
reached the terminal could drive it.

usage: term_pty.py LOG [--answer REGEX=TEXT]... -- ARGV...

Each --answer sends TEXT (with a newline; "^D": Ctrl-D alone) once REGEX
appears in the output after what the previous answer matched; the
command's stdin ends (Ctrl-D) after the last answer unless that was one.
The output is kept in LOG. A command that has not ended after 120 s
($PTY_TIMEOUT) is killed. Prints one line: "clean" when the output is
well-formed UTF-8 with no control character but newline, tab and carriage
return and no C1 control, lash's own spinner erase (ESC [ 2 K) aside; else
"dirty: " and where. Exits with the command's status (124 when it did not
end within 120 s)."""

import os
import pty
import re
import select
import signal
import sys
import time


def main():
    log, rest = sys.argv[1], sys.argv[2:]
    answers = []
    while rest and rest[0] == "--answer":
        pat, _, text = rest[1].partition("=")
        answers.append((re.compile(pat.encode()), text.encode()))
        rest = rest[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(rest[0], rest)
    out = b""
    deadline = time.time() + float(os.environ.get("PTY_TIMEOUT", "120"))
    status = None
    sent_eof = not answers
    mark = 0
    if sent_eof:
        os.write(fd, b"\x04")
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
            while answers:
                m = answers[0][0].search(out, mark)
                if not m:
                    break
                mark = m.end()
                if answers[0][1] == b"^D":
                    os.write(fd, b"\x04")
                    sent_eof = True
                else:
                    os.write(fd, answers[0][1] + b"\n")
                answers.pop(0)
            if not answers and not sent_eof:
                time.sleep(0.2)
                os.write(fd, b"\x04")
                sent_eof = True
        else:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
    timed_out = status is None and time.time() >= deadline
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    if status is None:
        _, status = os.waitpid(pid, 0)
    code = 124 if timed_out else os.waitstatus_to_exitcode(status)
    with open(log, "wb") as f:
        f.write(out)
    print(verdict(out))
    sys.exit(code if code >= 0 else 128 - code)


def verdict(out):
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as e:
        return "dirty: ill-formed UTF-8 at %d: %r" % (e.start, out[max(0, e.start - 20):e.start + 20])
    text = text.replace("\x1b[2K", "")
    for i, ch in enumerate(text):
        c = ord(ch)
        if (c < 0x20 and ch not in "\n\t\r") or 0x7F <= c <= 0x9F:
            return "dirty: %r at %d in %r" % (ch, i, text[max(0, i - 30):i + 30])
    return "clean"


if __name__ == "__main__":
    main()
