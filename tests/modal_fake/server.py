#!/usr/bin/python3
"""server.py: a fake Modal for lash's tests (loopback only).

Serves the control plane (modal.client.ModalClient) and the task command
router (modal.task_command_router.TaskCommandRouter) as two grpcio servers on
127.0.0.1, from lash's .proto subset (compiled at start by protos.py). It
enforces what the real service enforces as far as it is known: token id and
secret on every control-plane call, the x-modal-auth-token JWT (with expiry)
on V2 RPCs, the router's Bearer JWT, V1/V2 id shapes (a V2 RPC on a V1 id and
the reverse fail), and grpc-core itself refuses requests without
`te: trailers`. Commands run for real, in a bubblewrap jail per command over
a per-sandbox writable directory tree (or, when bwrap is missing, as plain
subprocesses, with a warning). `/__modal/.bin/modal-sandbox-fs-tools` is
emulated by a Python implementation of its JSON commands, run in the jail.

Usage: server.py --state DIR [--lifetime S] [--watch-pid PID] [--tls]
                 [--token-id ID --token-secret SECRET] [--id-mismatch notfound|invalid]
                 [--jail auto|bwrap|none]
Without --tls both servers speak h2c (plaintext HTTP/2) and the router URL
handed out is https://127.0.0.1:P served plaintext, as Modal's JS/Go SDKs
expect from a localhost fake. With --tls both serve TLS with a self-signed
certificate for 127.0.0.1 made by the openssl CLI (DIR/ca.pem).
When ready it writes DIR/ports.json {"control": P, "router": P, "pid": N,
"jail": "bwrap"|"none", "tls": bool, "ca": path-or-null}. It logs every call to DIR/calls.jsonl (method,
metadata with secrets redacted, the request as JSON, unknown field numbers,
the status), keeps DIR/state.json (sandboxes and their status) current, and
reads DIR/faults.json before every call. A call's "peer" (the client's
address and port) tells which connection carried it. It exits after --lifetime seconds
(default 900), when --watch-pid dies, or on SIGTERM/SIGINT, killing every
command it started.

faults.json is a list of rules; a rule applies to calls of `method` (an RPC
name, or "*") until `count` matches are used up (default 1):
  {"id": "a", "method": "SandboxCreateV2", "kind": "status", "code": "UNAVAILABLE", "count": 2}
  {"id": "b", "method": "...", "kind": "retry_after", "code": "RESOURCE_EXHAUSTED", "secs": 0.3,
   "style": "modal"|"google"}
  {"id": "c", "method": "TaskExecStdioRead", "kind": "cut_stream", "after_bytes": 5}
  {"id": "d", "kind": "token_ttl", "secs": 2}       the next `count` auth tokens expire in secs
  {"id": "e", "kind": "router_jwt_ttl", "secs": 2}  the next `count` router JWTs likewise
  {"id": "f", "method": "TaskExecStart", "kind": "terminate_after", "secs": 0.5}
  {"id": "g", "method": "SandboxTerminate*", "kind": "hang_terminate"}  terminate is
     acknowledged but the sandbox never finishes
  {"id": "h", "method": "SandboxGetTaskId", "kind": "schedule_polls", "count": 3}
     the first polls return no task id yet
  {"id": "i", "method": "ImageJoinStreaming", "kind": "cut_stream"}  end without a result
  {"id": "j", "method": "SandboxTagsGetV2", "kind": "expire_tokens"}  every auth token
     minted so far stops working (the call then fails UNAUTHENTICATED)
  {"id": "k", "method": "TaskExecWait", "kind": "expire_router_tokens"}  likewise for
     router JWTs
  {"id": "l", "method": "SandboxListV2", "kind": "stale_expiry"}  the listed sandboxes'
     lash_expires_at tags read "1" (long past), as for a sandbox Modal failed to end
Method names may end with "*" (prefix match). Rules with "match": {"field": value}
apply only when the request's top-level field has that value.
"""
import argparse
import base64
import fnmatch
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import socket
import ssl
import string
import subprocess
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protos  # noqa: E402

try:
    API, TCR, _ = protos.load()
    import grpc
    from google.protobuf import any_pb2, duration_pb2, empty_pb2, json_format
except (protos.Missing, ImportError) as e:
    print("server.py: cannot start: %s" % e, file=sys.stderr)
    sys.exit(77)

FS_TOOLS = "/__modal/.bin/modal-sandbox-fs-tools"
HERE = os.path.dirname(os.path.abspath(__file__))
BASE62 = string.digits + string.ascii_letters
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
SECRET_HEADERS = ("x-modal-token-secret", "x-modal-auth-token", "authorization")
V2_RPCS = {"SandboxCreateV2", "SandboxGetTaskIdV2", "SandboxWaitV2", "SandboxTerminateV2",
           "SandboxTagsGetV2", "SandboxTagsSetV2", "SandboxGetCommandRouterAccess"}

GS = API.GenericResult


def rand(chars, n):
    return "".join(random.choice(chars) for _ in range(n))


def v1_sandbox_id():
    return "sb-" + rand(BASE62, 22)


def v2_sandbox_id():
    return "sb-" + random.choice("01234567") + rand(CROCKFORD, 25)


def is_v1_id(sid):
    return len(sid) == 25 and sid.startswith("sb-") and all(c in BASE62 for c in sid[3:])


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Abort(Exception):
    def __init__(self, code, message, details=None):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


class Log:
    def __init__(self, path):
        self.path, self.lock = path, threading.Lock()

    def write(self, rec):
        line = json.dumps(rec, sort_keys=True)
        with self.lock, open(self.path, "a") as fh:
            fh.write(line + "\n")


def unknown_fields(msg, prefix=""):
    """Field paths of unknown fields in msg and its submessages."""
    out = []
    try:
        for f in msg.UnknownFields():
            out.append("%s%d" % (prefix, f.field_number))
    except (AttributeError, NotImplementedError):
        pass
    for fd, v in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE or fd.message_type.GetOptions().map_entry:
            continue
        vals = v if fd.label == fd.LABEL_REPEATED else [v]
        for x in vals:
            out.extend(unknown_fields(x, prefix + fd.name + "."))
    return out


