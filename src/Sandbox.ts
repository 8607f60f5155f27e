/**
 * `Sandbox` runs commands for agents inside a per-task workspace: only allow-listed programs (checked on the
 * resolved executable), a scrubbed environment, CPU / memory / process / file-size limits, capped output, a
 * timeout that kills the whole process group (SIGTERM, then SIGKILL), and a unified diff of what the command
 * changed. Where bubblewrap works, commands also run without network, on a read-only system, with only their
 * workspace writable; every result says which isolation was used.
 *
 * A command from a model is `unknown`: `run` decodes it, and a bad or refused one is a result (exit 127
 * `invalid_command`, exit 126 `not_allowed`), never a failure. Failures (`SandboxError`) are reserved for the
 * workspace itself: an unsafe task id or path, a closed workspace, a disk error.
 *
 * @since 0.1.0
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as fs from "node:fs/promises"
import { Config, Context, Effect, Either, Layer, Option, ParseResult, Schema, type Scope } from "effect"
import * as Platform from "./internal/sandbox/platform.js"
import * as Process from "./internal/sandbox/process.js"
import * as Snapshot from "./internal/sandbox/snapshot.js"
import * as Workspaces from "./internal/sandbox/workspace.js"
import { describeUnsafeTaskId, isSafeTaskId } from "./internal/taskId.js"

// ---------------------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------------------

/** Seed files of a workspace: relative path → content. */
export const Files = Schema.Record({ key: Schema.String, value: Schema.String })
/** Seed files of a workspace: relative path → content. */
export type Files = typeof Files.Type

/** Why a command did not run normally. */
export const ErrorKind = Schema.Literal("not_allowed", "invalid_command", "timeout", "spawn_failed")
/** Why a command did not run normally. */
export type ErrorKind = typeof ErrorKind.Type

/** How a command was isolated: bubblewrap, a plain process group, not run at all (refused), or the test layer. */
export const Isolation = Schema.Literal("bwrap", "process", "none", "test")
/** How a command was isolated. */
export type Isolation = typeof Isolation.Type

/**
 * What a command did. Exit code 124 with `timedOut` on timeout, 126 `not_allowed`, 127 `invalid_command` (or
 * `spawn_failed`), 128 + n when signal n ended it. `diff` and `changedFiles` describe the workspace after the
 * command. The encoded form (JSON on disk) is snake case.
 */
export const SandboxResult = Schema.Struct({
  command: Schema.Array(Schema.String),
  exitCode: Schema.propertySignature(Schema.Int).pipe(Schema.fromKey("exit_code")),
  stdout: Schema.String,
  stderr: Schema.String,
  durationMs: Schema.propertySignature(Schema.Number).pipe(Schema.fromKey("duration_ms")),
  timedOut: Schema.propertySignature(Schema.Boolean).pipe(Schema.fromKey("timed_out")),
  error: Schema.optional(ErrorKind),
  signal: Schema.optional(Schema.String),
  isolation: Isolation,
  stdoutTruncated: Schema.optional(Schema.Boolean).pipe(Schema.fromKey("stdout_truncated")),
  stderrTruncated: Schema.optional(Schema.Boolean).pipe(Schema.fromKey("stderr_truncated")),
  diff: Schema.optional(Schema.String),
  changedFiles: Schema.optional(Schema.Array(Schema.String)).pipe(Schema.fromKey("changed_files"))
})
/** What a command did. */
export type SandboxResult = typeof SandboxResult.Type

/** A command as a model must write it: a non-empty list of strings, no NUL bytes. */
export const Command = Schema.NonEmptyArray(
  Schema.String.pipe(Schema.filter((arg) => !arg.includes("\0") || "an argument contains a NUL byte"))
)

/** A workspace: a directory that lives as long as the scope it was made in (or, kept, across steps). */
export interface Workspace {
  readonly taskId: string
  readonly path: string
  /** Kept across the steps of a task (`workspace(…, { keep: true })`): not removed when the scope closes. */
  readonly kept: boolean
}

