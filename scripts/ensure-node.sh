#!/usr/bin/env bash
# Source this file: it puts a Node.js >= 22.12 first on PATH, fetching Node 24 from the npm
# registry into ~/.cache/node24 when the machine's Node is older (wrangler needs 22.12+).
node_ok() {
  command -v node >/dev/null 2>&1 &&
    node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=12)?0:1)'
}
if ! node_ok; then
  cache="${HOME}/.cache/node24"
  if [ ! -x "${cache}/node_modules/.bin/node" ]; then
    echo "ensure-node: Node $(node --version 2>/dev/null || echo none) is too old; installing node@24 into ${cache}" >&2
    npm install --no-save --no-audit --no-fund --prefix "${cache}" node@24 >&2
  fi
  export PATH="${cache}/node_modules/.bin:${PATH}"
  node_ok || { echo "ensure-node: could not get Node >= 22.12" >&2; return 1 2>/dev/null || exit 1; }
fi
echo "ensure-node: using Node $(node --version)" >&2