# ---- faults -------------------------------------------------------------

class Faults:
    def __init__(self, path):
        self.path, self.used, self.lock = path, {}, threading.Lock()
        self.token_ttl, self.router_ttl = 1200.0, 1200.0

    def rules(self):
        try:
            with open(self.path) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return []

    def take(self, method, kind, request=None):
        """The first rule of this kind matching method, consuming one use."""
        with self.lock:
            for r in self.rules():
                if r.get("kind") != kind:
                    continue
                pat = r.get("method", "*")
                if not fnmatch.fnmatchcase(method, pat):
                    continue
                match = r.get("match") or {}
                if request is not None and any(
                        str(getattr(request, k, None)) != str(v) for k, v in match.items()):
                    continue
                rid = r.get("id") or json.dumps(r, sort_keys=True)
                n = self.used.get(rid, 0)
                if n >= r.get("count", 1):
                    continue
                self.used[rid] = n + 1
                return r
        return None



# ---- processes and the jail ---------------------------------------------

FS_TOOL_SCRIPT = r'''
import json, os, stat, sys, grp, pwd
def fail(kind, msg, detail=""):
    sys.stderr.write(json.dumps({"error_kind": kind, "message": msg, "detail": detail}))
    sys.exit(1)
def info(p):
    st = os.lstat(p)
    t = "directory" if stat.S_ISDIR(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "file"
    try: owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError: owner = str(st.st_uid)
    try: group = grp.getgrgid(st.st_gid).gr_name
    except KeyError: group = str(st.st_gid)
    d = {"name": os.path.basename(p.rstrip("/")) or "/", "path": p, "type": t, "size": st.st_size,
         "mode": st.st_mode, "permissions": stat.filemode(st.st_mode), "owner": owner,
         "group": group, "modified_time": st.st_mtime}
    if t == "symlink": d["symlink_target"] = os.readlink(p)
    return d
def errkind(e):
    import errno
    return {errno.ENOENT: "NotFound", errno.EACCES: "PermissionDenied", errno.EPERM: "PermissionDenied",
            errno.EROFS: "PermissionDenied", errno.EISDIR: "IsDirectory", errno.ENOTDIR: "NotDirectory",
            errno.EEXIST: "AlreadyExists", errno.ENOTEMPTY: "DirectoryNotEmpty"}.get(e.errno, "Other")
cmd = json.loads(sys.argv[1]); (op, a), = cmd.items(); p = a["path"]
if not p.startswith("/"): fail("InvalidPath", "path must be absolute")
try:
    if op == "ReadFile":
        if os.path.isdir(p): fail("IsDirectory", "Is a directory")
        with open(p, "rb") as f:
            while True:
                b = f.read(1 << 16)
                if not b: break
                sys.stdout.buffer.write(b)
    elif op == "WriteFile":
        if os.path.isdir(p): fail("IsDirectory", "Is a directory")
        try: os.makedirs(os.path.dirname(p), exist_ok=True)   # WriteFile makes parents
        except (FileExistsError, NotADirectoryError): fail("NotDirectory", "Not a directory")
        with open(p, "wb") as f:
            while True:
                b = sys.stdin.buffer.read(1 << 16)
                if not b: break
                f.write(b)
    elif op == "ListFiles":
        if not os.path.exists(p): fail("NotFound", "No such file or directory")
        if not os.path.isdir(p): fail("NotDirectory", "Not a directory")
        out = [info(os.path.join(p, n)) for n in sorted(os.listdir(p))]
        sys.stdout.write(json.dumps(out))
    elif op == "Stat":
        sys.stdout.write(json.dumps(info(p)))
    elif op == "MakeDirectory":
        if a.get("parents"): os.makedirs(p, exist_ok=True)
        else:
            if os.path.exists(p): fail("PathAlreadyExists", "File exists")
            os.mkdir(p)
    elif op == "Remove":
        if os.path.isdir(p) and not os.path.islink(p):
            if a.get("recursive"):
                import shutil; shutil.rmtree(p)
            else: os.rmdir(p)
        else: os.unlink(p)
    else: fail("NotSupported", "unknown command " + op)
except OSError as e:
    fail(errkind(e), e.strerror or str(e), str(e))
'''


class Jail:
    def __init__(self, mode):
        have = shutil.which("bwrap") is not None
        if mode == "auto":
            mode = "bwrap" if have and self._probe() else "none"
        if mode == "bwrap" and not have:
            raise SystemExit("server.py: --jail bwrap but bwrap is missing")
        self.mode = mode
        if mode == "none":
            print("server.py: WARNING: bubblewrap unavailable; commands run as plain "
                  "subprocesses on the host (absolute paths are host paths)", file=sys.stderr)

    @staticmethod
    def _probe():
        try:
            return subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "true"],
                                  capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    def argv(self, sb, argv, cwd, env):
        if self.mode == "none":
            return argv, sb.host_path(cwd)
        cmd = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
               "--unshare-uts", "--hostname", "modal"]
        if sb.network_blocked:
            cmd.append("--unshare-net")
        writable = sb.writable_tops()
        for name in sorted(os.listdir("/")):
            if name in ("proc", "dev", "sys", "run", "home", "mnt", "media") or name in writable:
                continue
            src = "/" + name
            if os.path.islink(src):
                cmd += ["--symlink", os.readlink(src), src]
            elif os.path.isdir(src):
                cmd += ["--ro-bind", src, src]
        cmd += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
        for name in sorted(writable):
            cmd += ["--bind", os.path.join(sb.fs, name), "/" + name]
        cmd += ["--chdir", cwd, "--clearenv"]
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        return cmd + ["--"] + argv, None


