#!/usr/bin/env bash
# What the tests' real servers and engines need beyond .venv, installed the same way for `make test`
# and CI: the Debian packages in tools/system-packages.txt (as root; apt-get), and Azurite (Azure
# Blob's emulator, npm) into a cache outside the clone. Without root or npm nothing is installed and
# the tests that need a missing piece skip, naming it. Idempotent and quick once everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t packages < <(grep -v '^\s*#' tools/system-packages.txt | grep -v '^\s*$')
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Azurite 3.35.0 (newer ones need Node >= 21), with npm's own cache kept beside it. npm is asked for by its
# command, not by a package name: Debian's `npm` (Node 18) on a fresh machine, but a machine may have Node
# from elsewhere (NodeSource's nodejs bundles npm and conflicts with Debian's).
azurite_home="${ROSETTA_AZURITE_HOME:-$HOME/.cache/rosetta/azurite}"
azurite_missing=$([ -x "$azurite_home/node_modules/.bin/azurite-blob" ] || echo yes)
[ -n "$azurite_missing" ] && ! command -v npm >/dev/null && missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install_test_servers: apt-get install ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "install_test_servers: not root (or no apt-get): not installing ${missing[*]}; the tests that need them will skip" >&2
  fi
fi

if [ -n "$azurite_missing" ]; then
  if command -v npm >/dev/null; then
    mkdir -p "$azurite_home"
    (cd "$azurite_home" && npm install --silent --no-audit --no-fund --cache "$HOME/.cache/rosetta/npm-cache" azurite@3.35.0) \
      || echo "install_test_servers: npm install azurite failed; the blob storage tests will skip" >&2
  else
    echo "install_test_servers: no npm; the blob storage tests will skip" >&2
  fi
fi
