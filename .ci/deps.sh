#!/usr/bin/env bash
# .ci/deps.sh: install the Debian packages lash needs to build and test,
# only those missing. Used by `make deps` and .ci/run.
set -euo pipefail
# Each line says what needs it; nothing else is installed. A fresh Debian 12
# root (see .ci/run) has none of these, so a missing line fails CI.
PKGS=(
  # the build: the CLI, the libraries, the Lua module
  build-essential pkg-config lua5.4 liblua5.4-dev libcurl4-openssl-dev
  # the build: the YAML loader (src/2-runtime/yaml_loader.c) over libyaml
  libyaml-dev
  # the build and `lash chat`: line editing and history (src/8-cli/term.c
  # includes its header; the program loads libedit.so.2 when a chat starts)
  libedit-dev
  # make test: test_chat.sh drives `lash chat` in a real terminal (tmux)
  tmux
  # the build: saved conversations (src/6-lua/lsqlite.c) over SQLite
  libsqlite3-dev
  # at run time: the local sandbox
  bubblewrap
  # at run time: a local sandbox's disk quota (--limit disk: mkfs.ext4)
  e2fsprogs
  # make test: busted specs, the rockspec test
  lua-busted luarocks
  # make test: the fake Modal server (gRPC) and the golden protobuf bytes;
  # protoc needs libprotobuf-dev for google/protobuf/{any,empty}.proto
  python3 python3-grpcio python3-protobuf protobuf-compiler libprotobuf-dev
  # make test: the local HTTP/2 test server
  python3-h2
  # make test: the sandbox and containment tests' probes, TLS test certificates
  curl iproute2 openssl util-linux procps
  # make check (valgrind runs), make fuzz (libFuzzer is in compiler-rt)
  clang libclang-rt-14-dev valgrind
  # make bench: peak RSS (/usr/bin/time -v)
  time
  # make test: which programs a run starts and which syscalls it makes
  # (test_disk_template.sh: no mkfs for a second sandbox; test_probe_cache.sh:
  # no bwrap probe in a second process)
  strace
  # make test: a LuaJIT host of liblash, C (static and shared) and FFI
  # (tests/integration/test_luajit_host.sh)
  luajit libluajit-5.1-dev
  # make test: the LÖVE example (test_love.sh) runs Debian's LÖVE 11.4 under
  # xvfb-run (xauth is only a Recommends of xvfb); libgl1-mesa-dri is mesa's
  # software rasterizer (llvmpipe), the GL LÖVE draws with where no GPU is
  love xvfb xauth libgl1-mesa-dri
  # make test: the Neovim example (test_nvim.sh), nvim --headless (LuaJIT)
  neovim
  # make test: the cgroup v2 test (test_cgroup_v2.sh) boots Debian's kernel
  # (its 9p modules share the root with the VM) under qemu, from an
  # initramfs of static busybox made with cpio; the VM's init mounts its
  # filesystems with the shared root's mount (not in a minimal root)
  qemu-system-x86 linux-image-amd64 busybox-static cpio mount
  # make bench: the grep row compares lash's grep with rg in the same sandbox
  ripgrep
  # make test: test_url_redact.sh reads the sessions database as a user would
  sqlite3
  # make test: test_install.sh renders the installed man page (man -l)
  man-db
)
# The CI root never boots the kernel it installs: no initramfs for it (the
# test brings its own); a real machine keeps Debian's default.
if [ "${CI:-}" = true ]; then export INITRD=No; fi
# Node for the MCP interop tests: Debian's, unless a node/npm is already
# on PATH (from another source: keep it)
if ! command -v npm >/dev/null 2>&1; then PKGS+=(nodejs npm); fi
# The MCP and ACP tests' npm packages (reference servers, the official
# SDKs, the conformance suite, acpx, the Claude Code and Codex ACP adapters,
# a Node 22), pinned by tests/{mcp,acp}/package-lock.json, into each
# directory's node_modules: never globally.
npm_deps() {
  local root dir
  root="$(cd "$(dirname "$0")/.." && pwd)"
  if ! command -v npm >/dev/null 2>&1; then echo "deps: npm missing; the MCP and ACP tests will skip"; return 0; fi
  for dir in "$root/tests/mcp" "$root/tests/acp"; do
    if [ -f "$dir/node_modules/.package-lock.json" ] && cmp -s "$dir/package-lock.json" "$dir/node_modules/.lash-lock"; then
      continue
    fi
    echo "deps: npm ci in ${dir#"$root"/}"
    if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); then
      cp "$dir/package-lock.json" "$dir/node_modules/.lash-lock"
    else
      echo "deps: npm ci in ${dir#"$root"/} failed; its tests will try again"
    fi
  done
}
# The sandbox tools' peers (Codex's binary, whose apply_patch lash's is
# compared with), pinned by tests/peers/package-lock.json.
peer_deps() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/peers"
  if ls "$dir"/node_modules/@openai/codex-linux-*/vendor/*/bin/codex >/dev/null 2>&1; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then return 0; fi
  echo "deps: npm ci in tests/peers"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || echo "deps: npm ci failed; the Codex comparison will skip"
}
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  npm_deps
  peer_deps
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_deps
peer_deps
