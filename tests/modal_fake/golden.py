#!/usr/bin/python3
"""golden.py: golden bytes for lash's protobuf codec, made by Python's protobuf.

For every message in lash's Modal proto subset (and the codec's test
messages) it writes, into tests/fixtures/modal_golden/:
  <sample>.bin   the message as serialized by python protobuf
  <sample>.txt   the canonical dump of it (the format of pb_dump in src/1-base/pb.c)
  index.txt      one line per sample: name, message full name, and the sample
                 whose bytes a C re-encode must reproduce (itself, or the
                 sample it was derived from when unknown fields were added)
  descriptors.txt  every field of every message: the C tables must match it

Samples are filled automatically from the descriptors (every field set,
oneof members one at a time, explicit-presence fields set to zero), plus a
few hand-picked edge cases and unknown-field variants.

  golden.py [DIR]          write the fixtures (default: the checked-in dir)
  golden.py --check [DIR]  regenerate into a temp dir and compare; exit 1 and
                           name the differing files if anything changed
Run with /usr/bin/python3 (Debian's python3-protobuf). Exit 77 when protoc or
python protobuf is missing.
"""
import filecmp
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protos  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(ROOT, "tests", "fixtures", "modal_golden")

try:
    API, TCR, PBT = protos.load()
except protos.Missing as e:
    print("golden.py: skipped:", e, file=sys.stderr)
    sys.exit(77)

from google.protobuf import any_pb2, empty_pb2  # noqa: E402
from google.protobuf.descriptor import FieldDescriptor as FD  # noqa: E402

TYPE_NAMES = {
    FD.TYPE_BOOL: "bool", FD.TYPE_INT32: "int32", FD.TYPE_UINT32: "uint32",
    FD.TYPE_SINT32: "sint32", FD.TYPE_INT64: "int64", FD.TYPE_UINT64: "uint64",
    FD.TYPE_SINT64: "sint64", FD.TYPE_ENUM: "enum", FD.TYPE_FIXED32: "fixed32",
    FD.TYPE_SFIXED32: "sfixed32", FD.TYPE_FIXED64: "fixed64",
    FD.TYPE_SFIXED64: "sfixed64", FD.TYPE_FLOAT: "float",
    FD.TYPE_DOUBLE: "double", FD.TYPE_STRING: "string", FD.TYPE_BYTES: "bytes",
    FD.TYPE_MESSAGE: "message",
}
SIGNED = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32}
SIGNED64 = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64}


def all_message_classes():
    out = [empty_pb2.Empty, any_pb2.Any]
    for mod in (API, TCR, PBT):
        for name in mod.DESCRIPTOR.message_types_by_name:
            out.append(getattr(mod, name))
    return out


def is_map(f):
    return (f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry)


def real_oneof(f):
    o = f.containing_oneof
    if o is None:
        return None
    if len(o.fields) == 1 and o.name == "_" + f.name:
        return None   # synthetic oneof of a proto3 `optional`
    return o


def oneof_index(f):
    o = real_oneof(f)
    if o is None:
        return 0
    reals = [x for x in f.containing_type.oneofs
             if not (len(x.fields) == 1 and x.name == "_" + x.fields[0].name)]
    return reals.index(o) + 1


def describe(cls):
    d = cls.DESCRIPTOR
    lines = []
    for f in sorted(d.fields, key=lambda f: f.number):
        if is_map(f):
            typ = "map"
        elif f.type == FD.TYPE_MESSAGE:
            typ = "msg:" + f.message_type.full_name
        else:
            typ = TYPE_NAMES[f.type]
        if f.label == FD.LABEL_REPEATED:
            label = "repeated"
        elif f.type != FD.TYPE_MESSAGE and f.has_presence:
            label = "optional"
        else:
            label = "singular"
        lines.append("%s %d %s %s %s %d" % (d.full_name, f.number, f.name, typ,
                                           label, oneof_index(f)))
    if not lines:
        lines.append("%s (no fields)" % d.full_name)
    return lines


# ---- canonical dump (must match pb_dump in src/1-base/pb.c) ---------------------

