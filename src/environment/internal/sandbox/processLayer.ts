/**
 * The sandbox of real processes: detection of what this machine offers (once), workspaces on disk, and each run
 * wrapped with the platform's isolation and limits, under a pooled uid when we are root. With a scope (`makeScoped`),
 * a pool of pre-made workspaces whose launcher is already wrapped so (`Platform.launcher`) and only execs the command.
 *
 * It fails closed: without working isolation it is not built (`isolation_unavailable`), unless the caller chose
 * `isolation: "process"` — plain processes, which can read what the user can, write outside the workspace and reach
 * the network.
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs/promises"
import { homedir, tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Result, Scope } from "effect"
import type { Files, Info, Options, RunRequest, SandboxResult, Service, Workspace, WorkspaceOptions } from "./types.js"
import { defaultAllow, SandboxError } from "./types.js"
import * as Platform from "./platform.js"
import * as Process from "./process.js"
import { checkCommand, checkTaskId, ioError, makeLocks, refusal, refused, timeoutOr } from "./shared.js"
import * as Snapshot from "./snapshot.js"
import * as Workspaces from "./workspace.js"

const baseEnv = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"]

/** Where the layer looks for programs on this machine; tests replace it to play a machine without one. */
export interface Host {
  /** The PATH programs are looked up on (and that commands get). */
  readonly path: string
  /** The `ast-grep` of the `@ast-grep/cli` package, if installed. */
  readonly packagedAstGrep: () => Promise<string | undefined>
}

/** This machine: our PATH, `@ast-grep/cli` resolved from valet or the working directory. */
export const host = (): Host => ({
  path: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
  packagedAstGrep: () => Platform.packagedAstGrep()
})

/** Builds a sandbox of real processes from decoded options: finds what this machine offers, resolves the allow-list. */
export const make = (valid: Options, machine: Host = host()): Effect.Effect<Service, SandboxError> => build(valid, machine, undefined)

/**
 * `make` with a pool of pre-made workspaces (`poolSize`, default 2): empty directories whose launcher already runs
 * (isolation, limits and uid in place), refilled in the background, all removed when the scope closes.
 */
export const makeScoped = (valid: Options, machine: Host = host()): Effect.Effect<Service, SandboxError, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) => build(valid, machine, { size: valid.poolSize ?? defaultPoolSize, scope }))

/** Pre-made workspaces kept ready by the layers unless `poolSize` says otherwise. */
export const defaultPoolSize = 2

