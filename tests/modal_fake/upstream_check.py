#!/usr/bin/python3
"""upstream_check.py: compare lash's Modal message tables with Modal's real protos.

Reads lash's descriptor lines (the format of tests/fixtures/modal_golden/
descriptors.txt, which test_pb prints from the C tables in src/5-backend/modal/modal_msgs.c:
"full.Name number field type label oneof") from the file named on the command
line, compiles the pinned upstream .proto files (upstream/modal_proto, commit
in upstream/PINNED) with protoc, and checks every field lash declares against
the real descriptor: same number, name, type, label (explicit presence or not)
and oneof membership. lash's tables are a subset: fields lash does not declare
are skipped as unknown when decoding, which is fine.

  upstream_check.py LINES_FILE     exit 0 all match, 1 mismatch, 77 no protoc
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
UP = os.path.join(HERE, "upstream")


def load_pool():
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    if not os.path.exists(protoc):
        raise SystemExit(77)
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: F401
    except ImportError:
        raise SystemExit(77)
    if not os.path.exists("/usr/include/google/protobuf/empty.proto"):
        # Modal's protos import the well-known types (libprotobuf-dev)
        print("# upstream_check: /usr/include/google/protobuf missing (install libprotobuf-dev)")
        raise SystemExit(77)
    out = tempfile.mkdtemp(prefix="lash-upstream-pb-")
    try:
        fds = os.path.join(out, "set.pb")
        inc = ["-I" + UP]
        if os.path.isdir("/usr/include/google/protobuf"):
            inc.append("-I/usr/include")
        subprocess.run([protoc, *inc, "--include_imports", "--descriptor_set_out=" + fds,
                        "modal_proto/api.proto", "modal_proto/task_command_router.proto"],
                       cwd=UP, check=True)
        s = descriptor_pb2.FileDescriptorSet()
        with open(fds, "rb") as f:
            s.ParseFromString(f.read())
    finally:
        shutil.rmtree(out, True)
    pool = descriptor_pool.DescriptorPool()
    for fd in s.file:
        pool.Add(fd)
    return pool


def describe_field(f):
    from google.protobuf.descriptor import FieldDescriptor as FD
    names = {FD.TYPE_BOOL: "bool", FD.TYPE_INT32: "int32", FD.TYPE_UINT32: "uint32",
             FD.TYPE_SINT32: "sint32", FD.TYPE_INT64: "int64", FD.TYPE_UINT64: "uint64",
             FD.TYPE_SINT64: "sint64", FD.TYPE_ENUM: "enum", FD.TYPE_FIXED32: "fixed32",
             FD.TYPE_SFIXED32: "sfixed32", FD.TYPE_FIXED64: "fixed64",
             FD.TYPE_SFIXED64: "sfixed64", FD.TYPE_FLOAT: "float",
             FD.TYPE_DOUBLE: "double", FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes"}
    if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
        typ = "map"
    elif f.type == FD.TYPE_MESSAGE:
        typ = "msg:" + f.message_type.full_name
    else:
        typ = names[f.type]
    if f.label == FD.LABEL_REPEATED:
        label = "repeated"
    elif f.type != FD.TYPE_MESSAGE and f.has_presence:
        label = "optional"
    else:
        label = "singular"
    o = f.containing_oneof
    if o is not None and len(o.fields) == 1 and o.name == "_" + f.name:
        o = None   # the synthetic oneof of a proto3 `optional`
    return typ, label, (o.name if o is not None else None)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    pool = load_pool()
    bad, fields, msgs = [], 0, set()
    groups = {}   # (message, lash group) -> upstream oneof name
    with open(sys.argv[1]) as f:
        lines = [l.split() for l in f if l.strip()]
    for parts in lines:
        full = parts[0]
        if not (full.startswith("modal.") or full.startswith("google.protobuf.")):
            continue   # the codec's own test messages
        try:
            d = pool.FindMessageTypeByName(full)
        except KeyError:
            bad.append("%s: no such message upstream" % full)
            continue
        msgs.add(full)
        if parts[1:] == ["(no", "fields)"]:
            continue
        num, name, typ, label, group = int(parts[1]), parts[2], parts[3], parts[4], int(parts[5])
        fields += 1
        uf = d.fields_by_number.get(num)
        if uf is None:
            bad.append("%s %d %s: no field %d upstream" % (full, num, name, num))
            continue
        utyp, ulabel, uoneof = describe_field(uf)
        want = (uf.name, utyp, ulabel)
        got = (name, typ, label)
        if want != got:
            bad.append("%s %d: lash has %s, upstream has %s" % (full, num, " ".join(got),
                                                                " ".join(want)))
        if (group != 0) != (uoneof is not None):
            bad.append("%s %d %s: lash %s a oneof, upstream %s" % (
                full, num, name, "puts it in" if group else "does not put it in",
                ("has it in oneof " + uoneof) if uoneof else "does not"))
        elif group:
            prev = groups.setdefault((full, group), uoneof)
            if prev != uoneof:
                bad.append("%s %d %s: lash groups it with oneof %s, upstream has %s" % (
                    full, num, name, prev, uoneof))
    for b in bad:
        print("# mismatch:", b)
    pinned = open(os.path.join(UP, "PINNED")).read().split("commit:", 1)[1].split()[0]
    print("# %d messages, %d fields of lash's tables compared with modal-client %s: %d mismatches"
          % (len(msgs), fields, pinned[:12], len(bad)))
    return 1 if bad or not fields else 0


if __name__ == "__main__":
    sys.exit(main())
