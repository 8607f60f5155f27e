import { execFileSync } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { packagedAstGrep, type Platform, reachableByAnyone, shownFor, wrap } from "../../../../src/environment/internal/sandbox/platform.js"

const bwrapPlatform: Platform = {
  isolation: "bwrap",
  bwrap: "/usr/bin/bwrap",
  system: [{ path: "/usr" }, { path: "/bin", link: "usr/bin" }, { path: "/etc/ld.so.cache" }],
  limiter: undefined,
  setpriv: undefined,
  unshare: undefined,
  kill: undefined,
  bwrapUnavailable: undefined,
  processLimitEnforced: false
}

const limits = { cpuSeconds: 10, memoryBytes: 1 << 30, maxProcesses: 32, maxFileBytes: 1 << 20, maxOpenFiles: 64 }
const workspace = "/tmp/valet-sandbox-0/task-1"

const argvFor = (program: string, options: { real?: string; programs?: ReadonlyArray<string> } = {}) =>
  wrap(bwrapPlatform, {
    program,
    real: options.real,
    args: ["--version"],
    workspace,
    programs: options.programs ?? [],
    limits,
    uid: undefined
  })

/** The mount operations of an argv, in order, as `flag source target` strings. */
const mounts = (argv: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < argv.length && argv[i] !== "--"; i++) {
    const arg = argv[i]!
    if (["--ro-bind", "--bind", "--symlink"].includes(arg)) out.push(`${arg} ${argv[i + 1]} ${argv[i + 2]}`)
    else if (["--dir", "--tmpfs", "--proc", "--dev"].includes(arg)) out.push(`${arg} ${argv[i + 1]}`)
  }
  return out
}

describe("sandbox platform: what bwrap shows", () => {
  it("the system paths, /proc, /dev, a private /tmp, the programs, the workspace: never the whole root", () => {
    const argv = argvFor("/usr/bin/python3", { programs: ["/root/.pyenv", "/opt/node"] })
    expect(mounts(argv)).toEqual([
      "--ro-bind /usr /usr",
      "--symlink usr/bin /bin",
      "--dir /etc",
      "--ro-bind /etc/ld.so.cache /etc/ld.so.cache",
      "--proc /proc",
      "--dev /dev",
      "--tmpfs /tmp",
      // Made 0755 first: bwrap would make them 0700, which the pooled uid cannot cross.
      "--dir /opt",
      "--ro-bind /opt/node /opt/node",
      "--dir /root",
      "--ro-bind /root/.pyenv /root/.pyenv",
      "--dir /tmp/valet-sandbox-0",
      `--bind ${workspace} ${workspace}`
    ])
    expect(argv).not.toContain("/home")
    for (const flag of ["--unshare-net", "--die-with-parent", "--new-session"]) {
      expect(argv.includes(flag) || argv.includes("--unshare-all")).toBe(true)
    }
    expect(argv.slice(argv.indexOf("--") + 1)).toEqual(["/usr/bin/python3", "--version"])
  })

  it("a program named by a link outside what is shown (node_modules/.bin) appears at the link's path", () => {
    const argv = argvFor("/tmp/checkout/node_modules/.bin/ast-grep", {
      real: "/tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu/ast-grep",
      programs: ["/tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu"]
    })
    const shown = mounts(argv)
    // After the private /tmp, or it would hide them again.
    const tmp = shown.indexOf("--tmpfs /tmp")
    const program = shown.indexOf("--ro-bind /tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu /tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu")
    const link = shown.indexOf(
      "--ro-bind /tmp/checkout/node_modules/@ast-grep/cli-linux-x64-gnu/ast-grep /tmp/checkout/node_modules/.bin/ast-grep"
    )
    expect(tmp).toBeGreaterThanOrEqual(0)
    expect(program).toBeGreaterThan(tmp)
    expect(link).toBeGreaterThan(program)
    expect(shown).toContain("--dir /tmp/checkout/node_modules/.bin")
  })

  it("a program inside a shown directory or inside the workspace adds no mount", () => {
    const base = mounts(argvFor("/usr/bin/python3"))
    expect(mounts(argvFor("/usr/local/bin/python3", { real: "/usr/bin/python3.11" }))).toEqual(base)
    expect(mounts(argvFor(`${workspace}/python3`, { real: "/usr/bin/python3.11" }))).toEqual(base)
  })

  it("a directory inside another shown one is not mounted twice", () => {
    const shown = mounts(argvFor("/usr/bin/python3", { programs: ["/root/.pyenv/versions/3.11.7", "/root/.pyenv", "/usr/local"] }))
    expect(shown.filter((op) => op.startsWith("--ro-bind /root"))).toEqual(["--ro-bind /root/.pyenv /root/.pyenv"])
    expect(shown.filter((op) => op.includes("/usr/local"))).toEqual([])
  })
})