/** Options of `workspace`. */
export interface WorkspaceOptions {
  /**
   * Keep one workspace for the task across steps: the first call creates and seeds it; later calls reuse it
   * as the earlier commands left it (seed files that exist are not overwritten). One scope at a time holds it;
   * `discard(taskId)` removes it.
   */
  readonly keep?: boolean
}

/** A command to run. `command` is what a model wrote, decoded here. */
export interface RunRequest {
  readonly command: unknown
  /** Default: the layer's `timeoutMs`. */
  readonly timeoutMs?: number
  /** Snapshot the workspace and answer `diff` / `changedFiles` (default true). */
  readonly diff?: boolean
}

/** A workspace could not be made, seeded or used, or the sandbox could not be set up. */
export class SandboxError extends Schema.TaggedError<SandboxError>()("SandboxError", {
  reason: Schema.Literal(
    "unsafe_task_id",
    "absolute_path",
    "parent_path",
    "invalid_path",
    "symlink_escape",
    "workspace_closed",
    "io",
    "unavailable",
    "invalid_options"
  ),
  taskId: Schema.optional(Schema.String),
  path: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** What isolation and limits this machine gave the sandbox. */
export interface Info {
  readonly isolation: "bwrap" | "process" | "test"
  /** Why bwrap is not used, when it is not. */
  readonly bwrapUnavailable: string | undefined
  readonly limiter: "prlimit" | "ulimit" | "none"
  /** Whether commands run under pooled unprivileged uids (because we are root). */
  readonly pooledUids: boolean
  /** Whether `limits.maxProcesses` holds (it cannot for root processes, or without a user namespace). */
  readonly processLimitEnforced: boolean
  /** The allowed programs found, with the executables they resolve to. */
  readonly allowed: ReadonlyArray<{ readonly name: string; readonly path: string }>
  /** Allowed names not found on this machine. */
  readonly missing: ReadonlyArray<string>
  readonly workRoot: string
}

/** What a sandbox implements. */
export interface Service {
  readonly info: Info
  readonly workspace: (
    taskId: string,
    files?: Files,
    options?: WorkspaceOptions
  ) => Effect.Effect<Workspace, SandboxError, Scope.Scope>
  readonly run: (workspace: Workspace, request: RunRequest) => Effect.Effect<SandboxResult, SandboxError>
  /** Removes a kept workspace (waiting for a scope that holds it). */
  readonly discard: (taskId: string) => Effect.Effect<void, SandboxError>
}

/** The sandbox service. */
export class Sandbox extends Context.Tag("valet/Sandbox")<Sandbox, Service>() {}

// ---------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** Options of `layerProcess`; every one has a default. */
export const Options = Schema.Struct({
  /** Where workspaces are made (default `<os tmpdir>/valet-sandbox`). */
  workRoot: Schema.optional(Schema.String),
  /** Programs that may run (default `ast-grep`, `python3`, `python`, `pytest`, `node`). */
  allow: Schema.optional(Schema.Array(Schema.String)),
  /** `auto` (default): bwrap when it works here, else processes; `bwrap`: fail to build without it. */
  isolation: Schema.optional(Schema.Literal("auto", "bwrap", "process")),
  /** Default timeout of a command (default 30 s). */
  timeoutMs: Schema.optional(PositiveInt),
  /** SIGTERM → SIGKILL delay (default 1 s). */
  graceMs: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Cap of stdout and of stderr, each (default 64 KiB). */
  maxOutputBytes: Schema.optional(PositiveInt),
  limits: Schema.optional(Schema.Struct({
    /** CPU seconds (default 60). */
    cpuSeconds: Schema.optional(PositiveInt),
    /** Address space (default 2 GiB). */
    memoryBytes: Schema.optional(PositiveInt),
    /** Processes and threads of one command (default 256). */
    maxProcesses: Schema.optional(PositiveInt),
    /** Largest file a command may write (default 256 MiB). */
    maxFileBytes: Schema.optional(PositiveInt),
    /** Open files (default 1024). */
    maxOpenFiles: Schema.optional(PositiveInt)
  })),
  /** Variables set for every command (after the scrubbed base: PATH, LANG, LC_*, TZ, HOME = the workspace). */
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** More variables copied from our environment. */
  passEnv: Schema.optional(Schema.Array(Schema.String)),
  /** Files larger than this are listed in `changedFiles` without a diff (default 256 KiB). */
  maxDiffFileBytes: Schema.optional(PositiveInt),
  /** Workspaces with more files than this get no diff (default 10,000). */
  maxDiffFiles: Schema.optional(PositiveInt),
  /** When root, run commands under pooled unprivileged uids (default true; see `Info.pooledUids`). */
  dropPrivileges: Schema.optional(Schema.Boolean),
  /** The uid pool (default 65,536 uids from 1,800,000,000). */
  uidRange: Schema.optional(Schema.Struct({ start: PositiveInt, size: PositiveInt }))
})
/** Options of `layerProcess`. */
export type Options = typeof Options.Type

/** The programs allowed by default. */
export const defaultAllow: ReadonlyArray<string> = ["ast-grep", "python3", "python", "pytest", "node"]

const baseEnv = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"]

const decodeCommand = Schema.decodeUnknownEither(Command)

/** A result for a command that did not run. */
const refused = (
  command: ReadonlyArray<string>,
  exitCode: number,
  error: ErrorKind,
  stderr: string
): SandboxResult => ({ command, exitCode, stdout: "", stderr, durationMs: 0, timedOut: false, error, isolation: "none" })

/** Checks a command from a model: a list of strings, else exit 127 `invalid_command`. */
const checkCommand = (command: unknown): Either.Either<ReadonlyArray<string>, SandboxResult> =>
  Either.mapLeft(decodeCommand(command), (error) =>
    refused(
      [],
      127,
      "invalid_command",
      `invalid_command: a command is a non-empty list of strings, got ${preview(command)}: ${ParseResult.TreeFormatter.formatErrorSync(error)}\n`
    ))

const preview = (value: unknown): string => {
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 120 ? `${text.slice(0, 119)}…` : text
}

const ioError = (what: string, taskId?: string) => (cause: unknown) =>
  new SandboxError({
    reason: "io",
    ...(taskId !== undefined ? { taskId } : {}),
    message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`
  })

const refusal = (taskId: string, refused: Workspaces.PathRefused) =>
  new SandboxError({ reason: refused.reason, taskId, path: refused.path, message: refused.message })

const checkTaskId = (taskId: string): Effect.Effect<void, SandboxError> =>
  isSafeTaskId(taskId)
    ? Effect.void
    : Effect.fail(new SandboxError({ reason: "unsafe_task_id", taskId, message: describeUnsafeTaskId(taskId) }))

/** One lock per kept workspace, created on first use. */
const makeLocks = () => {
  const locks = new Map<string, Effect.Semaphore>()
  return (taskId: string): Effect.Semaphore => {
    let lock = locks.get(taskId)
    if (lock === undefined) {
      lock = Effect.unsafeMakeSemaphore(1)
      locks.set(taskId, lock)
    }
    return lock
  }
}

// ---------------------------------------------------------------------------------------------------------
// Real processes
// ---------------------------------------------------------------------------------------------------------

/** Builds a sandbox of real processes: finds what isolation this machine offers and resolves the allow-list. */
export const make = (options: Options = {}): Effect.Effect<Service, SandboxError> =>
  Effect.gen(function*() {
    const valid = yield* Schema.decodeUnknown(Options)(options).pipe(
      Effect.mapError((error) =>
        new SandboxError({ reason: "invalid_options", message: `Sandbox options: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
      )
    )
    const hostPath = process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"
    const detected = yield* Effect.promise(() =>
      Platform.detect(valid.isolation ?? "auto", hostPath, valid.dropPrivileges ?? true)
    )
    if (typeof detected === "string") {
      return yield* new SandboxError({ reason: "unavailable", message: `isolation "bwrap" was asked for, but ${detected}` })
    }
    const platform = detected
    const workRoot = yield* Effect.tryPromise({
      try: async () => {
        const root = valid.workRoot ?? join(tmpdir(), "valet-sandbox")
        await fs.mkdir(join(root, "kept"), { recursive: true })
        // Searchable, not listable: pooled uids reach their own workspace, not the names of the others.
        await fs.chmod(root, 0o711)
        await fs.chmod(join(root, "kept"), 0o711)
        return fs.realpath(root)
      },
      catch: ioError("cannot create the sandbox work root")
    })

    const packagedAstGrep = yield* Effect.promise(Platform.packagedAstGrep)
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
      const value = process.env[name]
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

    const lockOf = makeLocks()
    const live = new WeakSet<Workspace>()

    const info: Info = {
      isolation: platform.isolation,
      bwrapUnavailable: platform.bwrapUnavailable,
      limiter: platform.limiter?.kind ?? "none",
      pooledUids: pooled,
      processLimitEnforced: platform.processLimitEnforced,
      allowed,
      missing,
      workRoot
    }

    const workspace = (taskId: string, files: Files = {}, wsOptions?: WorkspaceOptions) =>
      Effect.gen(function*() {
        yield* checkTaskId(taskId)
        const keep = wsOptions?.keep === true
        let path: string
        if (keep) {
          const lock = lockOf(taskId)
          yield* Effect.acquireRelease(lock.take(1), () => lock.release(1))
          path = join(workRoot, "kept", taskId)
          yield* Effect.tryPromise({ try: () => fs.mkdir(path, { recursive: true }), catch: ioError("cannot create the workspace", taskId) })
        } else {
          path = yield* Effect.acquireRelease(
            Effect.tryPromise({
              try: () => fs.mkdtemp(join(workRoot, `${taskId}-`)),
              catch: ioError("cannot create the workspace", taskId)
            }),
            (dir) => Effect.promise(() => Workspaces.remove(dir).catch(() => undefined))
          )
        }
        const refused = yield* Effect.tryPromise({
          try: () => Workspaces.seed(path, Object.entries(files), keep),
          catch: ioError("cannot seed the workspace", taskId)
        })
        if (refused !== undefined) return yield* refusal(taskId, refused)
        const ws: Workspace = { taskId, path, kept: keep }
        live.add(ws)
        yield* Effect.addFinalizer(() => Effect.sync(() => live.delete(ws)))
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
        if (Either.isLeft(checked)) return checked.left
        const command = checked.right
        const program = command[0]!
        const located = yield* Effect.promise(() => Platform.locate(program, hostPath, ws.path, packaged))
        const real = located !== undefined ? yield* Effect.promise(() => Platform.realExecutable(located)) : undefined
        if (located === undefined || real === undefined || !allowedReal.has(real)) {
          const why = located === undefined || real === undefined
            ? `${program}: no such program`
            : `${program} resolves to ${real}, which is not allowed`
          return refused(command, 126, "not_allowed", `not_allowed: ${why} (allowed: ${allowedNames.join(", ")})\n`)
        }
        const timeout = request.timeoutMs ?? timeoutMs
        const withDiff = request.diff ?? true
        return yield* Effect.scoped(Effect.gen(function*() {
          const uid = pooled ? yield* Effect.acquireRelease(takeUid, (uid) => Effect.sync(() => uid !== undefined && uidsInUse.delete(uid))) : undefined
          const before = withDiff
            ? yield* Effect.tryPromise({ try: () => Snapshot.take(ws.path, snapshotLimits), catch: ioError("cannot read the workspace", ws.taskId) })
            : undefined
          if (uid !== undefined) {
            yield* Effect.tryPromise({ try: () => Workspaces.chownTree(ws.path, uid), catch: ioError("cannot hand the workspace to the sandbox user", ws.taskId) })
          }
          const argv = Platform.wrap(platform, { program: located, args: command.slice(1), workspace: ws.path, workRoot, limits, uid })
          const outcome = yield* Process.run({
            file: argv[0]!,
            args: argv.slice(1),
            cwd: ws.path,
            env: { ...env, HOME: ws.path, PWD: ws.path },
            timeoutMs: timeout,
            graceMs,
            maxOutputBytes,
            // Outside bwrap's pid namespace, a process that left the group (setsid) is found by its uid.
            ...(uid !== undefined && platform.isolation === "process" ? { cleanup: () => Platform.sweepUid(platform, uid) } : {})
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

/** The sandbox of real processes (the default), built with `options`. */
export const layerProcess = (options: Options = {}): Layer.Layer<Sandbox, SandboxError> => Layer.effect(Sandbox, make(options))

/**
 * `layerProcess` configured from the environment: `VALET_SANDBOX_ROOT` (work root), `VALET_SANDBOX_ISOLATION`
 * (`auto` | `bwrap` | `process`), `VALET_SANDBOX_TIMEOUT_MS`; `options` fill in the rest.
 */
export const layerProcessConfig = (options: Options = {}): Layer.Layer<Sandbox, SandboxError | import("effect/ConfigError").ConfigError> =>
  Layer.effect(
    Sandbox,
    Effect.gen(function*() {
      const root = yield* Config.option(Config.string("VALET_SANDBOX_ROOT"))
      const isolation = yield* Config.option(Config.literal("auto", "bwrap", "process")("VALET_SANDBOX_ISOLATION"))
      const timeout = yield* Config.option(Config.integer("VALET_SANDBOX_TIMEOUT_MS"))
      return yield* make({
        ...options,
        ...Option.match(root, { onNone: () => ({}), onSome: (workRoot) => ({ workRoot }) }),
        ...Option.match(isolation, { onNone: () => ({}), onSome: (isolation) => ({ isolation }) }),
        ...Option.match(timeout, { onNone: () => ({}), onSome: (timeoutMs) => ({ timeoutMs }) })
      })
    })
  )

// ---------------------------------------------------------------------------------------------------------
// Test layer
// ---------------------------------------------------------------------------------------------------------

/** What the test layer's responder sees: the decoded, allowed command and the (virtual) workspace's files. */
export interface TestCall {
  readonly command: ReadonlyArray<string>
  readonly workspace: Workspace
  readonly files: Readonly<Record<string, string>>
  readonly timeoutMs: number | undefined
}

/** How the test layer answers a command: parts of a result (the rest defaults to a silent exit 0). */
export type TestResponder = (call: TestCall) => Partial<SandboxResult> | Effect.Effect<Partial<SandboxResult>>

/**
 * A sandbox with scripted results and no processes or directories. Commands are decoded and allow-listed by
 * name exactly like the real layer (127 `invalid_command`, 126 `not_allowed`); task ids and seed paths are
 * checked the same way (symbolic links aside: there are none).
 */
export const layerTest = (
  respond: TestResponder = () => ({}),
  options?: { readonly allow?: ReadonlyArray<string> }
): Layer.Layer<Sandbox> =>
  Layer.sync(Sandbox, () => {
    const allow = new Set(options?.allow ?? defaultAllow)
    const contents = new Map<Workspace, Record<string, string>>()
    const kept = new Map<string, Record<string, string>>()
    const lockOf = makeLocks()
    let counter = 0
    const info: Info = {
      isolation: "test",
      bwrapUnavailable: "test layer",
      limiter: "none",
      pooledUids: false,
      processLimitEnforced: false,
      allowed: [...allow].map((name) => ({ name, path: name })),
      missing: [],
      workRoot: "/valet-test"
    }
    const workspace = (taskId: string, files: Files = {}, wsOptions?: WorkspaceOptions) =>
      Effect.gen(function*() {
        yield* checkTaskId(taskId)
        const keep = wsOptions?.keep === true
        if (keep) {
          const lock = lockOf(taskId)
          yield* Effect.acquireRelease(lock.take(1), () => lock.release(1))
        }
        const seeded: Record<string, string> = keep ? { ...kept.get(taskId) } : {}
        for (const [path, content] of Object.entries(files)) {
          const normalized = Workspaces.checkRelativePath(path)
          if (normalized instanceof Workspaces.PathRefused) return yield* refusal(taskId, normalized)
          if (!(keep && normalized in seeded)) seeded[normalized] = content
        }
        if (keep) kept.set(taskId, seeded)
        const ws: Workspace = { taskId, path: keep ? `/valet-test/kept/${taskId}` : `/valet-test/${taskId}-${++counter}`, kept: keep }
        contents.set(ws, seeded)
        yield* Effect.addFinalizer(() => Effect.sync(() => contents.delete(ws)))
        return ws
      })
    const run = (ws: Workspace, request: RunRequest) =>
      Effect.gen(function*() {
        const files = contents.get(ws)
        if (files === undefined) {
          return yield* new SandboxError({ reason: "workspace_closed", taskId: ws.taskId, path: ws.path, message: `workspace ${ws.path} is closed` })
        }
        const checked = checkCommand(request.command)
        if (Either.isLeft(checked)) return checked.left
        const command = checked.right
        if (!allow.has(command[0]!)) {
          return refused(command, 126, "not_allowed", `not_allowed: ${command[0]} is not allowed (allowed: ${[...allow].join(", ")})\n`)
        }
        const answer = respond({ command, workspace: ws, files: { ...files }, timeoutMs: request.timeoutMs })
        const parts = Effect.isEffect(answer) ? yield* answer : answer
        const result: SandboxResult = {
          command,
          exitCode: 0,
          stdout: "",
          stderr: "",
          durationMs: 0,
          timedOut: false,
          isolation: "test",
          ...parts
        }
        return result
      })
    const discard = (taskId: string) =>
      Effect.zipRight(checkTaskId(taskId), lockOf(taskId).withPermits(1)(Effect.sync(() => void kept.delete(taskId))))
    return { info, workspace, run, discard } satisfies Service
  })

// ---------------------------------------------------------------------------------------------------------
// Accessors
// ---------------------------------------------------------------------------------------------------------

/** A workspace for `taskId` seeded with `files`, removed when the scope closes (unless kept). */
export const workspace = (
  taskId: string,
  files?: Files,
  options?: WorkspaceOptions
): Effect.Effect<Workspace, SandboxError, Sandbox | Scope.Scope> =>
  Effect.flatMap(Sandbox, (sandbox) => sandbox.workspace(taskId, files, options))

/** Runs a command (as a model wrote it) in a workspace. */
export const run = (workspace: Workspace, request: RunRequest): Effect.Effect<SandboxResult, SandboxError, Sandbox> =>
  Effect.flatMap(Sandbox, (sandbox) => sandbox.run(workspace, request))

/** A fresh workspace, one command, the workspace removed: what a tool call needs. */
export const runOnce = (
  taskId: string,
  files: Files,
  request: RunRequest
): Effect.Effect<SandboxResult, SandboxError, Sandbox> =>
  Effect.scoped(Effect.flatMap(Sandbox, (sandbox) => Effect.flatMap(sandbox.workspace(taskId, files), (ws) => sandbox.run(ws, request))))

/** Removes a kept workspace. */
export const discard = (taskId: string): Effect.Effect<void, SandboxError, Sandbox> =>
  Effect.flatMap(Sandbox, (sandbox) => sandbox.discard(taskId))

/** What isolation and limits the sandbox in context uses. */
export const info: Effect.Effect<Info, never, Sandbox> = Effect.map(Sandbox, (sandbox) => sandbox.info)
