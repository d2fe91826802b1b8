#!/usr/bin/env bash
# .ci/deps.sh: install the Debian packages lash needs to build and test,
# only those missing. Used by `make deps` and .ci/run.
set -euo pipefail
# Each line says what needs it; nothing else is installed. A fresh Debian 12
# root (see .ci/run) has none of these, so a missing line fails CI.
PKGS=(
  # the build: the CLI, the libraries, the Lua module
  build-essential pkg-config lua5.4 liblua5.4-dev libcurl4-openssl-dev
  # the build: the YAML loader (src/yaml.c) over libyaml
  libyaml-dev
  # at run time: the local sandbox
  bubblewrap
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
)
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