def scalar_text(f, v):
    t = f.type
    if t == FD.TYPE_BOOL:
        return "true" if v else "false"
    if t == FD.TYPE_FLOAT:
        return "f:%08x" % struct.unpack("<I", struct.pack("<f", v))[0]
    if t == FD.TYPE_DOUBLE:
        return "d:%016x" % struct.unpack("<Q", struct.pack("<d", v))[0]
    if t == FD.TYPE_STRING:
        return "x'%s'" % v.encode("utf-8").hex()
    if t == FD.TYPE_BYTES:
        return "x'%s'" % bytes(v).hex()
    return "%d" % v


def dump(msg, depth=0):
    out = []
    ind = "  " * depth
    for f, v in msg.ListFields():
        if is_map(f):
            kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            for k in sorted(v.keys(), key=lambda s: s.encode("utf-8")):
                out.append("%s%s {" % (ind, f.name))
                out.append("%s  key: %s" % (ind, scalar_text(kf, k)))
                out.append("%s  value: %s" % (ind, scalar_text(vf, v[k])))
                out.append("%s}" % ind)
            continue
        vals = list(v) if f.label == FD.LABEL_REPEATED else [v]
        for x in vals:
            if f.type == FD.TYPE_MESSAGE:
                out.append("%s%s {" % (ind, f.name))
                out.extend(dump(x, depth + 1))
                out.append("%s}" % ind)
            else:
                out.append("%s%s: %s" % (ind, f.name, scalar_text(f, x)))
    return out


# ---- automatic samples -----------------------------------------------------

def value_for(f, k):
    """A non-default value for scalar field f; k varies repeated elements."""
    t, n = f.type, f.number + k
    if t == FD.TYPE_BOOL:
        return True
    if t == FD.TYPE_ENUM:
        vals = [v.number for v in f.enum_type.values if v.number != 0]
        return vals[k % len(vals)] if vals else 1
    if t in SIGNED:
        return -(1000 * n + 7)
    if t in SIGNED64:
        return -(1 << 40) - n
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return 3000000000 + n
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return (1 << 63) + n
    if t == FD.TYPE_FLOAT:
        return n + 0.5
    if t == FD.TYPE_DOUBLE:
        return n + 0.25
    if t == FD.TYPE_STRING:
        return "%s-\u00e9%d" % (f.name, n)
    if t == FD.TYPE_BYTES:
        return bytes([0, 255, n % 256, 0x80, k])
    raise ValueError(t)


def fill(msg, depth=0, choose=None):
    """Set every field of msg. choose maps a oneof name to the member to set
    (default: the first member)."""
    choose = choose or {}
    d = msg.DESCRIPTOR
    done_oneofs = set()
    for f in d.fields:
        o = real_oneof(f)
        if o is not None:
            want = choose.get(o.name, o.fields[0].name)
            if f.name != want or o.name in done_oneofs:
                continue
            done_oneofs.add(o.name)
        if is_map(f):
            m = getattr(msg, f.name)
            m["a"] = "1"
            m["k\u00e9"] = ""
            m[""] = "empty key"
        elif f.type == FD.TYPE_MESSAGE:
            if depth >= 2:
                continue
            if f.label == FD.LABEL_REPEATED:
                for _ in range(2):
                    fill(getattr(msg, f.name).add(), depth + 1)
            else:
                sub = getattr(msg, f.name)
                sub.SetInParent()
                fill(sub, depth + 1)
        elif f.label == FD.LABEL_REPEATED:
            getattr(msg, f.name).extend([value_for(f, 0), value_for(f, 1)])
        else:
            setattr(msg, f.name, value_for(f, 0))
    return msg


def zero_value(f):
    return {FD.TYPE_BOOL: False, FD.TYPE_STRING: "", FD.TYPE_BYTES: b"",
            FD.TYPE_FLOAT: 0.0, FD.TYPE_DOUBLE: 0.0}.get(f.type, 0)


