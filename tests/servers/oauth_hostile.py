#!/usr/bin/env python3
"""An MCP server that needs OAuth and whose authorization server metadata
is hostile, for tests/integration/test_oauth_urls.sh. Every MCP request is
answered 401 with a Bearer challenge naming its protected-resource
metadata; that names this process as the authorization server, whose
metadata (RFC 8414) gives the authorization_endpoint read from the file
ENDPOINT_FILE at each request (so one server serves every case), PKCE S256,
a token endpoint and dynamic registration.

usage: oauth_hostile.py PORT_FILE ENDPOINT_FILE
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, ENDPOINT_FILE = sys.argv[1], sys.argv[2]


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def base(self):
        return "http://127.0.0.1:%d" % self.server.server_port

    def do_GET(self):
        if self.path.startswith("/.well-known/oauth-protected-resource"):
            return self.reply(200, {"resource": self.base() + "/mcp", "authorization_servers": [self.base()]})
        if self.path.startswith("/.well-known/oauth-authorization-server"):
            with open(ENDPOINT_FILE, "rb") as f:
                endpoint = f.read().decode("latin-1")
            return self.reply(200, {"issuer": self.base(), "authorization_endpoint": endpoint,
                                    "token_endpoint": self.base() + "/token",
                                    "registration_endpoint": self.base() + "/register",
                                    "code_challenge_methods_supported": ["S256"],
                                    "response_types_supported": ["code"]})
        if self.path.startswith("/mcp"):
            return self.challenge()
        self.reply(404, {"error": "not_found"})

    def challenge(self):
        self.reply(401, {"error": "unauthorized"}, [
            ("WWW-Authenticate", 'Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"'
             % self.base())])

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if self.path == "/register":
            return self.reply(201, {"client_id": "hostile-client", "token_endpoint_auth_method": "none"})
        if self.path == "/token":
            return self.reply(400, {"error": "invalid_grant"})
        return self.challenge()


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(srv.server_port))
import os
os.rename(PORT_FILE + ".tmp", PORT_FILE)
srv.serve_forever()
