#!/usr/bin/env bash
# tests/integration/test_sandbox_cp.sh: files in and out of a local
# sandbox (`lash sandbox cp`, sb:upload / sb:download): a directory tree
# with binary files, an executable, a symlink, odd names and an empty
# directory goes in and comes back byte for byte; single files both ways,
# into existing directories; bad arguments and missing paths are clear
# errors; and a hostile tar stream (a symlink then a file through it,
# '..' and absolute names, a device, a setuid bit) writes nothing outside
# the destination. TAP; skips where there is no jail.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
[ "$(jail_probe)" = yes ] || skip_all "no bubblewrap jail here"
work=$(mktemp -d /tmp/lash-cp.XXXXXX); chmod 711 "$work"
export LASH_SANDBOX_ROOT=$work/state
at_exit "[ -n \"\${id:-}\" ] && '$LASH' sandbox destroy \"\$id\" >/dev/null 2>&1; rm -rf '$work'"

src=$work/src
mkdir -p "$src/sub/deeper" "$src/empty" "$src/spaced name"
head -c 3000000 /dev/urandom > "$src/sub/blob.bin"
printf '#!/bin/sh\necho run\n' > "$src/run.sh"; chmod 755 "$src/run.sh"
printf 'crlf\r\nline\r\n' > "$src/spaced name/é ü.txt"
: > "$src/sub/deeper/empty-file"
echo long > "$src/sub/deeper/$(printf 'L%.0s' $(seq 150)).txt"   # a GNU long name in the stream
ln -s ../run.sh "$src/sub/link"

id=$("$LASH" sandbox create --timeout 300)
check "a sandbox to copy into" test -n "$id"
out=$("$LASH" sandbox cp "$src" "$id:in" 2>&1)
contains "a directory goes in" "$out" "copied a directory"
ls_in=$("$LASH" sandbox exec "$id" -- sh -c 'cd in && find . -printf "%y %m %s %p %l\n" | sort')
ls_src=$(cd "$src" && find . -printf "%y %m %s %p %l\n" | sort)
same "inside, the same names, kinds, modes, sizes and link targets" "$(grep -v '^d' <<<"$ls_in")" "$(grep -v '^d' <<<"$ls_src")"
out=$("$LASH" sandbox cp "$id:in" "$work/back" 2>&1)
contains "and comes back out, counted" "$out" "copied 5 files, 4 directories, 1 link"
check "byte for byte" diff -r --no-dereference "$src" "$work/back"
same "with its modes" "$(stat -c %a "$work/back/run.sh")" 755
same "and its symlink, as a symlink" "$(readlink "$work/back/sub/link")" "../run.sh"

mkdir "$work/files"
out=$("$LASH" sandbox cp "$src/sub/blob.bin" "$id:in/sub" 2>&1)
contains "a file into an existing directory keeps its name" "$out" "in/sub/blob.bin"
out=$("$LASH" sandbox cp "$id:in/sub/blob.bin" "$work/files" 2>&1)
check "a file out into a host directory" cmp "$src/sub/blob.bin" "$work/files/blob.bin"
lacks "no temporary file left behind" "$(ls "$work/files")" "lash-part"
"$LASH" sandbox cp "$src/run.sh" "$id:new/dir/r.sh" >/dev/null 2>&1
same "a file to a new path makes its parents" "$("$LASH" sandbox exec "$id" -- cat new/dir/r.sh)" "$(cat "$src/run.sh")"

out=$("$LASH" sandbox cp a b 2>&1); rc=$?
same "two host paths: a usage error" "$rc" 2
contains "saying which side must be the sandbox's" "$out" "exactly one of SRC and DST is ID:PATH"
out=$("$LASH" sandbox cp "$id:missing" "$work/x" 2>&1); rc=$?
same "a missing sandbox path fails" "$rc" 1
contains "naming it" "$out" "'missing': No such file or directory"
lacks "and leaves nothing on the host" "$(ls "$work")" "x"
out=$("$LASH" sandbox cp "$work/nothing-here" "$id:x" 2>&1); rc=$?
same "a missing host path fails" "$rc" 1
contains "naming it" "$out" "nothing-here: no such file or directory"

# a hostile archive, fed to the extractor the download uses
python3 - "$work/evil.tar" <<'PY'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
def add(name, data=b"x", **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items(): setattr(ti, k, v)
    if ti.type == tarfile.REGTYPE:
        ti.size = len(data); t.addfile(ti, io.BytesIO(data))
    else:
        t.addfile(ti)
add("esc", type=tarfile.SYMTYPE, linkname=sys.argv[1] + ".outside")
add("esc/pwned", b"pwned")
add("../up.txt", b"up")
add("sub/../../up2.txt", b"up")
add("/abs.txt", b"abs")
add("null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
add("suid", b"#!/bin/sh\n", mode=0o4755)
add("d" * 90 + "/" + "e" * 90 + "/long.txt", b"long")
t.close()
PY
mkdir "$work/evil.tar.outside"
res=$("$LASH" eval "local x = lash.core.files.untar('$work/ev') local f = io.open('$work/evil.tar', 'rb')
  while true do local c = f:read(1000) if not c then break end x:write(c) end
  local s = x:finish() return s.files .. ' ' .. s.skipped .. ' ' .. s.links" 2>&1)
same "the hostile archive: its plain files land, the rest is skipped" "$res" "4 4 0"
same "nothing written through the planted symlink" "$(ls -A "$work/evil.tar.outside")" ""
check "nothing above the destination" test ! -e "$work/up.txt" -a ! -e "$work/up2.txt"
check "an absolute name lands inside" test -f "$work/ev/abs.txt"
check "no device node" test ! -e "$work/ev/null"
same "no setuid bit" "$(stat -c %a "$work/ev/suid")" 755
check "a 190-byte name (pax) is read" test -f "$work/ev/$(printf 'd%.0s' $(seq 90))/$(printf 'e%.0s' $(seq 90))/long.txt"
res=$("$LASH" eval "local x = lash.core.files.untar('$work/ev2') x:write(('\1'):rep(512)) return 'no error'" 2>&1)
contains "a stream that is not tar is refused" "$res" "not a tar stream"
res=$("$LASH" eval "local x = lash.core.files.untar('$work/ev3') local f = io.open('$work/evil.tar', 'rb')
  x:write(f:read(700)) return x:finish()" 2>&1)
contains "a cut stream is refused" "$res" "ended in the middle of a member"
done_testing
