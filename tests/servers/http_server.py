#!/usr/bin/python3
"""tests/servers/http_server.py: the loopback HTTP server lash's HTTP specs
talk to. One port serves HTTP/1.1 and HTTP/2 cleartext with prior knowledge
(told apart by the connection preface); with --cert/--key a second port
serves TLS (ALPN h2 or http/1.1). Binds 127.0.0.1 on free ports, prints one
JSON line {"port":, "tls_port":, "pid":} and exits by itself after
--lifetime seconds.

Routes (any method):
  /echo                 JSON: method, path, query, version, conn (serial of
                        the connection), tls_reused, headers [[name, value]],
                        body_hex
  /status/<code>        that status, body "status <code>"
  /slow?delay=S         answers after S seconds
  /slowbody?delay=S     sends headers at once, the body after S seconds
  /hang                 never answers
  /drop?size=N&sent=M   Content-Length N, sends M bytes, closes the connection
  /drop_chunked         chunked, sends two chunks, closes without the last
  /empty                closes the connection without any response
  /chunked?n=N&size=S&delay_ms=D   N chunks of S bytes, D ms apart
  /big?n=N              N bytes (Content-Length)
  /headers              repeated and mixed-case response headers
  /redirect?to=PATH     302 to PATH
  /trickle?type=T&delay_ms=D   streams the request body back one byte per
                        flush (chunked over HTTP/1.1, one DATA frame each
                        over HTTP/2), content type T
  /close                answers "closing" and closes the connection
                        gracefully (Connection: close; HTTP/2: GOAWAY)

Only the standard library and h2 (Debian's python3-h2, for HTTP/2)."""

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import ssl
import sys
import urllib.parse

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    HAVE_H2 = True
except ImportError:  # HTTP/2 routes then answer with a closed connection
    HAVE_H2 = False

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
REASONS = {200: "OK", 201: "Created", 204: "No Content", 302: "Found",
           400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable"}
conn_ids = itertools.count(1)


class Dropped(Exception):
    """A route asked to drop the connection."""


class Closing(Exception):
    """A route answered and asks to close the connection gracefully (HTTP/2:
    GOAWAY first)."""


class Request:
    def __init__(self, method, target, headers, body, version, conn,
                 tls_reused):
        self.method = method
        url = urllib.parse.urlsplit(target)
        self.path = url.path
        self.query_string = url.query
        self.query = dict(urllib.parse.parse_qsl(url.query))
        self.headers = headers          # [(name, value)] as received
        self.body = body
        self.version = version
        self.conn = conn
        self.tls_reused = tls_reused

    def arg(self, name, default, conv=int):
        return conv(self.query.get(name, default))


async def route(req, res):
    """Answer req through res (an H1Response or H2Response)."""
    p = req.path
    if p == "/echo":
        body = json.dumps({
            "method": req.method, "path": req.path,
            "query": req.query_string, "version": req.version,
            "conn": req.conn, "tls_reused": req.tls_reused,
            "headers": [[k, v] for k, v in req.headers],
            "body_hex": req.body.hex(),
        }).encode()
        await res.send(200, [("content-type", "application/json")], body)
    elif p.startswith("/status/"):
        code = int(p[len("/status/"):])
        body = b"" if code in (204, 304) else b"status %d" % code
        await res.send(code, [("content-type", "text/plain")], body)
    elif p == "/slow":
        await asyncio.sleep(req.arg("delay", "1", float))
        await res.send(200, [], b"slow done")
    elif p == "/slowbody":
        await res.start(200, [("content-length", "9")])
        await asyncio.sleep(req.arg("delay", "1", float))
        await res.write(b"slow body")
        await res.end()
    elif p == "/hang":
        await asyncio.sleep(3600)
    elif p == "/drop":
        size, sent = req.arg("size", "1000"), req.arg("sent", "100")
        await res.start(200, [("content-length", str(size))])
        await res.write(b"x" * sent)
        raise Dropped()
    elif p == "/drop_chunked":
        await res.start(200, [])
        await res.write(b"first ")
        await res.write(b"second ")
        raise Dropped()
    elif p == "/empty":
        raise Dropped()
    elif p == "/chunked":
        n, size = req.arg("n", "5"), req.arg("size", "10")
        delay = req.arg("delay_ms", "0") / 1000.0
        await res.start(200, [("content-type", "application/octet-stream")])
        for i in range(n):
            await res.write(bytes([ord("a") + i % 26]) * size)
            if delay:
                await asyncio.sleep(delay)
        await res.end()
    elif p == "/big":
        n = req.arg("n", "1048576")
        await res.start(200, [("content-length", str(n))])
        block = b"0123456789abcdef" * 4096
        left = n
        while left > 0:
            k = min(left, len(block))
            await res.write(block[:k])
            left -= k
        await res.end()
    elif p == "/headers":
        await res.send(200, [("X-Multi", "a"), ("x-multi", "b"),
                             ("X-Mixed-Case", "Value"),
                             ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
                       b"headers")
    elif p == "/redirect":
        await res.send(302, [("location", req.query.get("to", "/echo"))],
                       b"moved")
    elif p == "/trickle":
        delay = req.arg("delay_ms", "1") / 1000.0
        await res.start(200, [("content-type",
                               req.query.get("type", "text/event-stream")),
                              ("cache-control", "no-cache")])
        for i in range(len(req.body)):
            await res.write(req.body[i:i + 1])
            if delay:
                await asyncio.sleep(delay)
        await res.end()
    elif p == "/close":
        res.close_after = True
        await res.send(200, [("connection", "close")], b"closing")
        raise Closing()
    else:
        await res.send(404, [("content-type", "text/plain")], b"no route")


# ---- HTTP/1.1 -------------------------------------------------------------

class Conn:
    """Buffered reading over an asyncio stream, with bytes pushed back."""

    def __init__(self, reader, writer, pushed=b""):
        self.reader, self.writer, self.buf = reader, writer, pushed

    async def fill(self):
        data = await self.reader.read(65536)
        if not data:
            raise ConnectionError("peer closed")
        self.buf += data

    async def read_until(self, sep, limit=1 << 20):
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise ConnectionError("request head too large")
            await self.fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    async def read_exact(self, n):
        while len(self.buf) < n:
            await self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class H1Response:
    def __init__(self, conn, head_only):
        self.w = conn.writer
        self.head_only = head_only
        self.chunked = False
        self.keep = True

    async def start(self, status, headers):
        names = {k.lower() for k, _ in headers}
        if "content-length" not in names:
            self.chunked = True
            headers = headers + [("transfer-encoding", "chunked")]
        if "connection" in names:
            self.keep = False
        lines = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "Status"))]
        lines += ["%s: %s" % kv for kv in headers]
        self.w.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.w.drain()

    async def write(self, data):
        if self.head_only or not data:
            return
        if self.chunked:
            self.w.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self.w.write(data)
        await self.w.drain()

    async def end(self):
        if self.chunked and not self.head_only:
            self.w.write(b"0\r\n\r\n")
        await self.w.drain()

    async def send(self, status, headers, body):
        await self.start(status, headers + [("content-length",
                                             str(len(body)))])
        await self.write(body)
        await self.end()


