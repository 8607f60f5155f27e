/**
 * What this machine offers for isolation, found once when the sandbox layer is built, and how a command is
 * wrapped with it: `bwrap` (no network, no other processes, a file system of its own that shows only the system
 * directories, the allowed programs' directories and the workspace), `prlimit` (or `ulimit` in `sh`) for CPU /
 * memory / process limits, and `setpriv` to leave root.
 *
 * Why leave root: the kernel never applies RLIMIT_NPROC to processes of uid 0, in or out of a user namespace,
 * so a fork bomb run as root is not contained by any process limit. Run as root, each command therefore gets a
 * uid of its own from a pool (so one run's processes never count against another's). Outside bwrap it keeps
 * CAP_DAC_READ_SEARCH when an allowed program needs it — interpreters installed under a private home (pyenv under
 * `/root`) — which also lets it read every file of the host: process mode is not isolation. Inside bwrap it keeps
 * no capability: the directories it needs are shown traversable instead.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs/promises"
import { createRequire } from "node:module"
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path"

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
  /** What bwrap shows of the host system (read-only). */
  readonly system: ReadonlyArray<SystemPath>
  /** `prlimit`'s path, or `sh` for the `ulimit` fallback, or none. */
  readonly limiter: { readonly kind: "prlimit" | "ulimit"; readonly path: string } | undefined
  /** `setpriv`'s path when commands run under pooled uids (we are root). */
  readonly setpriv: string | undefined
  /** `unshare`'s path when, not being root and without bwrap, a user namespace makes the process limit per run. */
  readonly unshare: string | undefined
  /** `sh`'s path: the launcher of pre-made workspaces (`launcher`), and the `ulimit` fallback. */
  readonly shell?: string | undefined
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

/**
 * A host path bubblewrap shows read-only: a directory or file bound as it is, or a link re-created (`/bin` ->
 * `usr/bin` on a merged-/usr system).
 */
export interface SystemPath {
  readonly path: string
  /** The link's target, when `path` is a symbolic link. */
  readonly link?: string | undefined
}

// What commands need of the host system: the programs and libraries under /usr (and its merged-/usr links or
// pre-merge directories), the dynamic loader's cache, Debian's alternatives links (`/usr/bin/awk` goes through
// them) and the local time zone. Nothing else of /etc: not passwd, not ssl, not the resolver (there is no network).
const systemCandidates = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"]

/** The system paths of this machine bwrap shows (what exists of `systemCandidates`). */
export const systemPaths = async (): Promise<Array<SystemPath>> => {
  const found: Array<SystemPath> = []
  for (const path of systemCandidates) {
    const stat = await fs.lstat(path).catch(() => undefined)
    if (stat === undefined) continue
    // A link whose target is shown anyway (`/bin` -> `usr/bin`) is re-created; any other link is bound (followed).
    const link = stat.isSymbolicLink() ? await fs.readlink(path).catch(() => undefined) : undefined
    const target = link !== undefined ? resolve(dirname(path), link) : undefined
    const shownAnyway = target !== undefined && (target === "/usr" || target.startsWith("/usr/"))
    found.push(shownAnyway ? { path, link } : { path })
  }
  return found
}

