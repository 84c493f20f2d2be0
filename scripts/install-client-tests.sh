#!/usr/bin/env bash
# Installs the real clients the integration tests run against `keel serve` (Claude Code, Codex CLI,
# Qwen Code, opencode, the official Anthropic and OpenAI SDKs), at the exact versions pinned in tests/clients/package-lock.json,
# into DIR/node_modules (default: build-test/clients). Idempotent: when DIR already holds this
# lockfile's install it returns at once without touching the network; concurrent callers (tests
# running in parallel) wait for one another. Exits 3 when npm is not installed.
#
#   scripts/install-client-tests.sh [DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build-test/clients}"
src="$root/tests/clients"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "install-client-tests: npm/node not found (scripts/install-deps.sh installs them)" >&2
  exit 3
fi

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
exec 9>"$dir/.install.lock"
flock 9

stamp="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
installed() {
  [[ -f "$dir/.installed" && "$(cat "$dir/.installed")" == "$stamp" && -x "$dir/node_modules/.bin/claude" &&
     -x "$dir/node_modules/.bin/codex" && -x "$dir/node_modules/.bin/qwen" && -x "$dir/node_modules/.bin/opencode" ]]
}
if installed; then
  exit 0
fi

rm -f "$dir/.installed"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# The Claude Code package declares node >= 22 but only its postinstall (install.cjs, which copies
# the native binary for this platform into bin/claude.exe) runs under node. The SDKs document
# node 20+ but their tests pass on Debian 12's node 18.
# The download cache lives in DIR too (unless npm_config_cache says otherwise), so a re-install
# after a lockfile change does not fetch unchanged packages again and HOME is never written.
# `npm install` over the copied lockfile installs exactly its versions. Not `npm ci`: opencode's and
# Qwen Code's optional per-platform packages for other systems (darwin, win32) are not all on the
# registry this project installs from, so the lockfile cannot list them, and npm ci refuses a
# lockfile with missing optional entries; npm install skips them.
(cd "$dir" && npm install --cache "${npm_config_cache:-$dir/.npm-cache}" --no-audit --no-fund \
  --update-notifier=false --engine-strict=false --loglevel=error)
# The placeholder bin/claude.exe is replaced by the native binary only if the postinstall ran.
if ! "$dir/node_modules/.bin/claude" --version >/dev/null 2>&1; then
  echo "install-client-tests: $dir/node_modules/.bin/claude does not run after the install" >&2
  exit 1
fi
for client in codex qwen opencode; do
  if ! "$dir/node_modules/.bin/$client" --version >/dev/null 2>&1; then
    echo "install-client-tests: $dir/node_modules/.bin/$client does not run after the install" >&2
    exit 1
  fi
done
echo "$stamp" >"$dir/.installed"
versions="$(cd "$dir/node_modules" && for p in @anthropic-ai/claude-code @anthropic-ai/sdk openai @openai/codex @qwen-code/qwen-code opencode-ai; do
  printf '%s@%s ' "$p" "$(node -p "JSON.parse(require('fs').readFileSync('$p/package.json')).version")"
done)"
echo "install-client-tests: ${versions}in $dir"