def samples_for(cls):
    d = cls.DESCRIPTOR
    base = d.full_name
    out = [(base + ".full", fill(cls()))]
    for o in d.oneofs:
        if len(o.fields) == 1 and o.name == "_" + o.fields[0].name:
            continue
        for member in o.fields[1:]:
            out.append(("%s.%s" % (base, member.name), fill(cls(), choose={o.name: member.name})))
    presence = [f for f in d.fields if f.type != FD.TYPE_MESSAGE
                and f.label != FD.LABEL_REPEATED and f.has_presence]
    if presence:
        m = cls()
        seen = set()
        for f in presence:
            o = real_oneof(f)
            if o is not None:
                if o.name in seen:
                    continue
                seen.add(o.name)
            setattr(m, f.name, zero_value(f))
        out.append((base + ".zeros", m))
    if d.fields and not presence:
        out.append((base + ".empty", cls()))
    return out


# ---- hand-picked samples ---------------------------------------------------

def edge_samples():
    s = []
    a = PBT.AllTypes(i32=-(1 << 31), u32=(1 << 32) - 1, s32=-(1 << 31),
                     i64=-(1 << 63), u64=(1 << 64) - 1, s64=-(1 << 63),
                     color=77, f32=(1 << 32) - 1, sf32=-(1 << 31),
                     f64=(1 << 64) - 1, sf64=-(1 << 63), fl=3.4e38, db=-1e300,
                     str="\U0001f600 \u00e9", by=bytes(range(256)), last=4294967295)
    a.r_i32.extend([0, -1, 1 << 30, -(1 << 31)])
    a.r_s64.extend([0, -1, 1, -(1 << 63), (1 << 63) - 1])
    a.r_f32.extend([0, 1, (1 << 32) - 1])
    a.r_db.extend([0.0, -0.5, 1e-300])
    a.r_b.extend([True, False, True])
    a.r_color.extend([0, 2, 99])
    a.r_str.extend(["", "x", ""])
    a.r_by.extend([b"", b"\x00"])
    a.r_inner.add()                      # an empty element
    a.inner.kids.add().kids.add().a = -1  # nesting
    s.append(("edge.alltypes_extremes", a))
    s.append(("edge.alltypes_oneof_empty_msg", PBT.AllTypes(c_msg=PBT.Inner())))
    s.append(("edge.exit_minus_one", API.GenericResult(status=3, exitcode=-1)))
    s.append(("edge.wait_code_zero", TCR.TaskExecWaitResponse(code=0)))
    s.append(("edge.wait_signal_nine", TCR.TaskExecWaitResponse(signal=9)))
    s.append(("edge.get_task_id_result_only", API.SandboxGetTaskIdResponse(
        task_result=API.GenericResult(status=3, exception="Sandbox was cancelled by user"))))
    st = API.RPCStatus(code=8, message="slow down")
    st.details.add().Pack(API.RPCRetryPolicy(retry_after_secs=0.25), "type.modal.com")
    s.append(("edge.rpcstatus_retry_policy", st))
    # The vectors of modal-wire.md section 2.1 (python protobuf 3.21, upstream proto).
    s.append(("doc.app_get_or_create", API.AppGetOrCreateRequest(app_name="my-app", object_creation_type=1)))
    s.append(("doc.sandbox_wait", API.SandboxWaitRequest(sandbox_id="sb-x", timeout=10)))
    img = API.ImageGetOrCreateRequest(app_id="ap-1", builder_version="2025.06")
    img.image.dockerfile_commands.append("FROM alpine:3.21")
    s.append(("doc.image_get_or_create", img))
    s.append(("doc.image_join_streaming", API.ImageJoinStreamingRequest(image_id="im-1", timeout=55)))
    cr = API.SandboxCreateRequest(app_id="ap-1")
    cr.definition.entrypoint_args.extend(["sleep", "10"])
    cr.definition.image_id = "im-1"
    cr.definition.timeout_secs = 300
    cr.definition.workdir = "/srv"
    cr.tags.add(tag_name="a", tag_value="b")
    s.append(("doc.sandbox_create", cr))
    ex = TCR.TaskExecStartRequest(task_id="ta-1", exec_id="e1", command_args=["echo", "hi"],
                                  stdout_config=1, stderr_config=1, timeout_secs=30, workdir="/")
    ex.env["A"] = "B"
    s.append(("doc.task_exec_start", ex))
    s.append(("doc.stdio_read", TCR.TaskExecStdioReadRequest(task_id="ta-1", exec_id="e1", offset=5, file_descriptor=1)))
    s.append(("doc.tags_set", API.SandboxTagsSetRequest(sandbox_id="sb-x", tags=[API.SandboxTag(tag_name="k", tag_value="v")])))
    return s


