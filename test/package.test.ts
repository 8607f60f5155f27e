/**
 * What `npm pack` ships and what installing it runs. The tarball used to carry src/ (and dist/'s source maps
 * pointing into it), and `npm install ./valet-0.1.0.tgz` listed valet's `prepare` as an install script for the
 * consumer to approve, though a tarball is already built. Now: dist/, bin/, README, LICENSE; the build runs on
 * `prepack` (and on the repo's own `npm ci`, through the root-only `postprepare`).
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dirname, "..")
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  readonly scripts: Record<string, string>
  readonly files: ReadonlyArray<string>
}

describe("the package", () => {
  it("npm pack ships dist/, bin/valet.js, README.md, LICENSE and package.json, nothing else", () => {
    // --ignore-scripts: the dist/ the test run already has (prepack would rebuild it).
    const [packed] = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" })
    ) as ReadonlyArray<{ readonly files: ReadonlyArray<{ readonly path: string }> }>
    const paths = packed!.files.map((file) => file.path)
    expect(paths.filter((path) => !path.startsWith("dist/")).sort()).toEqual(["LICENSE", "README.md", "bin/valet.js", "package.json"])
    expect(paths).toContain("dist/index.js")
    expect(readFileSync(join(root, "LICENSE"), "utf8")).toMatch(/^MIT License\n\nCopyright \(c\) 2026 the valet authors\n/)
  })

  it("the build emits no source maps (they would point into src/, which is not shipped)", () => {
    const config = JSON.parse(
      execFileSync(join(root, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.build.json", "--showConfig"], { cwd: root, encoding: "utf8" })
    ) as { readonly compilerOptions: Record<string, unknown> }
    expect({
      sourceMap: config.compilerOptions["sourceMap"] ?? false,
      declarationMap: config.compilerOptions["declarationMap"] ?? false,
      inlineSourceMap: config.compilerOptions["inlineSourceMap"] ?? false
    }).toEqual({ sourceMap: false, declarationMap: false, inlineSourceMap: false })
  })

  it("installing it runs nothing: no script npm runs (or asks a consumer to approve) on install; the build is prepack's", () => {
    // npm (11) lists preinstall, install and postinstall for every source, and prepare for a tarball, directory or
    // git source; postprepare runs only for the project being installed itself (this repo's `npm ci`).
    const onInstall = ["preinstall", "install", "postinstall", "prepare"].filter((event) => event in manifest.scripts)
    expect(onInstall).toEqual([])
    expect(manifest.scripts["prepack"]).toBe("npm run build")
    expect(manifest.scripts["postprepare"]).toBe("npm run build")
    expect(manifest.files).toEqual(["dist", "bin"])
  })
})
