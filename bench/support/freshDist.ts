/**
 * Refuses to measure stale compiled modules. A benchmark that imports `dist/` (as `valet rollout` runs them) measures
 * whatever was last built: after an edit to `src/` without `npm run build`, its numbers would be the old code's,
 * silently. Imported first (its check runs before the `dist/` modules after it are evaluated), it exits with the
 * names of the sources newer than their output, or missing from it.
 */
import { readdirSync, statSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

/** The sources under `src/` whose `dist/` module is missing or older than they are. */
export const staleModules = (): ReadonlyArray<string> => {
  const stale: Array<string> = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
        const out = join(root, "dist", relative(join(root, "src"), path)).replace(/\.ts$/, ".js")
        const built = statSync(out, { throwIfNoEntry: false })
        if (built === undefined || built.mtimeMs < statSync(path).mtimeMs) stale.push(relative(root, path))
      }
    }
  }
  walk(join(root, "src"))
  return stale
}

const stale = staleModules()
if (stale.length > 0) {
  process.stderr.write(
    `dist/ is older than ${stale.length} source file(s) (${stale.slice(0, 5).join(", ")}${stale.length > 5 ? ", …" : ""}): ` +
      "run `npm run build` first (`npm run bench` does), or this benchmark measures the code as it was.\n"
  )
  process.exit(2)
}