describe("sandbox platform: what to show of a program", () => {
  const avoid = { workRoot: "/tmp/valet-sandbox-0", cwd: "/work/project", home: "/home/alice" }
  it("its install prefix: <prefix>/bin/x -> <prefix>, a pyenv shim -> the pyenv root", () => {
    expect(shownFor("/opt/python/3.12/bin/python3.12", avoid)).toBe("/opt/python/3.12")
    expect(shownFor("/root/.pyenv/shims/python3", avoid)).toBe("/root/.pyenv")
    expect(shownFor("/work/project/node_modules/node/bin/node", avoid)).toBe("/work/project/node_modules/node")
    expect(shownFor("/work/project/node_modules/@ast-grep/cli-linux-x64-gnu/ast-grep", avoid)).toBe(
      "/work/project/node_modules/@ast-grep/cli-linux-x64-gnu"
    )
  })

  it("never a home, a top-level directory, the project or the work root: then the directory, else the file", () => {
    expect(shownFor("/home/alice/bin/tool", avoid)).toBe("/home/alice/bin")
    expect(shownFor("/root/bin/tool", avoid)).toBe("/root/bin")
    expect(shownFor("/opt/bin/tool", avoid)).toBe("/opt/bin")
    expect(shownFor("/work/project/bin/tool", avoid)).toBe("/work/project/bin")
    expect(shownFor("/home/alice/tool", avoid)).toBe("/home/alice/tool")
    expect(shownFor("/tmp/tool", avoid)).toBe("/tmp/tool")
    expect(shownFor("/tmp/valet-sandbox-0/tool", { ...avoid, workRoot: "/tmp/valet-sandbox-0/x" })).toBe("/tmp/valet-sandbox-0/tool")
  })
})

describe("sandbox platform: CAP_DAC_READ_SEARCH only when a program needs it", () => {
  it("a program any uid can reach does not need it; one in a private directory does", async () => {
    const dir = mkdtempSync(join(tmpdir(), "valet-reach-"))
    try {
      chmodSync(dir, 0o755)
      const open = join(dir, "open")
      const closed = join(dir, "closed")
      mkdirSync(open, { mode: 0o755 })
      mkdirSync(closed, { mode: 0o700 })
      for (const sub of [open, closed]) writeFileSync(join(sub, "tool"), "#!/bin/sh\n", { mode: 0o755 })
      chmodSync(closed, 0o700)
      expect(await reachableByAnyone(["/usr/bin/env", join(open, "tool")])).toBe(true)
      expect(await reachableByAnyone([join(closed, "tool")])).toBe(false)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("inside bwrap the capability is never kept; outside, only when asked", () => {
    const caps = (platform: Platform, readSearch: boolean) =>
      wrap({ ...platform, setpriv: "/usr/bin/setpriv" }, {
        program: "/usr/bin/python3",
        args: [],
        workspace,
        programs: [],
        limits,
        uid: 1_800_000_000,
        readSearch
      }).filter((arg) => arg.includes("dac_read_search"))
    expect(caps(bwrapPlatform, true)).toEqual([])
    const processPlatform: Platform = { ...bwrapPlatform, isolation: "process", bwrap: undefined }
    expect(caps(processPlatform, false)).toEqual([])
    expect(caps(processPlatform, true)).toEqual(["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"])
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
