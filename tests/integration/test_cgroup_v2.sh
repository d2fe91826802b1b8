#!/usr/bin/env bash
# test: alone (machine-wide cgroups, mounts or loop devices; see tests/run.sh)
# tests/integration/test_cgroup_v2.sh: the local sandbox's cgroup v2 path on
# a real kernel that has it. Many hosts (this project's CI machine among
# them) are cgroup v1 only, so the test boots Debian's own kernel under
# qemu with KVM, its root the host's own / shared read-only over virtio-9p
# (tmpfs where lash writes), mounts a unified cgroup2 hierarchy with the
# pids and memory controllers, and runs inside it the cgroup cases of
# test_containment.sh (LASH_CONTAINMENT_ONLY=cgroup, v2 required) and the
# cases only v2 has: nesting in a delegated subtree, a cgroup namespace
# whose root holds processes, LASH_CGROUP_ROOT, the sweep of orphans; and
# test_host_paths.sh, whose snapshots are taken frozen with cgroup.freeze.
# Prints TAP (the VM's results, numbered here) and the time the VM took.
# Uses KVM where it can run the kernel, else qemu's emulation (TCG). Skips
# cleanly where qemu, busybox-static or a kernel with 9p modules is missing.
#
# Inside the VM the same script runs as pid 1 (after the initramfs's
# switch_root) with the argument --in-vm.
set -u
cd "$(dirname "$0")/../.."
repo=$(pwd)
BUILD=${LASH_BUILD:-build}
LASH=${LASH_BIN:-$BUILD/bin/lash}
# what the VM prints for the host: one marker per line, serial noise aside
MARK='lash-vm| '

# ---- inside the VM ----------------------------------------------------------
if [ "${1:-}" = --in-vm ]; then
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export HOME=/tmp/home LANG=C.UTF-8
  grep -q lash.x /proc/cmdline && export LASH_VM_X=1
  say() { printf '%s%s\n' "$MARK" "$*"; }
  halt() { sync; echo o >/proc/sysrq-trigger; sleep 10; exit 1; }
  # the root is the host's, read-only: lash's own state goes on tmpfs
  mountpoint -q /sys || mount -t sysfs sysfs /sys
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs tmpfs /run
  mount -t tmpfs tmpfs /var/lib
  mkdir -p /dev/pts /dev/shm "$HOME"
  mount -t devpts devpts /dev/pts
  mount -t tmpfs tmpfs /dev/shm
  ip link set lo up 2>/dev/null
  # unified only: no v1 hierarchy exists, so lash has nothing to fall back to
  mount -t cgroup2 cgroup2 /sys/fs/cgroup || { say "Bail out! cannot mount cgroup2"; halt; }
  say "# kernel $(uname -r), cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
  echo "+pids +memory" >/sys/fs/cgroup/cgroup.subtree_control
  # lash.parts= on the kernel's command line (LASH_VM_PARTS): only some
  parts=$(sed -n 's/.*lash\.parts=\([a-z0-9,]*\).*/\1/p' /proc/cmdline)
  # (each part's output through a file: a process a part left behind would
  # hold a pipe open, and is listed below instead)
  case ,${parts:-containment,v2,hostpaths}, in *,containment,*)
    LASH_CONTAINMENT_ONLY=cgroup LASH_CONTAINMENT_CGROUP=2 LASH_BUILD="$BUILD" LASH_BIN="$LASH" \
      bash tests/integration/test_containment.sh >/tmp/containment.out 2>&1
    sed "s/^/$MARK/" /tmp/containment.out ;;
  esac
  # the snapshot race of test_host_paths.sh, frozen with cgroup.freeze
  case ,${parts:-containment,v2,hostpaths}, in *,hostpaths,*)
    LASH_HOSTPATHS_NESTED=1 LASH_HOSTPATHS_CGROUP=2 LASH_BUILD="$BUILD" LASH_BIN="$LASH" \
      bash tests/integration/test_host_paths.sh >/tmp/hostpaths.out 2>&1
    sed "s/^/$MARK/" /tmp/hostpaths.out ;;
  esac
  case ,${parts:-containment,v2,hostpaths}, in *,v2,*)
    LASH_BUILD="$BUILD" LASH_BIN="$LASH" bash ${LASH_VM_X:+-x} "$0" --v2-cases >/tmp/v2.out 2>&1
    sed "s/^/$MARK/" /tmp/v2.out ;;
  esac
  # nothing the tests started may outlive them (kernel threads, this shell
  # and the subshell that looks, with its ps and awk, aside)
  left=$(me=$BASHPID; ps -eo pid,ppid,user,args --no-headers |
         awk -v me="$me" '$4 !~ /^\[/ && $2 != 2 && $1 != 1 && $1 != me && $2 != me')
  if [ -z "$left" ]; then say "ok 1 - nothing the tests started is left running"
  else say "not ok 1 - nothing the tests started is left running"; echo "$left" | sed "s/^/$MARK#   left: /"; fi
  say "done"
  halt
