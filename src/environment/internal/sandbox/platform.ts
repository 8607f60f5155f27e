/**
 * What this machine offers for isolation, found once when the sandbox layer is built, and how a command is
 * wrapped with it: `bwrap` (no network, read-only system, only the workspace writable), `prlimit` (or `ulimit`
 * in `sh`) for CPU / memory / process limits, and `setpriv` to leave root.
 *
 * Why leave root: the kernel never applies RLIMIT_NPROC to processes of uid 0, in or out of a user namespace,
 * so a fork bomb run as root is not contained by any process limit. Run as root, each command therefore gets a
 * uid of its own from a pool (so one run's processes never count against another's) and keeps only
 * CAP_DAC_READ_SEARCH, so that interpreters installed under a private home (pyenv under `/root`) still run.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs/promises"
import { createRequire } from "node:module"
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path"

/** Limits applied to every command. */
export interface Limits {
  readonly cpuSeconds: number
  readonly memoryBytes: number
  readonly maxProcesses: number
  readonly maxFileBytes: number
  readonly maxOpenFiles: number
}

/** How commands are isolated on this machine. */
export interface Platform {
  readonly isolation: "bwrap" | "process"
  readonly bwrap: string | undefined
  /** `prlimit`'s path, or `sh` for the `ulimit` fallback, or none. */
  readonly limiter: { readonly kind: "prlimit" | "ulimit"; readonly path: string } | undefined
  /** `setpriv`'s path when commands run under pooled uids (we are root). */
  readonly setpriv: string | undefined
  /** `unshare`'s path when, not being root and without bwrap, a user namespace makes the process limit per run. */
  readonly unshare: string | undefined
  /** `kill`'s path, to sweep what escaped a run's process group under its uid. */
  readonly kill: string | undefined
  /** Why bwrap is not used, when it is not. */
  readonly bwrapUnavailable: string | undefined
  /** Whether the process-count limit actually holds (see the module comment). */
  readonly processLimitEnforced: boolean
}

