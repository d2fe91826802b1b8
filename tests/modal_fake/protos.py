"""protos.py: compile lash's Modal proto subset with protoc and import it.

The generated *_pb2.py modules are not checked in: they are produced at
test time into a private temporary directory (protoc is fast and this keeps
the .proto files the single source of truth). Needs /usr/bin/protoc and
Debian's python3-protobuf, i.e. run under /usr/bin/python3.
"""
import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["modal_proto/api.proto", "modal_proto/task_command_router.proto",
          "lash_pbtest.proto"]


class Missing(Exception):
    """protoc or python protobuf is not available."""


def load():
    """Return (api_pb2, tcr_pb2, pbtest_pb2)."""
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    if not os.path.exists(protoc):
        raise Missing("protoc not found (install protobuf-compiler)")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise Missing("python protobuf not importable (install python3-protobuf "
                      "and run with /usr/bin/python3)")
    out = tempfile.mkdtemp(prefix="lash-modal-pb-")
    atexit.register(shutil.rmtree, out, True)
    includes = ["-I" + HERE]
    if os.path.isdir("/usr/include/google/protobuf"):
        includes.append("-I/usr/include")
    subprocess.run([protoc, *includes, "--python_out=" + out, *PROTOS],
                   cwd=HERE, check=True)
    open(os.path.join(out, "modal_proto", "__init__.py"), "w").close()
    sys.path.insert(0, out)
    api = importlib.import_module("modal_proto.api_pb2")
    tcr = importlib.import_module("modal_proto.task_command_router_pb2")
    pbt = importlib.import_module("lash_pbtest_pb2")
    return api, tcr, pbt