DOC_VECTORS = {
    "doc.app_get_or_create": "0a066d792d6170701801",
    "doc.sandbox_wait": "0a0473622d781500002041",
    "doc.image_get_or_create": "1212321046524f4d20616c70696e653a332e3231220461702d314a07323032352e3036",
    "doc.image_join_streaming": "0a04696d2d311500005c42",
    "doc.sandbox_create": "0a0461702d31121a0a05736c6565700a0231301a04696d2d3138ac0242042f73727622060a0161120162",
    "doc.task_exec_start": "0a0474612d31120265311a046563686f1a02686920012801301e3a012f62060a0141120142",
    "doc.stdio_read": "0a0474612d311202653118052001",
    "doc.tags_set": "120473622d781a060a016b120176",
}

# Unknown fields of every wire type (field 8191, which no subset message uses), a
# nested group included, appended to a sample's bytes.
UNKNOWN_TAIL = bytes.fromhex(
    "f8ff03" "2a"          # field 8191 varint 42
    "f9ff03" "0102030405060708"  # field 8191 fixed64
    "fdff03" "01020304"    # field 8191 fixed32
    "faff03" "03" "616263"  # field 8191 length-delimited "abc"
    "fbff03" "f8ff0301" "fcff03"  # field 8191 group holding a varint
)


def build():
    files = {}
    index = []
    desc = []
    for cls in all_message_classes():
        desc.extend(describe(cls))
    samples = []
    for cls in all_message_classes():
        samples.extend(samples_for(cls))
    samples.extend(edge_samples())
    for name, msg in samples:
        data = msg.SerializeToString(deterministic=True)
        if name in DOC_VECTORS and data.hex() != DOC_VECTORS[name]:
            raise SystemExit("golden.py: %s serializes to %s, the reference says %s"
                             % (name, data.hex(), DOC_VECTORS[name]))
        files[name + ".bin"] = data
        files[name + ".txt"] = ("\n".join(dump(msg)) + "\n").encode() if msg.ListFields() else b""
        index.append("%s %s %s" % (name, msg.DESCRIPTOR.full_name, name))
    # unknown-field variants: python must parse them back to the same message
    for name, msg in samples:
        if not name.endswith(".full"):
            continue
        uname = name[:-len(".full")] + ".unknown"
        data = msg.SerializeToString(deterministic=True) + UNKNOWN_TAIL
        back = type(msg)()
        back.ParseFromString(data)
        back.DiscardUnknownFields()
        assert back == msg, uname
        files[uname + ".bin"] = data
        files[uname + ".txt"] = files[name + ".txt"]
        index.append("%s %s %s" % (uname, msg.DESCRIPTOR.full_name, name))
    files["index.txt"] = ("\n".join(index) + "\n").encode()
    files["descriptors.txt"] = ("\n".join(sorted(desc)) + "\n").encode()
    return files


def write(files, d):
    os.makedirs(d, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    d = args[0] if args else DEFAULT_DIR
    files = build()
    if not check:
        write(files, d)
        print("golden.py: wrote %d files to %s" % (len(files), d))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        write(files, tmp)
        have = set(os.listdir(d)) if os.path.isdir(d) else set()
        want = set(files)
        bad = sorted(want - have) + sorted(
            n for n in want & have if not filecmp.cmp(os.path.join(tmp, n), os.path.join(d, n), shallow=False))
        extra = sorted(have - want)
        if bad or extra:
            for n in bad:
                print("golden.py: differs or missing: %s" % n)
            for n in extra:
                print("golden.py: stale file: %s" % n)
            print("golden.py: regenerate with /usr/bin/python3 tests/modal_fake/golden.py")
            return 1
    print("golden.py: %d files match" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
