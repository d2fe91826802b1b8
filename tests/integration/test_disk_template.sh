#!/usr/bin/env bash
# test: alone (machine-wide cgroups, mounts or loop devices; see tests/run.sh)
# tests/integration/test_disk_template.sh: the disk quota's images come
# from a template, made by mkfs.ext4 once per state root and size: a second
# sandbox's disk is made without mkfs (seen with strace), has the quota's
# size and none of a sibling's files; a damaged or cut-short template is
# made again; explicit sizes get templates of their own, at most four
# kept; two processes making the first image of a size run mkfs once; gc
# removes unused templates and leftovers; a copy that runs out of space
# fails at create naming why and leaves nothing behind. TAP; skips where
# lash cannot make a disk quota (not root, no loop devices, no jail).
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
[ "$(id -u)" = 0 ] || skip_all "a disk quota needs root"
command -v strace >/dev/null || skip_all "no strace to see which programs run"
probe=$(jail_probe)
[ "$probe" = yes ] || skip_all "no bubblewrap jail here"
work=$(mktemp -d /tmp/lash-disktpl.XXXXXX); chmod 711 "$work"
small=""
cleanup() {
  local m
  # whatever a failed case left mounted under work, innermost first
  for m in $(grep -o " $work/[^ ]*" /proc/self/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
  rm -rf "$work"
}
at_exit cleanup
export LASH_SANDBOX_ROOT=$work/state
T=$LASH_SANDBOX_ROOT/.disk-templates
sb() { timeout 120 "$LASH" sandbox "$@"; }   # the timeout is a hang guard only
# mkfs_runs LOG: how many times mkfs.ext4 was executed in an strace log
mkfs_runs() { grep -c 'execve("[^"]*mkfs.ext4"' "$1"; }
# traced OUT LOG CMD...: run a lash command under strace, its stdout in OUT
# (a sanitized build's leak check cannot run under ptrace: off there)
notrace_leaks=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
traced() { local o=$1 l=$2; shift 2; ASAN_OPTIONS=$notrace_leaks strace -f -qq -e trace=execve -o "$l" "$@" >"$o" 2>"$work/err"; }
loops() { losetup -a 2>/dev/null | grep -c "${1:-$work}" ; }
mounts() { grep -c " ${1:-$work}" /proc/self/mounts; }

probe_id=$(sb create --timeout 60 --limit disk=$((16 * 1024 * 1024)) 2>"$work/perr") ||
  skip_all "lash cannot make a disk quota here: $(head -c 200 "$work/perr")"
sb destroy "$probe_id"
rm -rf "$T"

# --- the first sandbox makes the template, the second copies it ------------
A=$(sb create --timeout 600)
gq=$(grep -o '"disk": *[0-9]*' "$LASH_SANDBOX_ROOT/$A/meta.json" | grep -o '[0-9]*$')
check "the default quota is a power of two ($gq), so sandboxes share a template" \
  test -n "$gq" -a $(( ${gq:-3} & (${gq:-3} - 1) )) = 0
traced "$work/a.out" "$work/a.log" "$LASH" sandbox exec "$A" -- sh -c \
  'echo secret > /workspace/from-a; echo secret > /tmp/from-a; df -B1 --output=size /workspace | tail -1'
asize=$(cat "$work/a.out")
check "the first sandbox's disk is made by mkfs.ext4, once ($(mkfs_runs "$work/a.log") runs)" \
  test "$(mkfs_runs "$work/a.log")" = 1
tpl=$T/ext4-v1-$gq.img
check "  into a template in the state root ($(ls -A "$T" 2>/dev/null | tr '\n' ' '))" \
  sh -c "test -f '$tpl' -a \"\$(stat -c %a '$T') \$(stat -c %a '$tpl')\" = '700 600' && ! ls '$T' | grep -q '[.]new\$'"
B=$(sb create --timeout 600)
traced "$work/b.out" "$work/b.log" "$LASH" sandbox exec "$B" -- sh -c \
  'ls -A /workspace /tmp | grep -v ":\$" | grep . ; df -B1 --output=size /workspace /tmp | tail -2 | tr "\n" " "'
check "the second sandbox's disk is made without mkfs.ext4 ($(mkfs_runs "$work/b.log") runs)" \
  test "$(mkfs_runs "$work/b.log")" = 0 -a -f "$LASH_SANDBOX_ROOT/$B/disk.img"
set -- $(cat "$work/b.out")
check "  its /workspace and /tmp are one filesystem of the quota's size ($1 $2, the first's $asize)" \
  test "$#" = 2 -a "${1:-x}" = "$asize" -a "${2:-y}" = "$asize"
check "  holding none of the first sandbox's files ($(head -c 100 "$work/b.out"))" \
  sh -c "! grep -q from-a '$work/b.out'"
check "  in an image of its own, sparse (its data $(du -k "$LASH_SANDBOX_ROOT/$B/disk.img" | cut -f1) KiB)" \
  test "$(stat -c %i "$LASH_SANDBOX_ROOT/$B/disk.img")" != "$(stat -c %i "$tpl")" -a \
       "$(du -k "$LASH_SANDBOX_ROOT/$B/disk.img" | cut -f1)" -lt 8192
bdisk=$LASH_SANDBOX_ROOT/$B/disk
check "  its workspace/ and tmp/ are its own, laid out in the template ($(ls -A "$bdisk" | tr '\n' ' '); $(stat -c '%a %u' "$bdisk/workspace" "$bdisk/tmp" | tr '\n' ' '))" \
  test "$(ls -A "$bdisk" | sort | tr '\n' ' ')" = "tmp workspace " -a \
       "$(stat -c '%a %u' "$bdisk/workspace" "$bdisk/tmp" | sort -u)" = "700 $(grep -o '"uid": *[0-9]*' "$LASH_SANDBOX_ROOT/$B/meta.json" | grep -o '[0-9]*$')"
out=$(sb exec "$A" -- cat /workspace/from-a 2>&1)
check "  the first sandbox keeps its files ($out)" test "$out" = secret
# a host process inside B's filesystem at its destroy: the filesystem is
# shut down, not flushed (it goes with the box), so it can write no more
( cd "$LASH_SANDBOX_ROOT/$B/workspace" && exec sh -c 'while [ ! -e go ] && [ ! -e "$0" ]; do sleep 0.05; done
  { echo x > after; } 2>/dev/null && echo wrote || echo refused' "$work/go" ) >"$work/held" 2>&1 &
held=$!
sb destroy "$A"; sb destroy "$B"
touch "$work/go"; wait "$held"
check "destroy shuts the filesystem down: a process still in it can write no more ($(cat "$work/held"))" \
  test "$(cat "$work/held")" = refused
for _ in $(seq 50); do [ "$(loops "$LASH_SANDBOX_ROOT/lb-")" = 0 ] && break; sleep 0.1; done
check "destroy takes the images, loop devices and mounts, not the template" \
  test -f "$tpl" -a "$(loops "$LASH_SANDBOX_ROOT/lb-")" = 0 -a "$(mounts "$LASH_SANDBOX_ROOT/lb-")" = 0

# --- a damaged or cut-short template is made again -------------------------
printf '\0\0' | dd of="$tpl" bs=1 seek=1080 conv=notrunc 2>/dev/null   # the ext4 magic
C=$(sb create --timeout 600)
traced "$work/c.out" "$work/c.log" "$LASH" sandbox exec "$C" -- sh -c 'df -B1 --output=size /workspace | tail -1'
magic=$(od -An -tx1 -j1080 -N2 "$tpl" | tr -d ' ')
check "a template without its superblock is made again ($(mkfs_runs "$work/c.log") mkfs, magic $magic)" \
  test "$(mkfs_runs "$work/c.log")" = 1 -a "$magic" = 53ef -a "$(cat "$work/c.out")" = "$asize"
truncate -s 1M "$tpl"
D=$(sb create --timeout 600)
traced "$work/d.out" "$work/d.log" "$LASH" sandbox exec "$D" -- sh -c 'df -B1 --output=size /workspace | tail -1'
check "a template cut short is made again ($(mkfs_runs "$work/d.log") mkfs, $(stat -c %s "$tpl") bytes)" \
  test "$(mkfs_runs "$work/d.log")" = 1 -a "$(stat -c %s "$tpl")" = "$gq" -a "$(cat "$work/d.out")" = "$asize"
printf 'x' | dd of="$tpl" bs=1 seek=1200 conv=notrunc 2>/dev/null    # in the superblock: its checksum fails
E=$(sb create --timeout 600)
traced "$work/e.out" "$work/e.log" "$LASH" sandbox exec "$E" -- true
check "a template whose superblock checksum fails is made again ($(mkfs_runs "$work/e.log") mkfs)" \
  test "$(mkfs_runs "$work/e.log")" = 1
sb destroy "$C"; sb destroy "$D"; sb destroy "$E"

# --- without debugfs the template is plain mkfs; sandboxes make their dirs --
if command -v unshare >/dev/null && [ -x /usr/sbin/debugfs ]; then
  nd=$work/nodebugfs; mkdir -p -m 711 "$nd"
  id=$(LASH_SANDBOX_ROOT=$nd sb create --timeout 600)
  out=$(LASH_SANDBOX_ROOT=$nd unshare -m sh -c 'mount --bind /dev/null /usr/sbin/debugfs && "$@"' _ "$LASH" sandbox exec "$id" -- sh -c 'test -w /workspace -a -w /tmp && echo ok' 2>&1)
  # (its mounts went with that mount namespace: this use mounts it here)
  LASH_SANDBOX_ROOT=$nd sb exec "$id" -- true
  check "debugfs failing: the template is made by mkfs alone and the sandbox works ($out; $(ls -A "$nd/$id/disk" | tr '\n' ' '))" \
    sh -c "test '$out' = ok && test \"\$(ls -A '$nd/$id/disk' | sort | tr '\n' ' ')\" = 'tmp workspace ' && debugfs -R ls '$nd/.disk-templates/ext4-v1-$gq.img' 2>/dev/null | grep -q lost+found"
  LASH_SANDBOX_ROOT=$nd sb destroy "$id"
fi

# --- explicit sizes: templates of their own, at most four kept ------------
mib=$((1024 * 1024))
touch -d '-1 hour' "$tpl"                  # the default's, used least recently
for s in 16 17 18 19 20; do
  id=$(sb create --timeout 600 --limit disk=$((s * mib)))
  out=$(sb exec "$id" -- sh -c 'df -k --output=size /workspace | tail -1' 2>&1)
  sizes="${sizes:-}$s:${out// /} "
  sb destroy "$id"
  touch -d "-$((30 - s)) minutes" "$T/ext4-v1-$((s * mib)).img" 2>/dev/null   # the order of their use
done
kept=$(ls "$T" | grep -c '^ext4-v1-.*[.]img$')
check "explicit sizes get their own templates, at most four kept, the least recently used go ($kept; $sizes)" \
  test "$kept" = 4 -a ! -e "$tpl" -a ! -e "$T/ext4-v1-$((16 * mib)).img" -a -e "$T/ext4-v1-$((20 * mib)).img"
check "  each filesystem about its size (df KiB: $sizes)" \
  sh -c "for p in $sizes; do s=\${p%%:*}; k=\${p#*:}; [ \"\$k\" -gt \$((s * 850)) ] && [ \"\$k\" -le \$((s * 1024)) ] || exit 1; done"

# --- two processes making the first image of a size: one mkfs --------------
s2=$((24 * mib))
ASAN_OPTIONS=$notrace_leaks strace -f -qq -e trace=execve -o "$work/two.log" sh -c \
  "'$LASH' sandbox create --timeout 600 --limit disk=$s2 >'$work/two.1' 2>&1 & '$LASH' sandbox create --timeout 600 --limit disk=$s2 >'$work/two.2' 2>&1 & wait"
i1=$(cat "$work/two.1"); i2=$(cat "$work/two.2")
check "two processes making sandboxes of a new size at once: both made, mkfs ran once ($(mkfs_runs "$work/two.log"))" \
  test -f "$LASH_SANDBOX_ROOT/$i1/disk.img" -a -f "$LASH_SANDBOX_ROOT/$i2/disk.img" -a "$(mkfs_runs "$work/two.log")" = 1
sb destroy "$i1"; sb destroy "$i2"

# --- first uses of one sandbox at once: each waits for the one making it ---
# (the image is in place a moment before its directories are: a use then
# must not try to bind them)
bad=0
for _ in 1 2 3; do
  id=$(sb create --timeout 600)
  for i in 1 2 3 4 5 6; do sb exec "$id" -- sh -c 'test -w /workspace -a -w /tmp && echo ok' >"$work/r.$i" 2>&1 & done
  wait
  for i in 1 2 3 4 5 6; do [ "$(cat "$work/r.$i")" = ok ] || { bad=$((bad + 1)); last=$(head -c 200 "$work/r.$i"); }; done
  sb destroy "$id"
done
check "six first uses of a sandbox at once, three times: every one runs in its quota ($bad failed${last:+: $last})" test "$bad" = 0

# --- gc: unused templates and leftovers go ---------------------------------
: >"$T/ext4-v1-$((99 * mib)).img.new"
touch -d '-2 days' "$T/ext4-v1-$((20 * mib)).img"
sb gc >/dev/null 2>&1
check "gc removes a template unused for two days and a half-made one, keeps the rest ($(ls "$T" | tr '\n' ' '))" \
  test ! -e "$T/ext4-v1-$((20 * mib)).img" -a ! -e "$T/ext4-v1-$((99 * mib)).img.new" -a -e "$T/ext4-v1-$s2.img"

# --- no space for the copy: create fails naming why, nothing left ----------
small=$work/small
mkdir -p "$small" && mount -t tmpfs -o size=24m,mode=711 lash-disktpl "$small"
F=$(LASH_SANDBOX_ROOT=$small sb create --timeout 600 --limit disk=$((16 * mib)) 2>"$work/ferr")
check "a state root on tmpfs: the template is made there" test -n "$F" -a -f "$small/.disk-templates/ext4-v1-$((16 * mib)).img"
LASH_SANDBOX_ROOT=$small sb destroy "$F"
H=$(LASH_SANDBOX_ROOT=$small sb create --timeout 600 2>/dev/null)   # a default quota, made at its first use
dd if=/dev/zero of="$small/fill" bs=64k 2>/dev/null
out=$(LASH_SANDBOX_ROOT=$small sb exec "$H" -- sh -c 'echo ran' 2>"$work/herr")
check "no space for a default quota's copy at the first use: the command runs without one ($out)" test "$out" = ran
check "  with a warning naming why ($(head -c 200 "$work/herr"))" grep -q 'cannot copy the disk template.*No space left' "$work/herr"
check "  and nothing left of it: no image, loop device or mount; marked ($(ls "$small/$H" | tr '\n' ' '))" \
  test ! -e "$small/$H/disk.img" -a ! -e "$small/$H/disk.img.new" -a -e "$small/$H/disk.off" -a "$(loops "$small/")" = 0 -a "$(mounts "$small/")" = 0
LASH_SANDBOX_ROOT=$small sb destroy "$H"
before=$(ls -A "$small" | tr '\n' ' ')
G=$(LASH_SANDBOX_ROOT=$small sb create --timeout 600 --limit disk=$((16 * mib)) 2>"$work/gerr"); rc=$?
check "no space left for the copy: create fails naming why (exit $rc: $(head -c 240 "$work/gerr"))" \
  sh -c "test $rc != 0 -a -z '$G' && grep -q 'cannot copy the disk template' '$work/gerr' && grep -q 'No space left' '$work/gerr'"
check "  leaving no sandbox, image, loop device or mount ($(ls -A "$small" | tr '\n' ' '))" \
  test "$(ls -A "$small" | tr '\n' ' ')" = "$before" -a "$(loops "$small/")" = 0 -a "$(mounts "$small/")" = 0
umount "$small"
done_testing
