/**
 * `bin/valet.js`, the installed command, on a Node older than `engines` (>= 22.19): it used to load valet and die
 * later with `Cannot read properties of undefined (reading 'bind')` (Node 20); now it checks the version before
 * importing anything and says what it needs, exit code 2. Run with a real older Node when one is on the PATH (these
 * machines have Node 20 as `node`, outside node_modules/.bin), and always with this Node pretending to be 22.18.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { delimiter, join } from "node:path"

const root = join(import.meta.dirname, "..", "..")
const bin = join(root, "bin", "valet.js")

const olderThanEngines = (version: string): boolean => {
  const [major = 0, minor = 0] = version.replace(/^v/, "").split(".").map(Number)
  return major < 22 || (major === 22 && minor < 19)
}

/** The first `node` on the PATH, outside this checkout, older than `engines`; or why there is none. */
const oldNode = ((): { readonly path: string; readonly version: string } | { readonly missing: string } => {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    const path = join(dir, "node")
    if (dir === "" || dir.includes("node_modules") || !existsSync(path)) continue
    try {
      const version = execFileSync(path, ["--version"], { encoding: "utf8" }).trim()
      if (olderThanEngines(version)) return { path, version }
    } catch {
      // Not runnable: look further.
    }
  }
  return { missing: "no node older than 22.19 on the PATH outside node_modules" }
})()

// Makes this Node report another version before bin/valet.js runs (a module preloaded with --import).
const pretend = (version: string) =>
  `data:text/javascript,Object.defineProperty(process,"version",{value:"v${version}"});` +
  `Object.defineProperty(process.versions,"node",{value:"${version}"})`

describe("bin/valet.js checks the Node version before loading valet", () => {
  it.skipIf("missing" in oldNode)(
    `on a real older Node: one line saying what it needs, exit 2${"missing" in oldNode ? ` (skipped: ${oldNode.missing})` : ""}`,
    () => {
      if ("missing" in oldNode) return
      for (const args of [["health"], ["--version"], ["run", "hi"]]) {
        const run = spawnSync(oldNode.path, [bin, ...args], { encoding: "utf8", timeout: 30_000 })
        expect({ args, status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
          args,
          status: 2,
          stdout: "",
          stderr: `valet needs Node >= 22.19 (this is ${oldNode.version})\n`
        })
      }
    }
  )

  it("on Node 22.18 (this Node pretending): the same line, exit 2, before anything is imported", () => {
    const run = spawnSync(process.execPath, ["--import", pretend("22.18.0"), bin, "health"], { encoding: "utf8", timeout: 30_000 })
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: "valet needs Node >= 22.19 (this is v22.18.0)\n"
    })
  })

  it("on this Node (>= 22.19; 22.19 itself included) the command runs", () => {
    for (const pretending of [[], ["--import", pretend("22.19.0")]]) {
      const run = spawnSync(process.execPath, [...pretending, bin, "--version"], { encoding: "utf8", timeout: 30_000 })
      expect({ pretending, status: run.status, stdout: run.stdout.trim() }).toEqual({ pretending, status: 0, stdout: "valet v0.1.0" })
    }
  })
})
