#!/usr/bin/env bash
# Installs everything calq needs to build and test on Debian 12. Idempotent:
# packages already present are skipped, so repeated runs cost a few seconds.
#   apt: compiler toolchain, protobuf-c, ONNX schema + test data, cJSON, stb,
#        oneDNN, and the Python reference tools (onnx, numpy, opencv, torch).
#   npm: onnxruntime-node, a test peer, into a cache outside the repo.
set -euo pipefail

APT_PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
  libcjson-dev libstb-dev libdnnl-dev
  python3 python3-numpy python3-onnx python3-opencv python3-torch
  nodejs npm time
)
ORT_VERSION=1.30.0
PEERS_DIR=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
# node/npm may come from outside apt (the image ships its own); accept either.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=()
  for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "${CALQ_SKIP_PEERS:-0}" != 1 ]; then
  if [ ! -f "$PEERS_DIR/node_modules/onnxruntime-node/package.json" ] ||
     ! grep -q "\"version\": \"$ORT_VERSION\"" "$PEERS_DIR/node_modules/onnxruntime-node/package.json"; then
    echo "install-deps: npm install onnxruntime-node@$ORT_VERSION into $PEERS_DIR"
    mkdir -p "$PEERS_DIR"
    (cd "$PEERS_DIR" && [ -f package.json ] || echo '{"name":"calq-peers","private":true}' > "$PEERS_DIR/package.json")
    (cd "$PEERS_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund "onnxruntime-node@$ORT_VERSION")
  fi
fi
echo "install-deps: ok"