fi

# ---- the cases only cgroup v2 has (run in the VM) ---------------------------
if [ "${1:-}" = --v2-cases ]; then
  n=0; failed=0
  ok()   { n=$((n+1)); echo "ok $n - $1"; }
  nok()  { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
  check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d" "failed: $*"; fi; }
  CG=/sys/fs/cgroup
  work=$(mktemp -d /tmp/lash-v2.XXXXXX)
  chmod 711 "$work"    # the jails' uids reach the state root through it
  export LASH_SANDBOX_ROOT=$work/state
  sb() { "$LASH" sandbox "$@"; }
  cgdir() { sed -n 2p "$LASH_SANDBOX_ROOT/$1/cgroup" 2>/dev/null; }
  # in GROUP CMD...: run a command with this shell's child moved into GROUP
  in_group() { local g=$1; shift; ( echo "$BASHPID" >"$g/cgroup.procs" && exec "$@" ); }
  # has_procs GROUP: processes in it (cgroup files have no size: read them)
  has_procs() { [ -n "$(cat "$1/cgroup.procs" 2>/dev/null)" ]; }
  # until GROUP has processes, bounded (an emulated CPU starts jails slowly)
  await_procs() { local _; for _ in $(seq 600); do has_procs "$1" && return 0; sleep 0.1; done; return 1; }

  # --- lash in a delegated subtree, in a leaf that holds processes ---------
  # (systemd --user: lash runs in app.slice/run-N.scope; the scope holds
  # processes, so no group of its may have children with controllers)
  mkdir -p $CG/deleg/app.slice/run-1.scope
  echo "+pids +memory" >$CG/deleg/cgroup.subtree_control
  echo "+pids +memory" >$CG/deleg/app.slice/cgroup.subtree_control
  # a process of the scope's own, as a shell or a terminal would be
  ( echo "$BASHPID" >$CG/deleg/app.slice/run-1.scope/cgroup.procs && exec sleep 600 ) & holder=$!
  S=$(in_group $CG/deleg/app.slice/run-1.scope "$LASH" sandbox create --limit pids=33 2>"$work/err")
  d=$(cgdir "$S")
  check "lash in a delegated scope puts a sandbox beside its own group, not in it ($d)" \
    test "${d%/*}" = $CG/deleg/app.slice/lash -a -d "$d"
  check "  with its pids.max ($(cat "$d/pids.max" 2>/dev/null))" test "$(cat "$d/pids.max" 2>/dev/null)" = 33
  # the default memory.max: half the RAM (under 8 GiB), in whole pages
  half=$(awk '/^MemTotal:/ { printf "%d", $2 * 1024 / 2 / 4096 }' /proc/meminfo)
  check "  and the default memory.max, half the RAM ($(cat "$d/memory.max" 2>/dev/null))" \
    test "$(cat "$d/memory.max" 2>/dev/null)" = $((half * 4096))
  ( in_group $CG/deleg/app.slice/run-1.scope "$LASH" sandbox exec "$S" --timeout 60 -- sleep 57.25 >/dev/null 2>&1 & )
  await_procs "$d"
  check "  and its commands run in that group ($(wc -l <"$d/cgroup.procs") processes)" has_procs "$d"
  [ -n "$S" ] && sb destroy "$S"
  check "  destroy leaves no group" test -n "$d" -a ! -e "$d"
  kill "$holder"; wait "$holder" 2>/dev/null

  # --- the same as an unprivileged user, as systemd --user delegates -------
  # (the user owns user@U.service: the directory and its cgroup.procs,
  # cgroup.subtree_control and cgroup.threads; below it, what it made)
  U=61500; ud=$CG/udeleg/user@$U.service
  mkdir -p $ud/app.slice/run-2.scope
  echo "+pids +memory" >$CG/udeleg/cgroup.subtree_control
  echo "+pids +memory" >$ud/cgroup.subtree_control
  chown $U:$U $ud $ud/cgroup.procs $ud/cgroup.subtree_control $ud/cgroup.threads
  chown -R $U:$U $ud/app.slice
  mkdir -p "$work/u" "$work/uhome" && chown $U:$U "$work/u" "$work/uhome"
  as_user() { in_group $ud/app.slice/run-2.scope setpriv --reuid $U --regid $U --clear-groups \
      env -i PATH="$PATH" HOME="$work/uhome" LASH_SANDBOX_ROOT="$work/u" "$LASH" sandbox "$@"; }
  S=$(as_user create --limit pids=40 --limit memory=$((80 * 1024 * 1024)) 2>"$work/err")
  d=$(sed -n 2p "$work/u/$S/cgroup" 2>/dev/null)
  check "as uid $U in a delegated scope, a sandbox gets a group beside it ($d$(head -c 300 "$work/err"))" \
    test -n "$S" -a "${d%/*}" = $ud/app.slice/lash -a -d "$d"
  check "  with pids.max $(cat "$d/pids.max" 2>/dev/null) and memory.max $(cat "$d/memory.max" 2>/dev/null)" \
    test "$(cat "$d/pids.max" 2>/dev/null)" = 40 -a "$(cat "$d/memory.max" 2>/dev/null)" = $((80 * 1024 * 1024))
  ( as_user exec "$S" --timeout 60 -- sleep 56.75 >/dev/null 2>&1 & )
  await_procs "$d"
  check "  its commands run in it ($(wc -l <"$d/cgroup.procs" 2>/dev/null) processes)" has_procs "$d"
  out=$(as_user exec "$S" -- sh -c 'dd if=/dev/zero bs=120M count=1 iflag=fullblock 2>/dev/null | wc -c; echo "exit $?"' 2>&1)
  check "  a 120 MiB buffer in it is OOM-killed by its memory.max ($(echo $out); oom kills $(awk '$1 == "oom_kill" { print $2 }' "$d/memory.events"))" \
    test "$(awk '$1 == "oom_kill" { print $2 }' "$d/memory.events" 2>/dev/null)" -ge 1
  [ -n "$S" ] && as_user destroy "$S"
  check "  destroy removes it, and what ran in it" test -n "$d" -a ! -e "$d" -a -z "$(pgrep -f '^sleep 56[.]75$')"

  # --- a container: lash's cgroup namespace root holds processes -------------
  # No group lash may write has room for a leaf: it must say so, not fail
  # obscurely or fall back silently.
  mkdir -p $CG/ct
  err=$(in_group $CG/ct unshare -Cm sh -c "umount $CG && mount -t cgroup2 cgroup2 $CG || exit 1
    sleep 60 & \"$LASH\" sandbox create --limit memory=67108864 2>&1 >/dev/null; kill \$!")
  check "in a cgroup namespace whose root holds processes, --limit memory is refused naming why" \
    sh -c 'echo "$1" | grep -q "limits.memory needs a cgroup" && echo "$1" | grep -q "no internal processes"' _ "$err"
  echo "# $err"
  check "  and nothing was made in it" test -z "$(find $CG/ct -mindepth 1 -type d)"

  # --- LASH_CGROUP_ROOT: a group given to lash ------------------------------
  mkdir -p $CG/given
  S=$(LASH_CGROUP_ROOT=$CG/given sb create --limit memory=$((96 * 1024 * 1024)))
  d=$(cgdir "$S")
  check "LASH_CGROUP_ROOT puts the group there ($d)" test "${d%/*}" = $CG/given -a -d "$d"
  check "  with memory.max ($(cat "$d/memory.max" 2>/dev/null)) and memory.swap.max $(cat "$d/memory.swap.max" 2>/dev/null)" \
    test "$(cat "$d/memory.max" 2>/dev/null)" = $((96 * 1024 * 1024)) -a "$(cat "$d/memory.swap.max" 2>/dev/null)" = 0
  [ -n "$S" ] && sb destroy "$S"
  check "  destroy leaves no group" test -n "$d" -a ! -e "$d"
  mkdir $CG/busy
  ( echo "$BASHPID" >$CG/busy/cgroup.procs && exec sleep 600 ) & holder=$!
  await_procs $CG/busy
  err=$(LASH_CGROUP_ROOT=$CG/busy sb create --limit pids=10 2>&1 >/dev/null)
  check "LASH_CGROUP_ROOT that holds processes is refused naming why" \
    sh -c 'echo "$1" | grep -q "LASH_CGROUP_ROOT" && echo "$1" | grep -q "holds processes"' _ "$err"
  echo "# $err"
  kill "$holder"; wait "$holder" 2>/dev/null

  # --- a sandbox whose state vanished: its group is swept -------------------
  S=$(sb create); d=$(cgdir "$S")
  ( sb exec "$S" --timeout 60 -- sleep 58.25 >/dev/null 2>&1 & )
  await_procs "$d"
  # the exec still running writes into its sandbox's directory (its job
  # record), so one rm -rf can lose that race and leave the directory, and
  # a sandbox whose directory is there is not vanished (seen once in CI
  # under TCG): remove it until it is gone
  for _ in $(seq 50); do
    rm -rf "${LASH_SANDBOX_ROOT:?}/$S" 2>/dev/null
    [ -e "$LASH_SANDBOX_ROOT/$S" ] || break
    sleep 0.1
  done
  T=$(sb create)
  check "a group whose sandbox vanished is killed and removed when the next one is made" \
    sh -c "test -n '$T' -a ! -e '$d' -a ! -e '$LASH_SANDBOX_ROOT/$S'"
  [ -e "$d" ] && { echo 1 >"$d/cgroup.kill" 2>/dev/null; sleep 2; rmdir "$d" 2>/dev/null; }
  sb destroy "$T"
  check "nothing is left under lash's groups ($(ls $CG/lash | grep -vc '^cgroup\.\|^pids\.\|^memory\.\|^cpu\.\|^io\.\|^rdma\.\|^hugetlb\.\|^misc\.'))" \
    test -z "$(find $CG/lash -mindepth 1 -type d)"
  rm -rf "$work"
  echo "1..$n"
  exit 0
fi

# ---- on the host: boot the VM -----------------------------------------------
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ -x "$LASH" ] || skip "$LASH is not built"
QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 is missing (Debian: qemu-system-x86)"
BUSYBOX=$(command -v busybox) || skip "busybox is missing (Debian: busybox-static)"
ldd "$BUSYBOX" >/dev/null 2>&1 && skip "$BUSYBOX is not static (Debian: busybox-static)"
command -v cpio >/dev/null || skip "cpio is missing"
# Debian's kernel whose 9p modules are there (the cloud flavour has none)
kver=""
for k in $(ls /boot/vmlinuz-* 2>/dev/null | sort -V); do
  v=${k#/boot/vmlinuz-}
  [ -r "$k" ] && [ -e "/lib/modules/$v/kernel/fs/9p/9p.ko" ] && kver=$v
done
[ -n "$kver" ] || skip "no kernel image with virtio-9p modules in /boot (Debian: linux-image-amd64)"
kernel=/boot/vmlinuz-$kver
# KVM where it can run Debian's kernel; else qemu's own emulation (TCG),
# many times slower but the same kernel. A host whose KVM is PVM (kvm_pvm:
# a nested hypervisor without VMX) runs only guests built for PVM: a stock
# kernel hangs in its first instructions there.
accel=${LASH_VM_ACCEL:-}
if [ -z "$accel" ]; then
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then accel=tcg; why_accel="no usable /dev/kvm"
  elif [ -d /sys/module/kvm_pvm ]; then accel=tcg; why_accel="this host's KVM is PVM, which runs no stock kernel"
  else accel=kvm; fi
fi
case $accel in
  kvm) accel_args=(-enable-kvm -cpu host) ;;
  tcg) accel_args=(-accel tcg,thread=multi -cpu max); echo "# emulating the CPU (TCG): ${why_accel:-LASH_VM_ACCEL=tcg}" ;;
  *) echo "test_cgroup_v2.sh: LASH_VM_ACCEL must be kvm or tcg (found '$accel')" >&2; exit 2 ;;