async def serve_h1(conn, cid, tls_reused):
    while True:
        try:
            head = await conn.read_until(b"\r\n\r\n")
        except ConnectionError:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers.append((k, v.strip()))
        hmap = {k.lower(): v for k, v in headers}
        if hmap.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await conn.read_until(b"\r\n")).strip(), 16)
                if size == 0:
                    await conn.read_until(b"\r\n")
                    break
                body += await conn.read_exact(size)
                await conn.read_exact(2)
        else:
            body = await conn.read_exact(int(hmap.get("content-length", "0")))
        req = Request(method, target, headers, body, "HTTP/1.1", cid,
                      tls_reused)
        res = H1Response(conn, method == "HEAD")
        await route(req, res)
        if not res.keep or hmap.get("connection", "").lower() == "close":
            return


# ---- HTTP/2 -----------------------------------------------------------------

class H2Conn:
    def __init__(self, conn, cid, tls_reused):
        cfg = h2.config.H2Configuration(client_side=False,
                                        header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.conn, self.cid, self.tls_reused = conn, cid, tls_reused
        self.streams = {}          # stream id -> [headers, body]
        self.window = asyncio.Event()
        self.tasks = set()
        self.dropped = False

    async def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.conn.writer.write(data)
            await self.conn.writer.drain()

    async def run(self, pushed):
        self.h2.initiate_connection()
        await self.flush()
        data = pushed
        while not self.dropped:
            if not data:
                data = await self.conn.reader.read(65536)
                if not data:
                    return
            try:
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                await self.flush()
                return
            data = b""
            for ev in events:
                self.handle(ev)
            await self.flush()

    def handle(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.streams[ev.stream_id] = [ev.headers, b""]
        elif isinstance(ev, h2.events.DataReceived):
            self.streams[ev.stream_id][1] += ev.data
            self.h2.acknowledge_received_data(ev.flow_controlled_length,
                                              ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            headers, body = self.streams.pop(ev.stream_id)
            t = asyncio.ensure_future(self.answer(ev.stream_id, headers,
                                                  body))
            self.tasks.add(t)
            t.add_done_callback(self.tasks.discard)
        elif isinstance(ev, (h2.events.WindowUpdated,
                             h2.events.RemoteSettingsChanged)):
            self.window.set()

    async def answer(self, sid, headers, body):
        pseudo = {k: v for k, v in headers if k.startswith(":")}
        plain = [(k, v) for k, v in headers if not k.startswith(":")]
        req = Request(pseudo.get(":method"), pseudo.get(":path", "/"), plain,
                      body, "HTTP/2", self.cid, self.tls_reused)
        res = H2Response(self, sid, req.method == "HEAD")
        try:
            await route(req, res)
        except Closing:
            self.dropped = True
            self.conn.writer.close()
        except Dropped:
            self.dropped = True
            self.conn.writer.close()
        except (h2.exceptions.StreamClosedError, ConnectionError):
            pass


class H2Response:
    def __init__(self, hc, sid, head_only):
        self.hc, self.sid, self.head_only = hc, sid, head_only
        self.close_after = False

    async def start(self, status, headers):
        hs = [(":status", str(status))]
        hs += [(k.lower(), v) for k, v in headers
               if k.lower() not in ("connection", "transfer-encoding")]
        self.hc.h2.send_headers(self.sid, hs)
        await self.hc.flush()

    async def write(self, data):
        if self.head_only:
            return
        h2c = self.hc.h2
        while data:
            room = min(h2c.local_flow_control_window(self.sid),
                       h2c.max_outbound_frame_size)
            if room <= 0:
                self.hc.window.clear()
                await self.hc.window.wait()
                continue
            h2c.send_data(self.sid, data[:room])
            data = data[room:]
            await self.hc.flush()

    async def end(self):
        self.hc.h2.end_stream(self.sid)
        if self.close_after:
            # GOAWAY in the same write as the end of the stream, so the
            # client never picks this connection for its next request.
            self.hc.h2.close_connection()
        await self.hc.flush()

    async def send(self, status, headers, body):
        await self.start(status, headers + [("content-length",
                                             str(len(body)))])
        await self.write(body)
        await self.end()


# ---- connections ----------------------------------------------------------------

async def on_connection(reader, writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cid = next(conn_ids)
    sslobj = writer.get_extra_info("ssl_object")
    tls_reused = bool(sslobj and sslobj.session_reused)
    alpn = sslobj.selected_alpn_protocol() if sslobj else None
    conn = Conn(reader, writer)
    try:
        if alpn != "h2":
            # Cleartext: read until the bytes stop matching the preface.
            while len(conn.buf) < len(PREFACE) and \
                    PREFACE.startswith(conn.buf) and alpn is None:
                await conn.fill()
        if alpn == "h2" or conn.buf.startswith(PREFACE):
            if HAVE_H2:
                pushed, conn.buf = conn.buf, b""
                await H2Conn(conn, cid, tls_reused).run(pushed)
        else:
            await serve_h1(conn, cid, tls_reused)
    except (Dropped, Closing, ConnectionError, asyncio.IncompleteReadError,
            ssl.SSLError, ValueError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lifetime", type=float, default=120.0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    args = ap.parse_args()

    plain = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    info = {"port": plain.sockets[0].getsockname()[1], "tls_port": None,
            "pid": os.getpid(), "h2": HAVE_H2}
    if args.cert and args.key:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["h2", "http/1.1"] if HAVE_H2
                               else ["http/1.1"])
        tls = await asyncio.start_server(on_connection, "127.0.0.1", 0,
                                         ssl=ctx)
        info["tls_port"] = tls.sockets[0].getsockname()[1]
    print(json.dumps(info), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), args.lifetime)
    except asyncio.TimeoutError:
        pass


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