class ByteLog:
    """An append-only byte log read by offset (so resumed reads are exact)."""

    def __init__(self):
        self.data, self.closed, self.cv = bytearray(), False, threading.Condition()

    def append(self, b):
        with self.cv:
            self.data += b
            self.cv.notify_all()

    def close(self):
        with self.cv:
            self.closed = True
            self.cv.notify_all()


class Exec:
    def __init__(self, sb, exec_id, req, jail):
        self.sb, self.exec_id = sb, exec_id
        self.out, self.err = ByteLog(), ByteLog()
        self.code = self.signal = None
        self.done = threading.Event()
        self.stdin_offset, self.stdin_closed = 0, False
        self.lock = threading.Lock()
        argv = list(req.command_args)
        if argv and argv[0] == FS_TOOLS:
            argv = ["/usr/bin/python3", "-I", "-S", "-c", FS_TOOL_SCRIPT] + argv[1:]
        cwd = req.workdir if req.HasField("workdir") else sb.workdir
        sb.check_start(argv[0], cwd, dict(req.env))
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/root"}
        env.update(sb.env)
        env.update(dict(req.env))
        cmd, host_cwd = jail.argv(sb, argv, cwd, env)
        sb.prepare_dir(cwd)
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=host_cwd, env=env if jail.mode == "none" else {"PATH": env["PATH"]},
            start_new_session=True, close_fds=True)
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True)]
        for t in self.pumps:
            t.start()
        self.timer = None
        if req.HasField("timeout_secs") and req.timeout_secs > 0:
            self.timer = threading.Timer(req.timeout_secs, self.kill)
            self.timer.daemon = True
            self.timer.start()
        threading.Thread(target=self._reap, daemon=True).start()

    @staticmethod
    def _pump(pipe, log):
        while True:
            b = pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16)
            if not b:
                break
            log.append(b)
        log.close()

    def _reap(self):
        rc = self.proc.wait()
        for t in self.pumps:
            t.join()
        if self.timer:
            self.timer.cancel()
        if rc < 0:
            self.signal = -rc
        else:
            self.code = rc
        self.done.set()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def write_stdin(self, offset, data, eof):
        with self.lock:
            if self.stdin_closed:
                if data:
                    raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "stdin already closed")
                return
            if offset > self.stdin_offset:
                raise Abort(grpc.StatusCode.OUT_OF_RANGE, "stdin offset %d beyond %d" % (offset, self.stdin_offset))
            skip = self.stdin_offset - offset
            data = data[skip:] if skip < len(data) else b""
            try:
                if data:
                    self.proc.stdin.write(data)
                    self.proc.stdin.flush()
                self.stdin_offset += len(data)
                if eof:
                    self.proc.stdin.close()
                    self.stdin_closed = True
            except (BrokenPipeError, ValueError):
                self.stdin_closed = True
                raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "process exited; stdin is closed")


class Tunnel:
    """A port of a sandbox reached from outside, as Modal's tunnels are: a TLS
    listener (the fake's certificate for 127.0.0.1, DIR/ca.pem) and, for an
    unencrypted port, a plain TCP one too, each connection joined to the
    port on the sandbox's loopback (the jail shares the fake's network unless
    it is blocked, when connections are closed at once, as nothing answers)."""

    def __init__(self, server, port, unencrypted):
        self.container_port, self.closed = port, False
        key, cert = server.cert()
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ctx.load_cert_chain(cert, key)
        self.tls = self._listen(True)
        self.tcp = self._listen(False) if unencrypted else None

    def _listen(self, tls):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        threading.Thread(target=self._accept, args=(s, tls), daemon=True).start()
        return s

    def _accept(self, ls, tls):
        while not self.closed:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            threading.Thread(target=self._join, args=(c, tls), daemon=True).start()

    def _join(self, c, tls):
        try:
            if tls:
                c = self.ctx.wrap_socket(c, server_side=True)
            up = socket.create_connection(("127.0.0.1", self.container_port), timeout=5)
            up.settimeout(None)
        except OSError:
            c.close()
            return

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
                if isinstance(b, ssl.SSLSocket):   # TLS has no half close
                    try:
                        b = b.unwrap()   # close_notify, so the peer sees a clean end
                    except (OSError, ValueError):
                        pass
                    b.close()
                else:
                    b.shutdown(socket.SHUT_WR)
            except OSError:
                for s in (a, b):
                    try:
                        s.close()
                    except OSError:
                        pass
        threading.Thread(target=pump, args=(up, c), daemon=True).start()
        pump(c, up)

    def data(self):
        d = API.TunnelData(host="127.0.0.1", port=self.tls.getsockname()[1],
                           container_port=self.container_port)
        if self.tcp:
            d.unencrypted_host, d.unencrypted_port = "127.0.0.1", self.tcp.getsockname()[1]
        return d

    def close(self):
        self.closed = True
        for s in (self.tls, self.tcp):
            if s:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