/** Whether `path` is `dir` or inside it. */
const within = (path: string, dir: string): boolean => path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`)

/**
 * What to show of an allowed program inside bwrap: its install prefix (`<prefix>/bin/python3` -> `<prefix>`, where
 * an interpreter finds its libraries; a pyenv shim's `<root>/shims` -> the pyenv root, where the interpreters are),
 * else its directory, else the file alone: the first that is not too wide. Too wide: the root or a top-level
 * directory, a home directory, or a directory holding a home, the work root (other tasks' workspaces) or the
 * current working directory (the user's project).
 */
export const shownFor = (
  real: string,
  avoid: { readonly workRoot: string; readonly cwd: string; readonly home: string }
): string => {
  const dir = dirname(real)
  const candidates = ["bin", "sbin", "shims"].includes(basename(dir)) ? [dirname(dir), dir] : [dir]
  const tooWide = (candidate: string) =>
    candidate.split("/").filter((part) => part !== "").length < 2 ||
    /^\/home\/[^/]+$/.test(candidate) || candidate === "/root" ||
    [avoid.workRoot, avoid.cwd, avoid.home].some((inner) => inner !== "" && within(inner, candidate))
  return candidates.find((candidate) => !tooWide(candidate)) ?? real
}

/**
 * bwrap's mount arguments over an empty root, in order. bwrap makes the missing parents of a mount point itself,
 * but (as root) with mode 0700, which a pooled uid cannot cross: every parent not inside a mounted host tree is
 * made here first, 0755.
 */
class Mounts {
  readonly args: Array<string> = []
  /** Host paths shown read-only. */
  readonly shown: Array<string> = []
  /** Mount points showing a host tree: what is inside exists there. */
  private readonly trees: Array<string> = []
  private readonly made = new Set<string>(["/"])

  /** Whether `path` is inside a host tree already shown. */
  covers(path: string): boolean {
    return this.trees.some((tree) => within(path, tree))
  }

  private parents(path: string): void {
    const parts = path.split("/").filter((part) => part !== "")
    for (let i = 1; i < parts.length; i++) {
      const dir = `/${parts.slice(0, i).join("/")}`
      if (this.made.has(dir) || this.covers(dir)) continue
      this.args.push("--perms", "0755", "--dir", dir)
      this.made.add(dir)
    }
  }

  readOnly(source: string, target: string = source): void {
    if (this.covers(target)) return
    this.parents(target)
    this.args.push("--ro-bind", source, target)
    this.trees.push(target)
    this.shown.push(source)
  }

  writable(path: string): void {
    this.parents(path)
    this.args.push("--bind", path, path)
    this.trees.push(path)
  }

  link(target: string, path: string): void {
    this.parents(path)
    this.args.push("--symlink", target, path)
    this.trees.push(path)
  }

  /** A fresh file system (`--proc`, `--dev`, `--tmpfs`) at `path`. */
  fresh(flag: "--proc" | "--dev" | "--tmpfs", path: string, perms?: string): void {
    this.parents(path)
    this.args.push(...(perms !== undefined ? ["--perms", perms] : []), flag, path)
    this.made.add(path)
  }
}

/**
 * The sandbox's file system: the system paths read-only, a fresh /proc (of its own pid namespace) and a minimal
 * /dev, a private /tmp, the allowed programs' directories read-only, then (for a run) the link the command was
 * named by and the workspace, writable. Nothing else of the host: not /home, not /root, not the work root's other
 * workspaces.
 */
const jail = (
  system: ReadonlyArray<SystemPath>,
  programs: ReadonlyArray<string>,
  run?: { readonly workspace: string; readonly program: string; readonly real: string }
): Mounts => {
  const mounts = new Mounts()
  for (const entry of system) {
    if (entry.link !== undefined) mounts.link(entry.link, entry.path)
    else mounts.readOnly(entry.path)
  }
  mounts.fresh("--proc", "/proc")
  mounts.fresh("--dev", "/dev")
  mounts.fresh("--tmpfs", "/tmp", "1777")
  // Outer directories first, so that one inside another is not mounted twice.
  for (const path of [...programs].sort((a, b) => a.length - b.length)) mounts.readOnly(path)
  if (run !== undefined) {
    // The command named its program by a link outside what is shown (`node_modules/.bin/node`): the program
    // itself appears there, so argv[0] and the path stay what the command wrote.
    if (!within(run.program, run.workspace) && !mounts.covers(run.program)) mounts.readOnly(run.real, run.program)
    mounts.writable(run.workspace)
  }
  return mounts
}

/**
 * bwrap's namespaces. As root, `--unshare-all` would also make a user namespace mapping only uid 0, in which the
 * pooled uid (see the module comment) cannot be taken: the same list without it.
 */
const namespaces = (root: boolean): Array<string> =>
  root
    ? ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    : ["--unshare-all"]

/** The host paths a bwrap sandbox with these programs shows read-only (besides the workspace). */
export const shownPaths = (platform: Platform, programs: ReadonlyArray<string>): Array<string> =>
  jail(platform.system, programs).shown

/** Why no isolation is available (`isolation` was `auto` or `bwrap`). */
export class Unavailable {
  constructor(readonly why: string) {}
}

/**
 * Finds what this machine offers. `auto` and `bwrap` both need bwrap working here (`auto` may pick another
 * isolation some day; there is none yet) and answer `Unavailable` without it; only `process` runs plain processes.
 */
export const detect = async (
  isolation: "auto" | "bwrap" | "process",
  path: string,
  dropPrivileges: boolean
): Promise<Platform | Unavailable> => {
  const root = process.geteuid?.() === 0
  const [bwrap, prlimit, sh, setpriv, unshare, kill, system] = await Promise.all([
    findOnPath("bwrap", path),
    findOnPath("prlimit", path),
    findOnPath("sh", path),
    findOnPath("setpriv", path),
    findOnPath("unshare", path),
    findOnPath("kill", path),
    systemPaths()
  ])
  let bwrapUnavailable: string | undefined
  let useBwrap = false
  if (isolation !== "process") {
    if (bwrap === undefined) {
      bwrapUnavailable = "bwrap is not installed (apt-get install bubblewrap)"
    } else {
      // Installed is not enough: user namespaces may be disabled, or we may be inside a container that forbids them.
      const probe = await exec(bwrap, [...jail(system, []).args, ...namespaces(root), "--die-with-parent", "--", "sh", "-c", "true"], 5_000)
      if (probe.ok) useBwrap = true
      else bwrapUnavailable = `bwrap does not work here: ${probe.output.slice(0, 300) || "it failed without a message"}`
    }
    if (!useBwrap) return new Unavailable(bwrapUnavailable!)
  } else {
    bwrapUnavailable = "isolation is set to process: commands run as plain processes, not isolated"
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
    system,
    limiter,
    setpriv: pooled ? setpriv : undefined,
    unshare: userns,
    kill: pooled ? kill : undefined,
    shell: sh,
    bwrapUnavailable,
    // Without root a fresh user namespace (bwrap's or unshare's) counts a run's processes on their own.
    processLimitEnforced: limiter !== undefined && (pooled || (!root && (useBwrap || userns !== undefined)))
  }
}

/** The argv that runs `program args` in `workspace` with the platform's isolation and the limits. */
export const wrap = (
  platform: Platform,
  options: {
    readonly program: string
    /** The program with its links followed, when it differs (a `node_modules/.bin` link). */
    readonly real?: string | undefined
    readonly args: ReadonlyArray<string>
    readonly workspace: string
    /** What bwrap shows of the allowed programs (`shownFor` of each). */
    readonly programs: ReadonlyArray<string>
    readonly limits: Limits
    readonly uid: number | undefined
    /** Outside bwrap, under a pooled uid: keep CAP_DAC_READ_SEARCH (see `reachableByAnyone`). */
    readonly readSearch?: boolean | undefined
  }
): Array<string> => {
  const { limits } = options
  const argv: Array<string> = []
  if (platform.bwrap !== undefined) {
    const mounts = jail(platform.system, options.programs, {
      workspace: options.workspace,
      program: options.program,
      real: options.real ?? options.program
    })
    argv.push(
      platform.bwrap,
      ...mounts.args,
      ...namespaces(process.geteuid?.() === 0),
      // The command dies with us, and gets a session of its own (no terminal to push input into). Without
      // `--as-pid-1`, bwrap's own init is pid 1 of the namespace: when the command exits, it exits, and the kernel
      // kills whatever the command left in the namespace (detached, double-forked).
      "--die-with-parent",
      "--new-session",
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
      // Never inside bwrap (see the module comment): there the programs' directories are shown traversable, and
      // the capability would undo the jail — with it, open_by_handle_at opens any file of a mounted file system by
      // its handle, whatever is mounted where (checked: it read a secret in the host's /root).
      ...(platform.bwrap === undefined && options.readSearch === true ? ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] : []),
      "--"
    )
  }
  if (platform.unshare !== undefined) argv.push(platform.unshare, "--user", "--")
  argv.push(options.program, ...options.args)
  return argv
}

/**
 * The launcher of a pre-made workspace: `wrap` of `sh -s`, so that bwrap's namespaces, the limits and the pooled
 * uid are all in place before any command is known; the command comes later on its stdin (`launch`), and `sh` execs
 * it: one exec on the way of a run instead of bwrap, prlimit and setpriv. Undefined without `sh`.
 */
export const launcher = (
  platform: Platform,
  options: Omit<Parameters<typeof wrap>[1], "program" | "real" | "args">
): Array<string> | undefined =>
  platform.shell !== undefined ? wrap(platform, { ...options, program: platform.shell, args: ["-s"] }) : undefined

const quote = (arg: string): string => `'${arg.replaceAll("'", `'\\''`)}'`

