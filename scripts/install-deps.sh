#!/usr/bin/env bash
# Installs everything calq needs to build and test on Debian 12. Idempotent:
# packages already present are skipped, so repeated runs cost a few seconds.
#   apt: compiler toolchain, protobuf-c, ONNX schema + test data, cJSON, stb,
#        oneDNN, the Python reference tools (onnx, numpy, opencv, torch, torchvision)
#        and headless Chromium (the HTML report test).
#   npm: onnxruntime-node, a test peer, into a cache outside the repo.
# When another apt or dpkg holds its lock (an unattended upgrade, a second checkout's
# install), this waits for it (up to CALQ_APT_WAIT seconds, default 1800) instead of failing.
set -euo pipefail

APT_PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
  libcjson-dev libstb-dev libdnnl-dev
  python3 python3-numpy python3-onnx python3-opencv python3-torch python3-torchvision
  chromium
  nodejs npm time
)
ORT_VERSION=1.30.0
PEERS_DIR=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}
APT_WAIT=${CALQ_APT_WAIT:-1800}

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

# Runs an apt-get command; while it fails because another process holds apt's or dpkg's
# lock, waits and tries again. Any other failure is returned at once.
apt_retry() {
  local start=$SECONDS log rc
  log=$(mktemp)
  while :; do
    rc=0
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=60 "$@" 2> >(tee "$log" >&2) || rc=$?
    wait
    if [ $rc -eq 0 ]; then rm -f "$log"; return 0; fi
    if grep -qiE 'could not get lock|unable to (acquire|lock)|is another process using it' "$log" &&
       [ $((SECONDS - start)) -lt "$APT_WAIT" ]; then
      echo "install-deps: apt is busy (another install holds its lock); waiting..." >&2
      sleep 10
      continue
    fi
    rm -f "$log"
    return $rc
  done
}

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
  apt_retry update -qq
  apt_retry install -y -qq --no-install-recommends "${missing[@]}"
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