class Sandbox:
    def __init__(self, server, sid, v2, app_id, definition, env, tags):
        self.server, self.id, self.v2, self.app_id = server, sid, v2, app_id
        self.task_id = "ta-" + (rand(CROCKFORD, 25) + "V" if v2 else rand(BASE62, 22))
        self.workdir = definition.workdir if definition.HasField("workdir") else "/"
        self.timeout = definition.timeout_secs or 300
        self.created = time.time()
        self.env = dict(env)
        self.tags = [(t.tag_name, t.tag_value) for t in tags]
        self.network_blocked = (definition.network_access.network_access_type ==
                                API.NetworkAccess.BLOCKED)
        self.result = None        # GenericResult once finished
        self.hung = False         # terminate acknowledged but never finishes
        self.execs = {}
        self.polls = 0
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.fs = os.path.join(server.state, "sandboxes", sid, "fs")
        for name in self.writable_tops():
            os.makedirs(os.path.join(self.fs, name), exist_ok=True)
        snap = server.images.get(definition.image_id, {}).get("snapshot")
        if snap:   # an image made by a filesystem snapshot: its files come back
            shutil.copytree(snap, self.fs, symlinks=True, dirs_exist_ok=True)
        self.prepare_dir(self.workdir)
        self.tunnels = [Tunnel(server, p.port, p.unencrypted) for p in definition.open_ports.ports]
        self.expiry = threading.Timer(self.timeout, self.finish, args=(GS.GENERIC_STATUS_TIMEOUT, "Sandbox timed out"))
        self.expiry.daemon = True
        self.expiry.start()

    def view_path(self, p):
        """Where sandbox path p lives on the host (writable tops are per sandbox)."""
        top = p.strip("/").split("/")[0]
        if top in self.writable_tops():
            return self.host_path(p)
        return p

    def check_start(self, exe, cwd, env):
        """Refuse what cannot start, as a container runtime does at exec."""
        if not os.path.isdir(self.view_path(cwd)):
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION,
                        "failed to start command: workdir %s does not exist" % cwd)
        if "/" in exe:
            cands = [exe if exe.startswith("/") else os.path.join(cwd, exe)]
        else:
            path = env.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            cands = [os.path.join(d, exe) for d in path.split(":") if d]
        for c in cands:
            hp = self.view_path(c)
            if os.path.isfile(hp) and os.access(hp, os.X_OK):
                return
        raise Abort(grpc.StatusCode.FAILED_PRECONDITION,
                    "failed to start command: executable file not found: %s" % exe)

    def writable_tops(self):
        tops = {"tmp", "root"}
        w = self.workdir.strip("/").split("/")[0]
        if w:
            tops.add(w)
        return tops

    def host_path(self, p):
        return os.path.join(self.fs, p.lstrip("/")) if p != "/" else self.fs

    def prepare_dir(self, p):
        top = p.strip("/").split("/")[0]
        if top and top in self.writable_tops():
            os.makedirs(self.host_path(p), exist_ok=True)

    @property
    def running(self):
        return self.result is None

    def finish(self, status, exception, hang=False):
        with self.cv:
            if self.result is not None or self.hung:
                return
            if hang:
                self.hung = True
            else:
                code = {GS.GENERIC_STATUS_TERMINATED: 137, GS.GENERIC_STATUS_TIMEOUT: 124}.get(status, 0)
                self.result = GS(status=status, exception=exception, exitcode=code)
            execs = list(self.execs.values())
            self.cv.notify_all()
        self.expiry.cancel()
        if not hang:
            for e in execs:
                e.kill()
            for t in self.tunnels:
                t.close()
        self.server.save_state()


# ---- the servicers --------------------------------------------------------

