#!/bin/sh
# Installs the npm `openai` client the server tests use (openai@6.30.1, no dependencies) into
# DEST/node_modules. On failure (offline) it warns and exits 0: the build goes on and the server
# tests fail with a message saying the client is missing.
set -u
dest=${1:?usage: fetch_npm_openai.sh DEST}
version=6.30.1
[ -f "$dest/node_modules/openai/package.json" ] &&
  grep -q "\"version\": \"$version\"" "$dest/node_modules/openai/package.json" && exit 0
mkdir -p "$dest" || exit 1
if npm install --silent --no-save --no-audit --no-fund --prefix "$dest" "openai@$version" \
     >/dev/null; then
  echo "fetched openai@$version into $dest"
else
  echo "warning: could not fetch openai@$version from npm; the server tests will fail" >&2
fi
exit 0