/**
 * What a launcher reads: `exec` of the command, every word single-quoted (a command has no NUL byte), its stdin
 * (the launcher's pipe) replaced by /dev/null as for a spawned command.
 */
export const launch = (program: string, args: ReadonlyArray<string>): string =>
  `exec ${[program, ...args].map(quote).join(" ")} </dev/null\n`

/**
 * Whether a launcher made for `workspace` can run `program`: in bwrap, only what its jail shows (a program named
 * through a link elsewhere needs a mount of its own, made only by `wrap`); outside bwrap, always.
 */
export const launcherRuns = (platform: Platform, programs: ReadonlyArray<string>, workspace: string, program: string): boolean =>
  platform.bwrap === undefined || within(program, workspace) || jail(platform.system, programs).covers(program)

/**
 * Kills what a process-mode run left behind outside its process group (`setsid`, a double fork): under a pooled
 * `uid`, every process of that uid (a sweep: `setpriv … kill -KILL -1`, a process spawn); and every process marked
 * with the run's id (`killMarked`). One /proc scan answers both first: a run that left nothing, the usual case,
 * costs that scan and nothing else (two scans, one per task, were ~1–2 ms of every command).
 */
export const reap = async (platform: Platform, id: string, uid: number | undefined): Promise<void> => {
  const owner = uid ?? process.getuid?.()
  const left = owner === undefined ? undefined : await processesOf(owner)
  if (left !== undefined && left.length === 0) return
  await Promise.all([uid !== undefined ? sweepUid(platform, uid) : undefined, killMarked(id, owner, left)])
}