class Fake:
    def __init__(self, args):
        self.args = args
        self.state = os.path.abspath(args.state)
        os.makedirs(self.state, exist_ok=True)
        self.log = Log(os.path.join(self.state, "calls.jsonl"))
        self.faults = Faults(os.path.join(self.state, "faults.json"))
        self.jail = Jail(args.jail)
        self.key = os.urandom(32)
        self.valid_after = {"auth": 0.0, "router": 0.0}
        self.apps, self.images, self.secrets, self.sandboxes = {}, {}, {}, {}
        self.lock = threading.Lock()
        self.router_port = None

    # -- auth ------------------------------------------------------------

    def mint(self, claims, ttl):
        now = time.time()
        claims = dict(claims, iat=now, exp=int(now + ttl))
        # JS decodes the payload with atob: pad it until base64url needs no - or _
        for _ in range(64):
            payload = json.dumps(claims, separators=(",", ":")).encode()
            if "-" not in b64url(payload) and "_" not in b64url(payload):
                break
            claims["pad"] = claims.get("pad", "") + "x"
        head = b64url(b'{"alg":"HS256","typ":"JWT"}')
        body = b64url(payload)
        sig = b64url(hmac.new(self.key, (head + "." + body).encode(), hashlib.sha256).digest())
        return head + "." + body + "." + sig

    def verify(self, token, want):
        try:
            head, body, sig = token.split(".")
            good = b64url(hmac.new(self.key, (head + "." + body).encode(), hashlib.sha256).digest())
            if not hmac.compare_digest(good, sig):
                return None, "bad signature"
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, TypeError):
            return None, "malformed token"
        if claims.get("typ") != want:
            return None, "wrong token type"
        if claims.get("exp", 0) <= time.time() or claims.get("iat", 0) < self.valid_after[want]:
            return None, "token expired"
        return claims, None

    def check_control_auth(self, method, md):
        if md.get("x-modal-token-id") != self.args.token_id or \
                md.get("x-modal-token-secret") != self.args.token_secret:
            raise Abort(grpc.StatusCode.UNAUTHENTICATED, "Invalid token id or secret")
        if method in V2_RPCS:
            tok = md.get("x-modal-auth-token")
            if not tok:
                raise Abort(grpc.StatusCode.UNAUTHENTICATED, "Missing auth token")
            _, why = self.verify(tok, "auth")
            if why:
                raise Abort(grpc.StatusCode.UNAUTHENTICATED, "Invalid auth token: " + why)

    # -- plumbing --------------------------------------------------------

    def wrap(self, server_name, method, fn, streaming):
        def handler(request, context):
            md = {k: v for k, v in context.invocation_metadata()}
            rec = {"t": round(time.time(), 4), "server": server_name, "method": method,
                   "peer": context.peer(),
                   "metadata": {k: ("<redacted %d>" % len(v) if k in SECRET_HEADERS else v)
                                for k, v in md.items() if not k.endswith("-bin")},
                   "request": json_format.MessageToDict(request, preserving_proto_field_name=True),
                   "unknown_fields": unknown_fields(request)}
            code = "OK"
            try:
                self.inject(method, request)
                if server_name == "control":
                    self.check_control_auth(method, md)
                if streaming:
                    return self.stream(fn, request, md, context, rec)
                resp = fn(request, md, context)
                return resp
            except Abort as a:
                code = a.code.name
                rec["message"] = a.message
                if a.details is not None:
                    context.set_trailing_metadata((("grpc-status-details-bin", a.details),))
                context.abort(a.code, a.message)
            finally:
                if not streaming or code != "OK":
                    rec["code"] = code
                    self.log.write(rec)
        return handler

    def stream(self, fn, request, md, context, rec):
        # a generator: log once it ends
        def gen():
            code = "OK"
            try:
                for item in fn(request, md, context):
                    yield item
            except Abort as a:
                code = a.code.name
                rec["message"] = a.message
                context.abort(a.code, a.message)
            finally:
                rec["code"] = code
                self.log.write(rec)
        return gen()

    def inject(self, method, request):
        for kind, which in (("expire_tokens", "auth"), ("expire_router_tokens", "router")):
            if self.faults.take(method, kind, request):
                self.valid_after[which] = time.time()
        r = self.faults.take(method, "status", request)
        if r:
            raise Abort(getattr(grpc.StatusCode, r.get("code", "UNAVAILABLE")),
                        r.get("message", "injected %s" % r.get("code", "UNAVAILABLE")))
        r = self.faults.take(method, "retry_after", request)
        if r:
            code = getattr(grpc.StatusCode, r.get("code", "RESOURCE_EXHAUSTED"))
            st = API.RPCStatus(code=code.value[0], message="slow down")
            if r.get("style", "modal") == "google":
                d = duration_pb2.Duration()
                d.FromNanoseconds(int(r.get("secs", 0.2) * 1e9))
                body = d.SerializeToString()
                st.details.add(type_url="type.googleapis.com/google.rpc.RetryInfo",
                               value=b"\x0a" + bytes([len(body)]) + body)
            else:
                st.details.add().Pack(API.RPCRetryPolicy(retry_after_secs=r.get("secs", 0.2)),
                                      "type.modal.com")
            raise Abort(code, "slow down", st.SerializeToString())

    def save_state(self):
        with self.lock:
            snap = {sid: {"v2": sb.v2, "running": sb.running, "hung": sb.hung,
                          "status": sb.result.status if sb.result else 0,
                          "tags": dict(sb.tags), "execs": len(sb.execs)}
                    for sid, sb in self.sandboxes.items()}
        tmp = os.path.join(self.state, "state.json.tmp")
        with open(tmp, "w") as fh:
            json.dump({"sandboxes": snap}, fh, sort_keys=True)
        os.replace(tmp, os.path.join(self.state, "state.json"))

    def sandbox(self, sid, v2, need_running=False):
        with self.lock:
            sb = self.sandboxes.get(sid)
        if sb is None or sb.v2 != v2:
            if sb is not None and self.args.id_mismatch == "invalid":
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                            "Sandbox %s is a %s sandbox" % (sid, "V2" if sb.v2 else "V1"))
            raise Abort(grpc.StatusCode.NOT_FOUND, "Sandbox %s not found" % sid)
        if need_running and not sb.running:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "Sandbox %s has already finished" % sid)
        return sb

    # -- control plane ----------------------------------------------------

    def AuthTokenGet(self, req, md, ctx):
        ttl = self.faults.take("AuthTokenGet", "token_ttl")
        ttl = ttl.get("secs", 2) if ttl else 1200
        return API.AuthTokenGetResponse(token=self.mint({"typ": "auth", "sub": md.get("x-modal-token-id")}, ttl))

    def ClientHello(self, req, md, ctx):
        return API.ClientHelloResponse()

    def EnvironmentGetOrCreate(self, req, md, ctx):
        settings = API.EnvironmentSettings(image_builder_version="2024.10", webhook_suffix="fake")
        return API.EnvironmentGetOrCreateResponse(
            environment_id="en-fake", metadata=API.EnvironmentMetadata(name="main", settings=settings))

    def AppGetOrCreate(self, req, md, ctx):
        if not req.app_name:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "app_name is required")
        key = (req.environment_name, req.app_name)
        with self.lock:
            if key not in self.apps:
                if req.object_creation_type != API.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
                    raise Abort(grpc.StatusCode.NOT_FOUND, "App '%s' not found" % req.app_name)
                self.apps[key] = "ap-" + rand(BASE62, 22)
            return API.AppGetOrCreateResponse(app_id=self.apps[key])

    def ImageGetOrCreate(self, req, md, ctx):
        spec = req.image.SerializeToString(deterministic=True) + req.builder_version.encode()
        iid = "im-" + hashlib.sha256(spec).hexdigest()[:22]
        cmds = list(req.image.dockerfile_commands)
        with self.lock:
            known = self.images.get(iid)
            if known is None:
                fail = any("lash-fake/does-not-exist" in c for c in cmds)
                self.images[iid] = known = {"built_at": time.time() + 0.2, "fail": fail, "cmds": cmds}
        resp = API.ImageGetOrCreateResponse(image_id=iid)
        if time.time() >= known["built_at"]:
            resp.result.CopyFrom(self.image_result(known))
        return resp

    @staticmethod
    def image_result(img):
        if img["fail"]:
            return GS(status=GS.GENERIC_STATUS_FAILURE, exception="pull access denied for image")
        return GS(status=GS.GENERIC_STATUS_SUCCESS)

    def ImageJoinStreaming(self, req, md, ctx):
        with self.lock:
            img = self.images.get(req.image_id)
        if img is None:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Image %s not found" % req.image_id)
        start = int(req.last_entry_id or "0")
        lines = ["Building image %s" % req.image_id] + ["=> %s" % c for c in img["cmds"]]
        for i in range(start, len(lines)):
            yield API.ImageJoinStreamingResponse(entry_id=str(i + 1),
                                                 task_logs=[API.TaskLogs(data=lines[i] + "\n")])
        if self.faults.take("ImageJoinStreaming", "cut_stream", req):
            return
        delay = img["built_at"] - time.time()
        if delay > 0:
            time.sleep(delay)
        yield API.ImageJoinStreamingResponse(result=self.image_result(img), eof=True,
                                             entry_id=str(len(lines) + 1))

    def SecretGetOrCreate(self, req, md, ctx):
        if req.object_creation_type not in (API.OBJECT_CREATION_TYPE_EPHEMERAL,
                                            API.OBJECT_CREATION_TYPE_ANONYMOUS_OWNED_BY_APP):
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "the fake only makes ephemeral secrets")
        for k in req.env_dict:
            if not k or "=" in k:
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid env name %r" % k)
        sid = "st-" + rand(BASE62, 22)
        with self.lock:
            self.secrets[sid] = dict(req.env_dict)
        return API.SecretGetOrCreateResponse(secret_id=sid)

    def _create(self, req, v2):
        d = req.definition
        if not d.image_id or d.image_id not in self.images:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Image %r not found" % d.image_id)
        if d.HasField("workdir") and not d.workdir.startswith("/"):
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "workdir must be an absolute path")
        if d.timeout_secs > 86400:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "timeout_secs must be at most 86400")
        env = {}
        for sec in d.secret_ids:
            with self.lock:
                if sec not in self.secrets:
                    raise Abort(grpc.StatusCode.NOT_FOUND, "Secret %s not found" % sec)
                env.update(self.secrets[sec])
        if v2 and req.HasField("ephemeral_secrets"):
            env.update(dict(req.ephemeral_secrets.contents))
        sid = v2_sandbox_id() if v2 else v1_sandbox_id()
        sb = Sandbox(self, sid, v2, req.app_id, d, env, req.tags)
        with self.lock:
            self.sandboxes[sid] = sb
        self.save_state()
        return sb

    def router_access(self, sb):
        ttl = self.faults.take("router", "router_jwt_ttl")
        jwt = self.mint({"typ": "router", "task": sb.task_id}, ttl.get("secs", 2) if ttl else 1200)
        return jwt, "https://127.0.0.1:%d" % self.router_port

    def SandboxCreate(self, req, md, ctx):
        sb = self._create(req, False)
        return API.SandboxCreateResponse(sandbox_id=sb.id)

    def SandboxCreateV2(self, req, md, ctx):
        sb = self._create(req, True)
        jwt, url = self.router_access(sb)
        return API.SandboxCreateV2Response(sandbox_id=sb.id, task_id=sb.task_id,
                                           command_router_access=API.CommandRouterAccess(jwt=jwt, url=url))

    def _get_task_id(self, req, v2):
        sb = self.sandbox(req.sandbox_id, v2)
        if not sb.running:
            return API.SandboxGetTaskIdResponse(task_result=sb.result)
        if self.faults.take("SandboxGetTaskIdV2" if v2 else "SandboxGetTaskId", "schedule_polls", req):
            return API.SandboxGetTaskIdResponse()
        return API.SandboxGetTaskIdResponse(task_id=sb.task_id)

    def SandboxGetTaskId(self, req, md, ctx):
        return self._get_task_id(req, False)

    def SandboxGetTaskIdV2(self, req, md, ctx):
        return self._get_task_id(req, True)

    def _task(self, task_id):
        with self.lock:
            for sb in self.sandboxes.values():
                if sb.task_id == task_id:
                    return sb
        return None

    def TaskGetCommandRouterAccess(self, req, md, ctx):
        sb = self._task(req.task_id)
        if sb is None or sb.v2:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Task %s not found" % req.task_id)
        if not sb.running:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "Task %s has finished" % req.task_id)
        jwt, url = self.router_access(sb)
        return API.TaskGetCommandRouterAccessResponse(jwt=jwt, url=url)

    def SandboxGetCommandRouterAccess(self, req, md, ctx):
        which = req.WhichOneof("target")
        sb = self.sandbox(req.sandbox_id, True) if which == "sandbox_id" else self._task(req.task_id)
        if sb is None or not sb.v2:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Sandbox not found")
        if not sb.running:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "Sandbox %s has finished" % sb.id)
        jwt, url = self.router_access(sb)
        return API.SandboxGetCommandRouterAccessResponse(jwt=jwt, url=url)

    def _wait(self, req, v2, ctx):
        sb = self.sandbox(req.sandbox_id, v2)
        deadline = time.time() + max(0.0, min(req.timeout, 60.0))
        with sb.cv:
            while sb.result is None and time.time() < deadline and ctx.is_active():
                sb.cv.wait(min(0.5, max(0.0, deadline - time.time())))
            res = sb.result
        resp = API.SandboxWaitResponse()
        if res is not None:
            resp.result.CopyFrom(res)
        return resp

    def SandboxWait(self, req, md, ctx):
        return self._wait(req, False, ctx)

    def SandboxWaitV2(self, req, md, ctx):
        return self._wait(req, True, ctx)

    def cert(self):
        """The certificate TLS endpoints serve (tunnels always are TLS)."""
        with self.lock:
            if not getattr(self, "_cert", None):
                self._cert = make_cert(self.state)
            return self._cert

    def _tunnels(self, req, v2):
        sb = self.sandbox(req.sandbox_id, v2)
        resp = API.SandboxGetTunnelsResponse()
        if sb.result is not None:   # ended: its tunnels are gone
            resp.result.CopyFrom(sb.result)
            return resp
        resp.result.status = GS.GENERIC_STATUS_SUCCESS
        resp.tunnels.extend(t.data() for t in sb.tunnels)
        return resp

    def SandboxGetTunnels(self, req, md, ctx):
        return self._tunnels(req, False)

    def SandboxGetTunnelsV2(self, req, md, ctx):
        return self._tunnels(req, True)

    def _terminate(self, req, v2):
        sb = self.sandbox(req.sandbox_id, v2)
        existing = sb.result
        hang = self.faults.take("SandboxTerminateV2" if v2 else "SandboxTerminate",
                                "hang_terminate", req) is not None
        sb.finish(GS.GENERIC_STATUS_TERMINATED, "Sandbox was cancelled by user", hang=hang)
        resp = API.SandboxTerminateResponse()
        if existing is not None:
            resp.existing_result.CopyFrom(existing)
        return resp

    def SandboxTerminate(self, req, md, ctx):
        return self._terminate(req, False)

    def SandboxTerminateV2(self, req, md, ctx):
        return self._terminate(req, True)

    def _tags_set(self, req, v2):
        sb = self.sandbox(req.sandbox_id, v2)
        for t in req.tags:
            if not t.tag_name:
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "tag names must not be empty")
        sb.tags = [(t.tag_name, t.tag_value) for t in req.tags]
        self.save_state()
        return empty_pb2.Empty()

    def _tags_get(self, req, v2):
        sb = self.sandbox(req.sandbox_id, v2)
        return API.SandboxTagsGetResponse(tags=[API.SandboxTag(tag_name=k, tag_value=v) for k, v in sb.tags])

    def SandboxTagsSet(self, req, md, ctx):
        return self._tags_set(req, False)

    def SandboxTagsSetV2(self, req, md, ctx):
        return self._tags_set(req, True)

    def SandboxTagsGet(self, req, md, ctx):
        return self._tags_get(req, False)

    def SandboxTagsGetV2(self, req, md, ctx):
        return self._tags_get(req, True)

    def _list(self, req, v2):
        """SandboxList lists V1 sandboxes only; SandboxListV2 both (as Modal's
        _experimental_list says). Newest first, pages of 3 by before_timestamp,
        every tag in req.tags must match (name and value)."""
        want = [(t.tag_name, t.tag_value) for t in req.tags]
        stale = self.faults.take("SandboxListV2" if v2 else "SandboxList", "stale_expiry", req)
        with self.lock:
            sbs = list(self.sandboxes.values())
        out = []
        for sb in sorted(sbs, key=lambda x: -x.created):
            if not v2 and sb.v2:
                continue
            if req.app_id and sb.app_id != req.app_id:
                continue
            if not req.include_finished and not sb.running:
                continue
            if req.before_timestamp and sb.created >= req.before_timestamp:
                continue
            if any(t not in sb.tags for t in want):
                continue
            info = API.SandboxInfo(id=sb.id, created_at=sb.created, app_id=sb.app_id,
                                   timeout_secs=sb.timeout,
                                   tags=[API.SandboxTag(tag_name=k, tag_value="1" if stale and k == "lash_expires_at" else v)
                                         for k, v in sb.tags])
            info.task_info.id = sb.task_id
            if sb.result is not None:
                info.task_info.result.CopyFrom(sb.result)
            out.append(info)
            if len(out) == 3:
                break
        return API.SandboxListResponse(sandboxes=out)

    def SandboxList(self, req, md, ctx):
        return self._list(req, False)

    def SandboxListV2(self, req, md, ctx):
        return self._list(req, True)

    def snapshot(self, sb):
        """Copy sb's files into a new image (content: the writable trees)."""
        iid = "im-" + rand(BASE62, 22)
        dst = os.path.join(self.state, "images", iid)
        shutil.copytree(sb.fs, dst, symlinks=True)
        with self.lock:
            self.images[iid] = {"built_at": 0, "fail": False, "cmds": ["snapshot of " + sb.id],
                                "snapshot": dst}
        return iid

    def SandboxSnapshotFs(self, req, md, ctx):
        # V1 only, as Modal's SDKs say (_ensure_v1 before SandboxSnapshotFs)
        sb = self.sandbox(req.sandbox_id, False, need_running=True)
        iid = self.snapshot(sb)
        return API.SandboxSnapshotFsResponse(image_id=iid, result=GS(status=GS.GENERIC_STATUS_SUCCESS))

    # -- router -----------------------------------------------------------

    def TaskSnapshotFilesystem(self, req, md, ctx):
        sb = self.router_auth(req, md)
        if not req.snapshot_id:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "snapshot_id is required")
        if not req.HasField("ttl_seconds") or (req.ttl_seconds <= 0 and req.ttl_seconds != -1):
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "ttl_seconds must be set (>0, or -1)")
        with sb.lock:
            done = getattr(sb, "snapshots", {}).get(req.snapshot_id)
        if done is None:
            done = self.snapshot(sb)
            with sb.lock:
                sb.snapshots = dict(getattr(sb, "snapshots", {}), **{req.snapshot_id: done})
        return TCR.TaskSnapshotFilesystemResponse(image_id=done)

    def router_auth(self, req, md):
        auth = md.get("authorization", "")
        if not auth.startswith("Bearer "):
            raise Abort(grpc.StatusCode.UNAUTHENTICATED, "missing bearer token")
        claims, why = self.verify(auth[7:], "router")
        if why:
            raise Abort(grpc.StatusCode.UNAUTHENTICATED, "router token: " + why)
        if claims.get("task") != req.task_id:
            raise Abort(grpc.StatusCode.PERMISSION_DENIED, "token is for another task")
        sb = self._task(req.task_id)
        if sb is None or not sb.running:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Task %s not found" % req.task_id)
        return sb

    def _exec(self, sb, exec_id):
        with sb.lock:
            e = sb.execs.get(exec_id)
        if e is None:
            raise Abort(grpc.StatusCode.NOT_FOUND, "Exec %s not found" % exec_id)
        return e

    def TaskExecStart(self, req, md, ctx):
        sb = self.router_auth(req, md)
        if not req.command_args:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "command_args is empty")
        if not req.exec_id:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "exec_id is required")
        with sb.lock:
            if req.exec_id in sb.execs:
                return TCR.TaskExecStartResponse()   # idempotent
        try:
            e = Exec(sb, req.exec_id, req, self.jail)
        except OSError as err:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, "cannot start command: %s" % err)
        with sb.lock:
            sb.execs[req.exec_id] = e
        r = self.faults.take("TaskExecStart", "terminate_after", req)
        if r:
            t = threading.Timer(r.get("secs", 0.5), sb.finish,
                                args=(GS.GENERIC_STATUS_TERMINATED, "Sandbox was cancelled by user"))
            t.daemon = True
            t.start()
        return TCR.TaskExecStartResponse()

    def TaskExecStdioRead(self, req, md, ctx):
        sb = self.router_auth(req, md)
        e = self._exec(sb, req.exec_id)
        log = e.err if req.file_descriptor == TCR.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR else e.out
        off = req.offset
        cut = self.faults.take("TaskExecStdioRead", "cut_stream", req)
        sent = 0
        while True:
            with log.cv:
                while len(log.data) <= off and not log.closed and sb.running and ctx.is_active():
                    log.cv.wait(0.2)
                chunk = bytes(log.data[off:off + (1 << 16)])
                closed = log.closed
            if not sb.running:
                raise Abort(grpc.StatusCode.NOT_FOUND, "Task %s has shut down" % req.task_id)
            if not ctx.is_active():
                return
            if chunk:
                if cut is not None:
                    limit = cut.get("after_bytes", 1)
                    if sent + len(chunk) > limit:
                        chunk = chunk[:max(0, limit - sent)]
                        if chunk:
                            yield TCR.TaskExecStdioReadResponse(data=chunk)
                        raise Abort(grpc.StatusCode.UNAVAILABLE, "stream reset (injected)")
                off += len(chunk)
                sent += len(chunk)
                yield TCR.TaskExecStdioReadResponse(data=chunk)
            elif closed:
                return

    def TaskExecWait(self, req, md, ctx):
        sb = self.router_auth(req, md)
        e = self._exec(sb, req.exec_id)
        while not e.done.wait(0.2):
            if not sb.running:
                raise Abort(grpc.StatusCode.NOT_FOUND, "Task %s has shut down" % req.task_id)
            if not ctx.is_active():
                raise Abort(grpc.StatusCode.CANCELLED, "client went away")
        return self.exit_status(TCR.TaskExecWaitResponse, e)

    @staticmethod
    def exit_status(cls, e):
        if e.signal is not None:
            return cls(signal=e.signal)
        return cls(code=e.code)

    def TaskExecPoll(self, req, md, ctx):
        sb = self.router_auth(req, md)
        e = self._exec(sb, req.exec_id)
        if not e.done.is_set():
            return TCR.TaskExecPollResponse()
        return self.exit_status(TCR.TaskExecPollResponse, e)

    def TaskExecStdinWrite(self, req, md, ctx):
        sb = self.router_auth(req, md)
        e = self._exec(sb, req.exec_id)
        e.write_stdin(req.offset, req.data, req.eof)
        return TCR.TaskExecStdinWriteResponse()

    # -- serving -----------------------------------------------------------

    def handlers(self, server_name, module, service):
        sdesc = module.DESCRIPTOR.services_by_name[service]
        table = {}
        for m in sdesc.methods:
            fn = getattr(self, m.name)
            req_cls = self.message_class(m.input_type)
            resp_cls = self.message_class(m.output_type)
            streaming = m.server_streaming
            h = self.wrap(server_name, m.name, fn, streaming)
            maker = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
            table[m.name] = maker(h, request_deserializer=req_cls.FromString,
                                  response_serializer=resp_cls.SerializeToString)
        return grpc.method_handlers_generic_handler(sdesc.full_name, table)

    @staticmethod
    def message_class(desc):
        if desc.full_name == "google.protobuf.Empty":
            return empty_pb2.Empty
        mod = API if desc.full_name.startswith("modal.client.") else TCR
        return getattr(mod, desc.name)

    def shutdown(self):
        with self.lock:
            sbs = list(self.sandboxes.values())
        for sb in sbs:
            for e in list(sb.execs.values()):
                e.kill()


