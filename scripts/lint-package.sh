#!/usr/bin/env bash
# `npm run check:package`: lints the package as `npm pack` would ship it, from the dist/ already built (`npm ci` builds
# it; run `npm run build` after changing src/). publint reads the packed file list; Are the Types Wrong resolves every
# export of the packed tarball the way TypeScript does. valet is ESM-only, so attw's esm-only profile: it leaves out the
# node10 and node16-from-CommonJS resolutions, which cannot load an ESM-only package (their only complaints).
# Offline, no registry (scripts/check-package.sh is the by-hand install into a fresh project).
set -euo pipefail
cd "$(dirname "$0")/.."
publint --strict
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# --ignore-scripts: pack the dist/ that is there (prepack would rebuild it, ~30 s).
tarball="$(npm pack --ignore-scripts --silent --pack-destination "$work")"
attw "$work/$tarball" --profile esm-only --format table-flipped