const isExecutableFile = async (path: string): Promise<boolean> => {
  try {
    const stat = await fs.stat(path)
    if (!stat.isFile()) return false
    await fs.access(path, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first executable named `name` on `path` (a PATH value), not resolved further. */
export const findOnPath = async (name: string, path: string): Promise<string | undefined> => {
  for (const dir of path.split(delimiter)) {
    if (dir === "") continue
    const candidate = join(dir, name)
    if (await isExecutableFile(candidate)) return candidate
  }
  return undefined
}

const resolvePackageDir = (name: string, from: string): string | undefined => {
  try {
    return dirname(createRequire(from).resolve(`${name}/package.json`))
  } catch {
    return undefined
  }
}

/**
 * The `ast-grep` binary of the `@ast-grep/cli` package (an optional peer dependency), if installed: resolved
 * from valet's own location, else found in a `node_modules/.bin` from `cwd` upward (else `locate` tries PATH, and
 * a machine without it refuses `ast-grep` like any missing program). The platform package's binary comes first:
 * `@ast-grep/cli/ast-grep` is a text placeholder until its postinstall script has run, which npm may not do.
 */
export const packagedAstGrep = async (
  options: { readonly cwd?: string | undefined; readonly resolveFrom?: string | undefined } = {}
): Promise<string | undefined> => {
  const cwd = options.cwd ?? process.cwd()
  const candidates: Array<string> = []
  const cli = resolvePackageDir("@ast-grep/cli", options.resolveFrom ?? import.meta.url)
  if (cli !== undefined) {
    const from = join(cli, "package.json")
    for (const name of [`@ast-grep/cli-${process.platform}-${process.arch}-gnu`, `@ast-grep/cli-${process.platform}-${process.arch}`]) {
      const dir = resolvePackageDir(name, from)
      if (dir !== undefined) candidates.push(join(dir, "ast-grep"))
    }
    candidates.push(join(cli, "ast-grep"))
  }
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    candidates.push(join(dir, "node_modules", ".bin", "ast-grep"))
    if (dirname(dir) === dir) break
  }
  for (const candidate of candidates) {
    if (await isExecutableFile(candidate) && await isProgram(candidate)) return candidate
  }
  return undefined
}

/** Whether a file starts like something the kernel can run (ELF, Mach-O, `#!`), not like npm's placeholder text. */
const isProgram = async (path: string): Promise<boolean> => {
  try {
    const handle = await fs.open(path, "r")
    try {
      const { buffer, bytesRead } = await handle.read(Buffer.alloc(4), 0, 4, 0)
      const magic = buffer.subarray(0, bytesRead).toString("hex")
      return magic.startsWith("2321") || ["7f454c46", "cffaedfe", "cefaedfe", "cafebabe"].includes(magic)
    } finally {
      await handle.close()
    }
  } catch {
    return false
  }
}

/** Where a command's program is, before following links: bare names through PATH, paths from `cwd`. */
export const locate = async (
  program: string,
  path: string,
  cwd: string,
  packaged: ReadonlyMap<string, string>
): Promise<string | undefined> => {
  if (program.includes("/")) {
    const candidate = isAbsolute(program) ? program : resolve(cwd, program)
    return (await isExecutableFile(candidate)) ? candidate : undefined
  }
  return packaged.get(program) ?? (await findOnPath(program, path))
}

/** The real path of an executable (links followed), or `undefined`. */
export const realExecutable = (path: string): Promise<string | undefined> => fs.realpath(path).catch(() => undefined)

const exec = (file: string, args: ReadonlyArray<string>, timeoutMs: number): Promise<{ ok: boolean; output: string }> =>
  new Promise((done) => {
    execFile(file, [...args], { timeout: timeoutMs, killSignal: "SIGKILL" }, (error, stdout, stderr) =>
      done({ ok: error === null, output: `${stdout}${stderr}`.trim() }))
  })

/** bwrap arguments common to the probe and to real runs. */
const bwrapBase = (root: boolean): Array<string> => [
  "--ro-bind", "/", "/",
  "--dev", "/dev",
  "--proc", "/proc",
  "--perms", "1777", "--tmpfs", "/tmp",
  "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
  ...(root ? [] : ["--unshare-user"]),
  "--die-with-parent"
]

/** Finds what this machine offers. `isolation: "bwrap"` fails when bwrap does not work; `"auto"` falls back. */
export const detect = async (
  isolation: "auto" | "bwrap" | "process",
  path: string,
  dropPrivileges: boolean
): Promise<Platform | string> => {
  const root = process.geteuid?.() === 0
  const [bwrap, prlimit, sh, setpriv, unshare, kill] = await Promise.all([
    findOnPath("bwrap", path),
    findOnPath("prlimit", path),
    findOnPath("sh", path),
    findOnPath("setpriv", path),
    findOnPath("unshare", path),
    findOnPath("kill", path)
  ])
  let bwrapUnavailable: string | undefined
  let useBwrap = false
  if (isolation !== "process") {
    if (bwrap === undefined) {
      bwrapUnavailable = "bwrap is not installed (apt-get install bubblewrap)"
    } else {
      // Installed is not enough: user namespaces may be disabled, or we may be inside a container that forbids them.
      const probe = await exec(bwrap, [...bwrapBase(root), "--", "sh", "-c", "true"], 5_000)
      if (probe.ok) useBwrap = true
      else bwrapUnavailable = `bwrap does not work here: ${probe.output.slice(0, 300) || "it failed without a message"}`
    }
    if (isolation === "bwrap" && !useBwrap) return bwrapUnavailable!
  } else {
    bwrapUnavailable = "isolation is set to process"
  }
  const pooled = root && dropPrivileges && setpriv !== undefined
  let userns: string | undefined
  if (!root && !useBwrap && unshare !== undefined) {
    if ((await exec(unshare, ["--user", "--", "sh", "-c", "true"], 5_000)).ok) userns = unshare
  }
  const limiter = prlimit !== undefined
    ? { kind: "prlimit" as const, path: prlimit }
    : sh !== undefined
    ? { kind: "ulimit" as const, path: sh }
    : undefined
  return {
    isolation: useBwrap ? "bwrap" : "process",
    bwrap: useBwrap ? bwrap : undefined,
    limiter,
    setpriv: pooled ? setpriv : undefined,
    unshare: userns,
    kill: pooled ? kill : undefined,
    bwrapUnavailable,
    // Without root a fresh user namespace (bwrap's or unshare's) counts a run's processes on their own.
    processLimitEnforced: limiter !== undefined && (pooled || (!root && (useBwrap || userns !== undefined)))
  }
}

/** Whether bwrap's private /tmp or the hidden work root would hide this directory (not the mounted workspace). */
const hiddenInSandbox = (dir: string, workRoot: string, workspace: string): boolean =>
  (`${dir}/`.startsWith("/tmp/") || `${dir}/`.startsWith(`${workRoot}/`)) && !`${dir}/`.startsWith(`${workspace}/`)

/** The argv that runs `program args` in `workspace` with the platform's isolation and the limits. */
export const wrap = (
  platform: Platform,
  options: {
    readonly program: string
    /** The program with its links followed, when it differs (a `node_modules/.bin` link). */
    readonly real?: string | undefined
    readonly args: ReadonlyArray<string>
    readonly workspace: string
    readonly workRoot: string
    readonly limits: Limits
    readonly uid: number | undefined
  }
): Array<string> => {
  const { limits } = options
  const argv: Array<string> = []
  if (platform.bwrap !== undefined) {
    argv.push(
      platform.bwrap,
      ...bwrapBase(process.geteuid?.() === 0),
      // Other tasks' workspaces are hidden; only this one is mounted, writable.
      "--tmpfs", options.workRoot,
      "--bind", options.workspace, options.workspace,
      // The private /tmp (and the hidden work root) would also hide an allowed program installed there — a
      // project checked out under /tmp has its node_modules binaries there: show its directory, read-only.
      // A link's target directory too, or the link would dangle inside.
      ...[...new Set([options.program, options.real ?? options.program].map((path) => dirname(path)))]
        .filter((dir) => hiddenInSandbox(dir, options.workRoot, options.workspace))
        .flatMap((dir) => ["--ro-bind", dir, dir]),
      "--chdir", options.workspace,
      "--"
    )
  }
  // A limit the platform cannot enforce is not set: RLIMIT_NPROC counts every process of the uid, so as an
  // ordinary user outside a namespace it would stop the command from starting anything at all.
  const nproc = platform.processLimitEnforced ? limits.maxProcesses : undefined
  if (platform.limiter?.kind === "prlimit") {
    argv.push(
      platform.limiter.path,
      `--cpu=${limits.cpuSeconds}`,
      `--as=${limits.memoryBytes}`,
      `--fsize=${limits.maxFileBytes}`,
      `--nofile=${limits.maxOpenFiles}`,
      ...(nproc !== undefined ? [`--nproc=${nproc}`] : []),
      "--"
    )
  } else if (platform.limiter?.kind === "ulimit") {
    const script = [
      `ulimit -t ${limits.cpuSeconds}`,
      `ulimit -v ${Math.floor(limits.memoryBytes / 1024)}`,
      `ulimit -n ${limits.maxOpenFiles}`,
      ...(nproc !== undefined ? [`ulimit -u ${nproc}`] : []),
      `exec "$@"`
    ].join(" && ")
    argv.push(platform.limiter.path, "-c", script, "valet-sandbox")
  }
  if (platform.setpriv !== undefined && options.uid !== undefined) {
    argv.push(
      platform.setpriv,
      `--reuid=${options.uid}`,
      `--regid=${options.uid}`,
      "--clear-groups",
      "--no-new-privs",
      // If this process dies without cleaning up (SIGKILL, a crash), the command dies with it.
      "--pdeathsig=SIGKILL",
      "--inh-caps=+dac_read_search",
      "--ambient-caps=+dac_read_search",
      "--"
    )
  }
  if (platform.unshare !== undefined) argv.push(platform.unshare, "--user", "--")
  argv.push(options.program, ...options.args)
  return argv
}

/** Kills every process left under `uid` (ones that left the process group with setsid). */
export const sweepUid = (platform: Platform, uid: number): Promise<void> =>
  platform.setpriv === undefined || platform.kill === undefined
    ? Promise.resolve()
    : exec(platform.setpriv, [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--", platform.kill, "-KILL", "-1"], 5_000)
      .then(() => undefined)
