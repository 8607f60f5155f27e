#!/usr/bin/env bash
# Installs the packed valet into a fresh project on effect 4.1, as a user would, and checks what issue 11 asks of it:
# one copy of effect in the tree, no sandbox or SQLite binary that was not asked for, the README's quick start
# type-checks and runs, and every `valet/...` import path resolves. Uses the npm registry (not a test: run by hand).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$repo"
npm run -s build
tarball="$(npm pack --silent --pack-destination "$work")"
cd "$work"
npm init -y >/dev/null
npm pkg set type=module
start=$(date +%s)
npm install --no-audit --no-fund effect@4.1.0 @effect/platform-node@4.1.0 typescript@5.9 tsx @types/node@24 "./$tarball" >/dev/null
echo "install: $(( $(date +%s) - start )) s, node_modules $(du -sh node_modules | cut -f1)"
copies=$(npm ls effect --all --parseable 2>/dev/null | sort -u | wc -l)
echo "copies of effect: $copies"; [ "$copies" -eq 1 ]
for unwanted in @ast-grep/cli better-sqlite3 @effect/sql-pg; do
  if [ -e "node_modules/$unwanted" ]; then echo "installed without being asked: $unwanted" >&2; exit 1; fi
done
echo "no sandbox / SQLite / PostgreSQL package installed"
cp "$repo/examples/quickstart.ts" quickstart.ts
cat > tsconfig.json <<'JSON'
{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true,
  "exactOptionalPropertyTypes": true, "skipLibCheck": false, "noEmit": true, "types": ["node"] }, "include": ["quickstart.ts", "imports.ts"] }
JSON
node -e '
const p = require("./node_modules/valet/package.json")
const lines = Object.keys(p.exports).filter((k) => k !== "./package.json").map((k, i) => `import * as m${i} from "${k === "." ? "valet" : "valet/" + k.slice(2)}"`)
require("fs").writeFileSync("imports.ts", lines.join("\n") + "\nexport const all = [" + lines.map((_, i) => "m" + i).join(", ") + "]\n")'
npx tsc -p . && echo "quick start and every subpath type-check"
npx tsx quickstart.ts | tail -n 3
npx tsx imports.ts && echo "every subpath loads"
