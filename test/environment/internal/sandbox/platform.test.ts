import { describe, expect, it } from "@effect/vitest"
import { type Platform, wrap } from "../../../../src/environment/internal/sandbox/platform.js"

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