esac
mods=/lib/modules/$kver

tmp=$(mktemp -d /tmp/lash-cgroup-v2.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# the initramfs: busybox, the modules 9p over virtio needs (in modules.dep
# order), and an init that mounts the host's / and switches to it
mkdir -p "$tmp/initrd/bin" "$tmp/initrd/mod" "$tmp/initrd/newroot" "$tmp/initrd/proc" "$tmp/initrd/dev"
cp "$BUSYBOX" "$tmp/initrd/bin/busybox"
order=()
add_mod() { # add_mod PATH-IN-MODULES.DEP: its dependencies first
  local m=$1 d deps
  for d in "${order[@]}"; do [ "$d" = "$m" ] && return; done
  deps=$(sed -n "s|^$m: *||p" "$mods/modules.dep")
  for d in $(echo "$deps" | tr ' ' '\n' | tac); do add_mod "$d"; done
  order+=("$m")
}
for m in kernel/drivers/virtio/virtio_pci.ko kernel/net/9p/9pnet_virtio.ko kernel/fs/9p/9p.ko; do
  add_mod "$m"
done
: >"$tmp/initrd/modules"
for m in "${order[@]}"; do
  cp "$mods/$m" "$tmp/initrd/mod/"
  basename "$m" >>"$tmp/initrd/modules"
done
cat >"$tmp/initrd/init" <<EOF
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
for m in \$(/bin/busybox cat /modules); do /bin/busybox insmod /mod/\$m || echo "${MARK}Bail out! insmod \$m"; done
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /newroot ||
  { echo "${MARK}Bail out! cannot mount the host's root over 9p"; /bin/busybox poweroff -f; }
/bin/busybox mount -o move /proc /newroot/proc
/bin/busybox mount -o move /dev /newroot/dev
exec /bin/busybox switch_root /newroot /bin/bash "$repo/tests/integration/test_cgroup_v2.sh" --in-vm
EOF
chmod 755 "$tmp/initrd/init"
(cd "$tmp/initrd" && find . | cpio -o -H newc --quiet >"$tmp/initrd.cpio")

# LASH_VM_CONSOLE=FILE keeps the VM's whole console there (LASH_VM_LOGLEVEL=7
# puts the kernel's messages on it; LASH_VM_PARTS=containment, v2 or hostpaths runs one
# part only)
console=${LASH_VM_CONSOLE:-$tmp/console}
t0=$SECONDS
# The VM's memory: the default memory.max is half of it, the test's own
# limits are far below. No network; the console is the serial port.
timeout 800 "$QEMU" "${accel_args[@]}" -m 1024 -smp 2 -nographic -no-reboot -nic none \
  -kernel "$kernel" -initrd "$tmp/initrd.cpio" \
  -append "console=ttyS0 loglevel=${LASH_VM_LOGLEVEL:-1} panic=-1 lash.parts=${LASH_VM_PARTS:-containment,v2,hostpaths}${LASH_VM_X:+ lash.x}" \
  -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  </dev/null >"$console" 2>&1
qrc=$?
took=$((SECONDS - t0))

# the VM's TAP, numbered here as one plan
n=0; failed=0; done_seen=0
while IFS= read -r line; do
  line=${line%$'\r'}
  case $line in "$MARK"*) ;; *) continue ;; esac
  line=${line#"$MARK"}
  case $line in
    done) done_seen=1 ;;
    "not ok "*) n=$((n+1)); failed=$((failed+1)); echo "not ok $n - v2: ${line#not ok * - }" ;;
    "ok "*) n=$((n+1)); echo "ok $n - v2: ${line#ok * - }" ;;
    "1..0"*) n=$((n+1)); failed=$((failed+1)); echo "not ok $n - v2: a part skipped itself in the VM (${line#1..0})" ;;
    "Bail out!"*) n=$((n+1)); failed=$((failed+1)); echo "not ok $n - v2: ${line#Bail out! }" ;;
    "#"*) echo "$line" ;;
  esac
done <"$console"
if [ "$done_seen" != 1 ] || [ "$n" = 0 ]; then
  n=$((n+1)); failed=$((failed+1))
  echo "not ok $n - the VM ran the cgroup v2 cases to the end (qemu exit $qrc after ${took}s); its console:"
  tail -n 40 "$console" | sed 's/^/#   /'
fi
echo "# the cgroup v2 VM (kernel $kver, $accel) took ${took}s"
echo "1..$n"
[ "$failed" -eq 0 ]
