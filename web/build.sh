#!/usr/bin/env bash
# Builds the JavaScript package of jello into web/pkg/ (docs/src/web.md):
#   web/pkg/jello_web.js        ES module (wasm-bindgen --target web): `await init()` in a page,
#                               `initSync({ module: bytes })` in node
#   web/pkg/jello_web.d.ts      its TypeScript types
#   web/pkg/jello_web_bg.wasm   the engine
# Installs what is missing: the wasm32-unknown-unknown target and wasm-bindgen's CLI at exactly
# the version web/Cargo.lock pins for the `wasm-bindgen` crate (the two must agree).
# JELLO_WEB_PROFILE=release builds the release profile; the default, the dev profile with every
# dependency at opt-level 3, reuses the wasm32 dependency tree of .ci/run's wasm stage.
set -euo pipefail
cd "$(dirname "$0")"
profile="${JELLO_WEB_PROFILE:-dev}"
target_dir="${CARGO_TARGET_DIR:-$PWD/../target}"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ -z "$version" ]; then
  echo "build.sh: no wasm-bindgen in web/Cargo.lock" >&2
  exit 1
fi
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }')" != "$version" ]; then
  echo "build.sh: installing wasm-bindgen-cli $version (cargo install)"
  # In a target directory of its own, so that it neither waits on nor rebuilds in the build's.
  # --locked when its lockfile's versions are all on the registry (not so for 0.2.130, whose
  # webpki-roots 1.0.11 is not), else a fresh resolution.
  (
    export CARGO_TARGET_DIR="$target_dir/wasm-bindgen-cli"
    cargo install wasm-bindgen-cli --version "$version" --locked ||
      cargo install wasm-bindgen-cli --version "$version"
  )
fi

start=$(date +%s)
cargo build --target wasm32-unknown-unknown --profile "$profile" --lib
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
wasm="$target_dir/wasm32-unknown-unknown/$dir/jello_web.wasm"
rm -rf pkg
wasm-bindgen --target web --out-dir pkg "$wasm"
raw=$(stat -c %s pkg/jello_web_bg.wasm)
gz=$(gzip -9 -c pkg/jello_web_bg.wasm | wc -c)
echo "build.sh: web/pkg built ($profile profile) in $(($(date +%s) - start)) s:" \
  "jello_web_bg.wasm $((raw / 1024)) KiB, $((gz / 1024)) KiB gzipped"

# The static site: web/dist/ (index.html at its root), for any static file server.
rm -rf dist
mkdir -p dist/scenes
cp -r pkg index.html main.js dist/
cp scenes/*.toml dist/scenes/
echo "build.sh: web/dist/ is the page (serve it with any static file server)"