/** Kills every process left under `uid` (ones that left the process group with setsid). */
const sweepUid = async (platform: Platform, uid: number): Promise<void> => {
  if (platform.setpriv === undefined || platform.kill === undefined) return
  await exec(platform.setpriv, [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--", platform.kill, "-KILL", "-1"], 5_000)
}

/** The processes (other than this one) owned by `uid`, from the owners of their /proc entries. */
const processesOf = async (uid: number): Promise<Array<number>> => {
  const entries = await fs.readdir("/proc").catch(() => [] as Array<string>)
  const found: Array<number> = []
  await Promise.all(entries.map(async (entry) => {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) return
    const stat = await fs.stat(`/proc/${entry}`).catch(() => undefined)
    if (stat !== undefined && stat.uid === uid) found.push(Number(entry))
  }))
  return found
}

/**
 * Whether any uid can reach and run these executables: every directory above them searchable by others, each
 * readable and executable by others. When not (pyenv under `/root`, mode 0700), a pooled uid outside bwrap needs
 * CAP_DAC_READ_SEARCH to run them — which also lets it read every file, so it gets it only then.
 */
export const reachableByAnyone = async (executables: ReadonlyArray<string>): Promise<boolean> => {
  for (const executable of executables) {
    const file = await fs.stat(executable).catch(() => undefined)
    if (file === undefined || (file.mode & 0o005) !== 0o005) return false
    for (let dir = dirname(executable); ; dir = dirname(dir)) {
      const stat = await fs.stat(dir).catch(() => undefined)
      if (stat === undefined || (stat.mode & 0o001) === 0) return false
      if (dirname(dir) === dir) break
    }
  }
  return true
}

/** The variable that marks every process of a process-mode run (children inherit it), to find the ones that left its group. */
export const runMarker = "VALET_SANDBOX_RUN"

/**
 * Kills every process whose environment carries `VALET_SANDBOX_RUN=<id>`: what a process-mode run left behind
 * outside its process group (`setsid`, a double fork), found through /proc. Repeated until a scan finds none, so a
 * process forking meanwhile is caught too. Only what we may read is found (our uid's processes, or all as root);
 * a child that cleared its environment is not (process mode is not isolation; pooled uids are swept by uid too).
 */
const killMarked = async (
  id: string,
  uid: number | undefined = process.getuid?.(),
  /** The uid's processes, when the caller has just scanned for them: the first round reads no /proc again. */
  scanned?: ReadonlyArray<number> | undefined
): Promise<void> => {
  const needle = Buffer.from(`${runMarker}=${id}\0`)
  for (let round = 0; round < 20; round++) {
    // Only the run's own uid's processes can carry its marker: a pooled uid runs with no_new_privs (no setuid
    // program changes it), and otherwise the run has our uid, whose processes are all we may read anyway. Their
    // environments are the only ones read; a stat of each /proc entry picks them.
    const candidates = round === 0 && scanned !== undefined
      ? scanned
      : uid === undefined
      ? (await fs.readdir("/proc").catch(() => [] as Array<string>)).filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid).map(Number)
      : await processesOf(uid)
    const found: Array<number> = []
    await Promise.all(candidates.map(async (pid) => {
      const environ = await fs.readFile(`/proc/${pid}/environ`).catch(() => undefined)
      if (environ !== undefined && environ.includes(needle)) found.push(pid)
    }))
    if (found.length === 0) return
    for (const pid of found) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // Gone meanwhile.
      }
    }
    await new Promise<void>((resolve) => setTimeout(resolve, 10))
  }
}
