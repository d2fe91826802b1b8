#!/usr/bin/env bash
# .ci/deps.sh: install the Debian packages lash needs to build and test,
# only those missing. Used by `make deps` and .ci/run.
set -euo pipefail
PKGS=(
  build-essential pkg-config
  lua5.4 liblua5.4-dev lua-cjson lua-busted lua-yaml luarocks
  libcurl4-openssl-dev bubblewrap
  python3 python3-grpcio python3-protobuf protobuf-compiler libprotobuf-dev python3-h2
  clang valgrind curl iproute2 openssl util-linux procps
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
