"""receiver.py: an OTLP/HTTP trace receiver for lash's tests.

Decodes every POST /v1/traces into the real ExportTraceServiceRequest,
compiled with protoc from the pinned opentelemetry-proto files in
upstream/ (see upstream/PINNED):
  application/x-protobuf  ParseFromString, then re-serialized and compared
                          byte for byte (so no unknown field, wrong wire
                          type or out-of-order field passes);
  application/json        OTLP/JSON: trace/span ids turned from hex to the
                          base64 protobuf's JSON mapping wants (the one
                          difference the OTLP spec makes), then
                          json_format.Parse, which refuses unknown names and
                          wrong types.
Each decoded request is appended to LOG as one JSON line
(MessageToDict, ids back in hex, plus "content_type"); a body that does not
decode is answered 400 and logged as {"error": ...}.

usage: /usr/bin/python3 receiver.py LOG [--status N] [--hold DIR]
  prints the port it listens on (127.0.0.1), then serves until killed.
  --status N   answer every request with HTTP N (after decoding it)
  --hold DIR   on a request, create DIR/received, then answer only once
               DIR/release exists (a collector that is slow to answer)
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM = os.path.join(HERE, "upstream")
PROTOS = ["opentelemetry/proto/common/v1/common.proto",
          "opentelemetry/proto/resource/v1/resource.proto",
          "opentelemetry/proto/trace/v1/trace.proto",
          "opentelemetry/proto/collector/trace/v1/trace_service.proto"]


def load():
    out = tempfile.mkdtemp(prefix="lash-otlp-pb-")
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    subprocess.run([protoc, "-I" + UPSTREAM, "--python_out=" + out, *PROTOS], check=True)
    sys.path.insert(0, out)
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    return out, trace_service_pb2


def hex_to_b64(obj):
    """OTLP/JSON ids are hex; protobuf's JSON mapping wants base64."""
    for rs in obj.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        v = sp[k]
                        if not isinstance(v, str) or len(v) % 2 or any(c not in "0123456789abcdef" for c in v):
                            raise ValueError("%s is not lower-case hex: %r" % (k, v))
                        sp[k] = base64.b64encode(bytes.fromhex(v)).decode()
    return obj


def ids_to_hex(d):
    for rs in d.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = base64.b64decode(sp[k]).hex()
    return d


def main():
    log = sys.argv[1]
    status = 200
    hold = None
    args = sys.argv[2:]
    while args:
        a = args.pop(0)
        if a == "--status":
            status = int(args.pop(0))
        elif a == "--hold":
            hold = args.pop(0)
    tmp, pb = load()
    from google.protobuf import json_format
    lock = threading.Lock()

    def record(entry):
        with lock:
            with open(log, "a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, code, body, ctype):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            ctype = self.headers.get("Content-Type", "")
            req = pb.ExportTraceServiceRequest()
            try:
                if self.path != "/v1/traces":
                    raise ValueError("POST to %s, not /v1/traces" % self.path)
                if ctype == "application/x-protobuf":
                    req.ParseFromString(body)
                    again = req.SerializeToString()
                    if again != body:
                        raise ValueError("the protobuf body does not re-encode to the same bytes "
                                         "(%d vs %d bytes): unknown or misplaced fields" % (len(body), len(again)))
                elif ctype == "application/json":
                    json_format.Parse(json.dumps(hex_to_b64(json.loads(body))), req)
                else:
                    raise ValueError("unexpected Content-Type %r" % ctype)
            except Exception as e:  # noqa: BLE001 - any decode failure is the test's finding
                record({"error": str(e), "content_type": ctype})
                self.reply(400, b"bad request", "text/plain")
                return
            d = ids_to_hex(json_format.MessageToDict(req))
            d["content_type"] = ctype
            d["headers"] = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-")}
            record(d)
            if hold:
                open(os.path.join(hold, "received"), "w").close()
                for _ in range(2400):
                    if os.path.exists(os.path.join(hold, "release")):
                        break
                    time.sleep(0.05)
            resp = pb.ExportTraceServiceResponse()
            if ctype == "application/json":
                self.reply(status, json_format.MessageToJson(resp).encode(), "application/json")
            else:
                self.reply(status, resp.SerializeToString(), "application/x-protobuf")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()