const build = (
  valid: Options,
  machine: Host,
  pool: { readonly size: number; readonly scope: Scope.Scope } | undefined
): Effect.Effect<Service, SandboxError> =>
  Effect.gen(function*() {
    const hostPath = machine.path
    const detected = yield* Effect.promise(() =>
      Platform.detect(valid.isolation ?? "auto", hostPath, valid.dropPrivileges ?? true)
    )
    if (detected instanceof Platform.Unavailable) {
      const asked = valid.isolation ?? "auto"
      return yield* new SandboxError({
        reason: "isolation_unavailable",
        message: `Sandbox: no isolation available for isolation "${asked}": ${detected.why}. Install bubblewrap and ` +
          `allow user namespaces, or opt into plain, unisolated processes with isolation: "process" ` +
          `(VALET_SANDBOX_ISOLATION=process)`
      })
    }
    const platform = detected
    const workRoot = yield* Effect.tryPromise({
      try: async () => {
        const root = valid.workRoot ?? join(tmpdir(), `valet-sandbox-${process.geteuid?.() ?? "user"}`)
        await fs.mkdir(join(root, "kept"), { recursive: true })
        // Searchable, not listable: pooled uids reach their own workspace, not the names of the others.
        await fs.chmod(root, 0o711)
        await fs.chmod(join(root, "kept"), 0o711)
        return fs.realpath(root)
      },
      catch: ioError("cannot create the sandbox work root")
    })

    const packagedAstGrep = yield* Effect.promise(() => machine.packagedAstGrep())
    const packaged = new Map<string, string>(packagedAstGrep !== undefined ? [["ast-grep", packagedAstGrep]] : [])
    const allowedNames = valid.allow ?? defaultAllow
    const allowed: Array<{ name: string; path: string }> = []
    const missing: Array<string> = []
    const allowedReal = new Set<string>()
    for (const name of allowedNames) {
      const located = yield* Effect.promise(() => Platform.locate(name, hostPath, "/", packaged))
      const real = located !== undefined ? yield* Effect.promise(() => Platform.realExecutable(located)) : undefined
      if (real === undefined) missing.push(name)
      else {
        allowed.push({ name, path: real })
        allowedReal.add(real)
      }
    }
    // What bwrap shows of the allowed programs: their install prefixes, never a home, the project or the work root.
    const avoid = { workRoot, cwd: process.cwd(), home: homedir() }
    const programs = [...new Set([...allowedReal].map((real) => Platform.shownFor(real, avoid)))]

    const limits: Platform.Limits = {
      cpuSeconds: valid.limits?.cpuSeconds ?? 60,
      memoryBytes: valid.limits?.memoryBytes ?? 2 * 1024 ** 3,
      maxProcesses: valid.limits?.maxProcesses ?? 256,
      maxFileBytes: valid.limits?.maxFileBytes ?? 256 * 1024 ** 2,
      maxOpenFiles: valid.limits?.maxOpenFiles ?? 1024
    }
    const timeoutMs = valid.timeoutMs ?? 30_000
    const graceMs = valid.graceMs ?? 1_000
    const maxOutputBytes = valid.maxOutputBytes ?? 64 * 1024
    const snapshotLimits = { maxDiffBytes: valid.maxDiffFileBytes ?? 256 * 1024, maxFiles: valid.maxDiffFiles ?? 10_000 }
    const env: Record<string, string> = {}
    for (const name of [...baseEnv, ...(valid.passEnv ?? [])]) {
      const value = name === "PATH" ? hostPath : process.env[name]
      if (value !== undefined) env[name] = value
    }
    Object.assign(env, { PYTHONUNBUFFERED: "1", PYTHONDONTWRITEBYTECODE: "1" }, valid.env ?? {})

    // Uids in use by runs of this layer; each run takes its own, so its process count is its own.
    const uidStart = valid.uidRange?.start ?? 1_800_000_000
    const uidSize = valid.uidRange?.size ?? 65_536
    const uidsInUse = new Set<number>()
    let nextUid = Math.floor(Math.random() * uidSize)
    const takeUid = Effect.sync(() => {
      for (let i = 0; i < uidSize; i++) {
        const uid = uidStart + ((nextUid + i) % uidSize)
        if (!uidsInUse.has(uid)) {
          uidsInUse.add(uid)
          nextUid = (nextUid + i + 1) % uidSize
          return uid
        }
      }
      return undefined
    })
    const pooled = platform.setpriv !== undefined
    const readSearch = pooled && platform.isolation === "process" && !(yield* Effect.promise(() => Platform.reachableByAnyone([...allowedReal])))

    const lockOf = makeLocks()
    const live = new WeakSet<Workspace>()

    const info: Info = {
      isolation: platform.isolation,
      bwrapUnavailable: platform.bwrapUnavailable,
      readOnlyPaths: platform.isolation === "bwrap" ? Platform.shownPaths(platform, programs) : undefined,
      limiter: platform.limiter?.kind ?? "none",
      pooledUids: pooled,
      processLimitEnforced: platform.processLimitEnforced,
      allowed,
      missing,
      workRoot
    }

    const releaseUid = (uid: number | undefined) => Effect.sync(() => uid !== undefined && uidsInUse.delete(uid))
    const baseEnvOf = (path: string, runId: string | undefined): Record<string, string> => ({
      ...env,
      HOME: path,
      PWD: path,
      ...(runId !== undefined ? { [Platform.runMarker]: runId } : {})
    })

    // -------------------------------------------------------------------------------------------------------
    // Pre-made workspaces: an empty directory, its uid, and its launcher (bwrap, limits and setpriv already
    // applied, `sh` waiting for the command). Taken by `workspace`, used by the workspace's first run.
    // -------------------------------------------------------------------------------------------------------
    interface Premade {
      readonly path: string
      readonly uid: number | undefined
      readonly runId: string | undefined
      readonly launcher: Process.Prestarted
      /** The sweep of what its run left outside its group, when one was started (process mode): the uid waits for it. */
      reaping?: Promise<void> | undefined
    }
    const ready: Array<Premade> = []
    let filling = 0
    let poolClosed = false
    /** Work left running in the background (directories being deleted, sweeps), awaited when the pool closes. */
    const removals = new Set<Promise<void>>()
    const inBackground = (work: Promise<void>): Promise<void> => {
      removals.add(work)
      void work.then(() => removals.delete(work))
      return work
    }
    /** Kills an unused launcher, gives its uid back, removes its directory. */
    const dispose = (premade: Premade) =>
      Effect.promise(async () => {
        await Process.discard(premade.launcher)
        // Gone from its path now; its files deleted in the background, awaited when the pool closes.
        inBackground((await Workspaces.removeLater(premade.path)).done)
        // The uid is given back once nothing of its run can be left: after the sweep, when one runs.
        if (premade.reaping !== undefined) {
          void inBackground(premade.reaping.then(() => void (premade.uid !== undefined && uidsInUse.delete(premade.uid))))
        } else if (premade.uid !== undefined) uidsInUse.delete(premade.uid)
      })
    const premake: Effect.Effect<Premade | undefined> = Effect.gen(function*() {
      const uid = pooled ? yield* takeUid : undefined
      const runId = platform.isolation === "process" ? randomUUID() : undefined
      const made = yield* Effect.promise(async () => {
        const path = await fs.mkdtemp(join(workRoot, "ws-")).catch(() => undefined)
        if (path === undefined) return undefined
        const argv = Platform.launcher(platform, { workspace: path, programs, limits, uid, readSearch })
        if (argv === undefined) {
          await Workspaces.remove(path).catch(() => undefined)
          return undefined
        }
        try {
          // Handed to the uid now, so that the launcher (as that uid) can enter it; seeded files are handed at the run.
          if (uid !== undefined) await fs.chown(path, uid, uid)
          return { path, uid, runId, launcher: Process.prestart(argv[0]!, argv.slice(1), path, baseEnvOf(path, runId)) }
        } catch {
          // No pre-made workspace then: workspaces are made when asked for, as without a pool.
          await Workspaces.remove(path).catch(() => undefined)
          return undefined
        }
      })
      if (made === undefined) yield* releaseUid(uid)
      return made
    })
    const refill = (scope: Scope.Scope, size: number) =>
      Effect.gen(function*() {
        while (!poolClosed && ready.length + filling < size) {
          filling++
          // Uninterruptible: a launcher spawned is always either pooled or disposed, also when the scope closes.
          yield* Effect.forkIn(
            Effect.uninterruptible(Effect.flatMap(premake, (premade) =>
              Effect.suspend(() => {
                filling--
                if (premade === undefined) return Effect.void
                if (poolClosed) return dispose(premade)
                ready.push(premade)
                return Effect.void
              }))),
            scope
          )
        }
      })
    /**
     * A pre-made workspace whose launcher still waits; none when the pool is empty. The pool is refilled when the
     * workspace is closed (`refillLater`), not now: launchers spawned beside its run would slow the very run the pool
     * is for (by 3–6 ms of a 14 ms `ast-grep --version` on two busy cores). An empty pool is refilled at once.
     */
    const takePremade: Effect.Effect<Premade | undefined> = Effect.gen(function*() {
      if (pool === undefined || pool.size === 0) return undefined
      let taken: Premade | undefined
      while (taken === undefined && ready.length > 0) {
        const next = ready.shift()!
        if (Process.waiting(next.launcher)) taken = next
        else yield* dispose(next)
      }
      if (taken === undefined) yield* refill(pool.scope, pool.size)
      return taken
    })
    const refillLater: Effect.Effect<void> = Effect.suspend(() =>
      pool !== undefined && pool.size > 0 ? refill(pool.scope, pool.size) : Effect.void
    )
    if (pool !== undefined && pool.size > 0) {
      yield* Scope.addFinalizer(pool.scope, Effect.suspend(() => {
        poolClosed = true
        return Effect.forEach(ready.splice(0), dispose, { concurrency: "unbounded", discard: true }).pipe(
          Effect.andThen(Effect.promise(() => Promise.all([...removals])))
        )
      }))
      yield* refill(pool.scope, pool.size)
    }
    /** The unused launcher of each workspace made from the pool, for its first run. */
    const launchers = new Map<Workspace, Premade>()

    const workspace = (taskId: string, files: Files = {}, wsOptions?: WorkspaceOptions) =>
      Effect.gen(function*() {
        yield* checkTaskId(taskId)
        const keep = wsOptions?.keep === true
        let path: string
        let premade: Premade | undefined
        // A kept workspace reopened with `seedOnce` is not seeded again.
        let reopened = false
        if (keep) {
          yield* lockOf(taskId).takeScoped(1)
          path = join(workRoot, "kept", taskId)
          // `mkdir` answers the first directory it made: undefined when the workspace was already there.
          const made = yield* Effect.tryPromise({ try: () => fs.mkdir(path, { recursive: true }), catch: ioError("cannot create the workspace", taskId) })
          reopened = made === undefined
        } else {
          premade = yield* Effect.acquireRelease(takePremade, (taken) =>
            // Its launcher when no run used it (a run's own release killed it otherwise); its directory always.
            taken !== undefined ? Effect.andThen(dispose(taken), refillLater) : Effect.void)
          path = premade?.path ?? (yield* Effect.acquireRelease(
            Effect.tryPromise({
              try: () => fs.mkdtemp(join(workRoot, `${taskId}-`)),
              catch: ioError("cannot create the workspace", taskId)
            }),
            (dir) => Effect.promise(() => Workspaces.remove(dir).catch(() => undefined))
          ))
        }
        const refused = reopened && wsOptions?.seedOnce === true ? undefined : yield* Effect.tryPromise({
          try: () => Workspaces.seed(path, Object.entries(files), keep),
          catch: ioError("cannot seed the workspace", taskId)
        })
        if (refused !== undefined) return yield* refusal(taskId, refused)
        const ws: Workspace = { taskId, path, kept: keep }
        live.add(ws)
        if (premade !== undefined) launchers.set(ws, premade)
        yield* Effect.addFinalizer(() => Effect.sync(() => {
          live.delete(ws)
          launchers.delete(ws)
        }))
        return ws
      })

    const run = (ws: Workspace, request: RunRequest): Effect.Effect<SandboxResult, SandboxError> =>
      Effect.gen(function*() {
        if (!live.has(ws)) {
          return yield* new SandboxError({
            reason: "workspace_closed",
            taskId: ws.taskId,
            path: ws.path,
            message: `workspace ${ws.path} of task ${ws.taskId} is closed (its scope ended) or was not made by this sandbox`
          })
        }
        const checked = checkCommand(request.command)
        if (Result.isFailure(checked)) return checked.failure
        const command = checked.success
        const program = command[0]!
        const located = yield* Effect.promise(() => Platform.locate(program, hostPath, ws.path, packaged))
        const real = located !== undefined ? yield* Effect.promise(() => Platform.realExecutable(located)) : undefined
        if (located === undefined || real === undefined || !allowedReal.has(real)) {
          const why = located === undefined || real === undefined
            ? `${program}: no such program`
            : `${program} resolves to ${real}, which is not allowed`
          return refused(command, 126, "not_allowed", `not_allowed: ${why} (allowed: ${allowedNames.join(", ")})\n`)
        }
        const timeout = timeoutOr(request.timeoutMs, timeoutMs)
        const withDiff = request.diff ?? true
        // The workspace's launcher, if it came from the pool and still waits: its first run only (it runs one command).
        const premade = launchers.get(ws)
        launchers.delete(ws)
        const launcher = premade !== undefined && Process.waiting(premade.launcher) &&
            Platform.launcherRuns(platform, programs, ws.path, located)
          ? premade
          : undefined
        return yield* Effect.scoped(Effect.gen(function*() {
          const uid = launcher !== undefined
            ? launcher.uid
            : pooled
            ? yield* Effect.acquireRelease(takeUid, releaseUid)
            : undefined
          const before = withDiff
            ? yield* Effect.tryPromise({ try: () => Snapshot.take(ws.path, snapshotLimits), catch: ioError("cannot read the workspace", ws.taskId) })
            : undefined
          if (uid !== undefined) {
            yield* Effect.tryPromise({ try: () => Workspaces.chownTree(ws.path, uid), catch: ioError("cannot hand the workspace to the sandbox user", ws.taskId) })
          }
          const argv = launcher !== undefined
            ? [located]
            : Platform.wrap(platform, { program: located, real, args: command.slice(1), workspace: ws.path, programs, limits, uid, readSearch })
          // In bwrap, what the command leaves behind dies with its pid namespace. Outside, a process that left the
          // group (setsid, a double fork) is found by the run's uid and by a variable only this run's processes carry.
          const runId = launcher !== undefined ? launcher.runId : platform.isolation === "process" ? randomUUID() : undefined
          let swept = false
          const sweepLeftovers = () => {
            if (swept || launcher === undefined || runId === undefined) return
            swept = true
            launcher.reaping = inBackground(Platform.reap(platform, runId, uid).catch(() => undefined))
          }
          // However the run ends (interrupted too), the sweep is started by the end of it.
          yield* Effect.addFinalizer(() => Effect.sync(sweepLeftovers))
          const outcome = yield* Process.run({
            file: argv[0]!,
            args: argv.slice(1),
            ...(launcher !== undefined ? { started: launcher.launcher, input: Platform.launch(located, command.slice(1)) } : {}),
            cwd: ws.path,
            env: baseEnvOf(ws.path, runId),
            timeoutMs: timeout,
            graceMs,
            maxOutputBytes,
            // The command (in a session of its own) gets the SIGTERM of a timeout; bwrap, in our group, would end at once.
            terminateDescendants: platform.isolation === "bwrap",
            ...(runId !== undefined
              ? {
                reap: launcher !== undefined
                  // A pre-made workspace's run: the /proc scan for what left its group runs after the answer, not
                  // before it (its group is killed at exit all the same), or 25 ms after the exit when the answer is
                  // not ready by then (what it finds may hold the pipes). Started at once, its 100-odd stats would queue
                  // ahead of the diff's reads. The uid is not given back, nor the pool closed, before it is done.
                  ? () => {
                    setTimeout(sweepLeftovers, 25).unref()
                    return Promise.resolve()
                  }
                  : () => Platform.reap(platform, runId, uid)
              }
              : {})
          })
          let changes: Snapshot.Changes | undefined
          if (before !== undefined) {
            const after = yield* Effect.tryPromise({ try: () => Snapshot.take(ws.path, snapshotLimits), catch: ioError("cannot read the workspace", ws.taskId) })
            changes = before.complete && after.complete ? Snapshot.compare(before, after) : undefined
          }
          const result: SandboxResult = {
            command,
            exitCode: outcome.exitCode,
            stdout: outcome.stdout,
            stderr: outcome.spawnError !== undefined ? `spawn_failed: ${outcome.spawnError}\n` : outcome.stderr,
            durationMs: outcome.durationMs,
            timedOut: outcome.timedOut,
            ...(outcome.timedOut ? { error: "timeout" as const } : outcome.spawnError !== undefined ? { error: "spawn_failed" as const } : {}),
            ...(outcome.signal !== undefined ? { signal: outcome.signal } : {}),
            isolation: platform.isolation,
            ...(outcome.stdoutTruncated ? { stdoutTruncated: true } : {}),
            ...(outcome.stderrTruncated ? { stderrTruncated: true } : {}),
            ...(changes !== undefined ? { diff: changes.diff, changedFiles: changes.changedFiles } : {})
          }
          return result
        }))
      }).pipe(Effect.withSpan("valet/Sandbox.run"))

    const discard = (taskId: string) =>
      Effect.gen(function*() {
        yield* checkTaskId(taskId)
        yield* lockOf(taskId).withPermits(1)(
          Effect.tryPromise({ try: () => Workspaces.remove(join(workRoot, "kept", taskId)), catch: ioError("cannot remove the kept workspace", taskId) })
        )
      })

    return { info, workspace, run, discard } satisfies Service
  })
