import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { packagedAstGrep, type Platform, wrap } from "../../../../src/environment/internal/sandbox/platform.js"

const bwrapPlatform: Platform = {
  isolation: "bwrap",
  bwrap: "/usr/bin/bwrap",
  limiter: undefined,
  setpriv: undefined,
  unshare: undefined,
  kill: undefined,
  bwrapUnavailable: undefined,
  processLimitEnforced: false
}

const limits = { cpuSeconds: 10, memoryBytes: 1 << 30, maxProcesses: 32, maxFileBytes: 1 << 20, maxOpenFiles: 64 }

const argvFor = (program: string) =>
  wrap(bwrapPlatform, {
    program,
    args: ["--version"],
    workspace: "/tmp/valet-sandbox-0/task-1",
    workRoot: "/tmp/valet-sandbox-0",
    limits,
    uid: undefined
  })

describe("sandbox platform: bwrap arguments", () => {
  it("a program under /tmp (a checkout there) is mounted read-only, since bwrap's /tmp is private", () => {
    const argv = argvFor("/tmp/checkout/node_modules/@ast-grep/cli/ast-grep")
    const at = argv.indexOf("/tmp/checkout/node_modules/@ast-grep/cli")
    expect(argv[at - 1]).toBe("--ro-bind")
    expect(argv[at + 1]).toBe("/tmp/checkout/node_modules/@ast-grep/cli")
    // After the tmpfs mounts, or they would hide it again; before the command.
    expect(at).toBeGreaterThan(argv.lastIndexOf("--tmpfs"))
    expect(at).toBeLessThan(argv.indexOf("--"))
  })

  it("a program elsewhere needs no extra mount", () => {
    expect(argvFor("/usr/bin/python3").filter((arg) => arg === "--ro-bind")).toEqual(["--ro-bind"])
  })
})

describe("sandbox platform: a program behind a link, a program in the workspace", () => {
  it("a node_modules/.bin link under /tmp: its directory and its target's are both mounted read-only", () => {
    const argv = wrap(bwrapPlatform, {
      program: "/tmp/checkout/node_modules/.bin/ast-grep",
      real: "/tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu/ast-grep",
      args: [],
      workspace: "/tmp/valet-sandbox-0/task-1",
      workRoot: "/tmp/valet-sandbox-0",
      limits,
      uid: undefined
    })
    const mounts = argv.flatMap((arg, i) => (arg === "--ro-bind" ? [argv[i + 1]] : []))
    expect(mounts).toEqual(["/", "/tmp/checkout/node_modules/.bin", "/tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu"])
  })

  it("a program inside the workspace does not remount the workspace read-only", () => {
    const argv = wrap(bwrapPlatform, {
      program: "/tmp/valet-sandbox-0/task-1/python3",
      real: "/usr/bin/python3.11",
      args: [],
      workspace: "/tmp/valet-sandbox-0/task-1",
      workRoot: "/tmp/valet-sandbox-0",
      limits,
      uid: undefined
    })
    expect(argv.filter((arg) => arg === "--ro-bind")).toEqual(["--ro-bind"])
  })
})

describe("sandbox platform: finding ast-grep (@ast-grep/cli, an optional peer)", () => {
  const scratch = () => mkdtempSync(join(tmpdir(), "valet-astgrep-"))
  // Resolving from a directory with no node_modules above it plays a project without @ast-grep/cli.
  const nowhere = (dir: string) => join(dir, "valet", "dist", "index.js")

  it("finds the installed package's binary (the platform package, not npm's placeholder)", async () => {
    const found = await packagedAstGrep()
    expect(found).toBeDefined()
    expect(found).toMatch(/node_modules\/@ast-grep\//)
    expect(readFileSync(found!).subarray(0, 4).toString("hex")).toBe("7f454c46")
    expect(execFileSync(found!, ["--version"], { encoding: "utf8" })).toMatch(/^ast-grep \d/)
  })

  it("else finds node_modules/.bin/ast-grep from the working directory upward, skipping a placeholder", async () => {
    const dir = scratch()
    try {
      const project = join(dir, "project")
      const nested = join(project, "packages", "app")
      mkdirSync(join(project, "node_modules", ".bin"), { recursive: true })
      mkdirSync(nested, { recursive: true })
      const bin = join(project, "node_modules", ".bin", "ast-grep")
      writeFileSync(bin, "This file is required so that dumb npm creates the ast-grep binary.\n", { mode: 0o755 })
      expect(await packagedAstGrep({ cwd: nested, resolveFrom: nowhere(dir) })).toBeUndefined()
      writeFileSync(bin, "#!/bin/sh\necho ast-grep 0.0.0\n", { mode: 0o755 })
      expect(await packagedAstGrep({ cwd: nested, resolveFrom: nowhere(dir) })).toBe(bin)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("answers undefined when it is not installed", async () => {
    const dir = scratch()
    try {
      expect(await packagedAstGrep({ cwd: dir, resolveFrom: nowhere(dir) })).toBeUndefined()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