def make_cert(state):
    """A self-signed certificate for 127.0.0.1/localhost: (key, cert) paths."""
    key, cert = os.path.join(state, "key.pem"), os.path.join(state, "ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return key, cert


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--lifetime", type=float, default=900)
    ap.add_argument("--watch-pid", type=int, default=0)
    ap.add_argument("--token-id", default="ak-fake-id")
    ap.add_argument("--token-secret", default="as-fake-secret")
    ap.add_argument("--id-mismatch", choices=["notfound", "invalid"], default="notfound")
    ap.add_argument("--jail", choices=["auto", "bwrap", "none"], default="auto")
    ap.add_argument("--workers", type=int, default=512)
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    fake = Fake(args)
    opts = [("grpc.max_receive_message_length", 100 << 20),
            ("grpc.max_send_message_length", 100 << 20)]
    ca = make_cert(fake.state) if args.tls else None
    fake._cert = ca

    def listen(server):
        if ca is None:
            return server.add_insecure_port("127.0.0.1:0")
        with open(ca[0], "rb") as k, open(ca[1], "rb") as c:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        return server.add_secure_port("127.0.0.1:0", creds)

    control = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers), options=opts)
    control.add_generic_rpc_handlers([fake.handlers("control", API, "ModalClient")])
    cport = listen(control)
    router = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers), options=opts)
    router.add_generic_rpc_handlers([fake.handlers("router", TCR, "TaskCommandRouter")])
    rport = listen(router)
    fake.router_port = rport
    control.start()
    router.start()
    fake.save_state()
    tmp = os.path.join(fake.state, "ports.json.tmp")
    with open(tmp, "w") as fh:
        json.dump({"control": cport, "router": rport, "pid": os.getpid(), "jail": fake.jail.mode,
                   "tls": ca is not None, "ca": ca[1] if ca else None}, fh)
    os.replace(tmp, os.path.join(fake.state, "ports.json"))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    end = time.time() + args.lifetime
    while not stop.wait(0.2):
        if time.time() > end:
            break
        if args.watch_pid:
            try:
                os.kill(args.watch_pid, 0)
            except ProcessLookupError:
                break
    fake.shutdown()
    control.stop(0.5)
    router.stop(0.5)


if __name__ == "__main__":
    main()
