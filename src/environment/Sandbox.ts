/**
 * `Sandbox` runs commands for agents inside a per-task workspace: only allow-listed programs (checked on the
 * resolved executable), a scrubbed environment, CPU / memory / process / file-size limits, capped output, a
 * timeout that kills the whole process group (SIGTERM, then SIGKILL), and a unified diff of what the command
 * changed. A run ends when the command's main process exits: what it left running (detached or not) is killed then.
 *
 * Isolation fails closed. By default (`isolation: "auto"`) commands run in bubblewrap: no network, no other
 * processes, a file system of their own showing only the system directories, the allowed programs' directories
 * (read-only) and their workspace (writable) — not the user's files. Where bubblewrap does not work, building the
 * sandbox fails with `SandboxError` `isolation_unavailable` rather than running unisolated; a caller that accepts
 * plain processes says so with `isolation: "process"` (or `VALET_SANDBOX_ISOLATION=process`). Process mode is not
 * isolation: its commands can read the user's files, write /tmp and reach the network. `info.isolation` and every
 * result say which isolation is used.
 *
 * The layers keep a few workspaces pre-made (`poolSize`, default 2): an empty directory whose process is already
 * started — in bwrap, under the limits and the pooled uid — and waits for its command, which it then execs. A
 * workspace's first run so costs one exec instead of making a directory and starting bwrap, prlimit and setpriv; the
 * pool refills as workspaces close and is removed, processes and directories, with the layer. `diff: false` skips the
 * two snapshots a diff needs; ask for the diff only where it is read.
 *
 * A command from a model is `unknown`: `run` decodes it, and a bad or refused one is a result (exit 127
 * `invalid_command`, exit 126 `not_allowed`), never a failure. Failures (`SandboxError`) are reserved for the
 * workspace itself: an unsafe task id or path, a closed workspace, a disk error.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Sandbox from "valet/Sandbox"
 *
 * // A fresh workspace seeded with one file, one command as a model wrote it, the workspace removed after.
 * const program = Effect.gen(function*() {
 *   const files = { "main.py": "print(6 * 7)\n" }
 *   const result = yield* Sandbox.runOnce("task-1", files, { command: ["python3", "main.py"] })
 *   return result.exitCode === 0 ? result.stdout : `exit ${result.exitCode}: ${result.stderr}`
 * })
 *
 * // Real processes under bubblewrap; building the layer fails with `isolation_unavailable` where it cannot run.
 * const isolated = program.pipe(Effect.provide(Sandbox.layerProcess({ allow: ["python3"], timeoutMs: 10_000 })))
 *
 * // Scripted results and no processes, for tests: the command is still decoded and allow-listed.
 * const scripted = program.pipe(Effect.provide(Sandbox.layerTest(() => ({ stdout: "42\n" }), { allow: ["python3"] })))
 * ```
 *
 * @since 0.1.0
 */
import { Config, Effect, Layer, Option, type Scope } from "effect"
import { decode } from "../core/internal/decode.js"
import * as ProcessLayer from "./internal/sandbox/processLayer.js"
import {
  type Files,
  type Info,
  Options,
  type RunRequest,
  Sandbox,
  SandboxError,
  type SandboxResult,
  type Service,
  type TestResponder,
  type Workspace,
  type WorkspaceOptions
} from "./internal/sandbox/types.js"
import * as TestLayer from "./internal/sandbox/testLayer.js"

export * from "./internal/sandbox/types.js"


// ---------------------------------------------------------------------------------------------------------
// Real processes
// ---------------------------------------------------------------------------------------------------------

/**
 * Builds a sandbox of real processes: finds what isolation this machine offers and resolves the allow-list.
 * Options are checked first: a bad one is `SandboxError` `invalid_options` with a one-line message
 * (`Sandbox: timeoutMs must be an integer >= 1, got -1`); an unknown key is refused. Without working bubblewrap,
 * unless `isolation: "process"` was chosen, it fails with `isolation_unavailable`, saying why and how to opt in.
 * It keeps no pre-made workspaces (it has no scope to remove them in): `makeScoped` and the layers do.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, SandboxError> =>
  Effect.flatMap(
    decode("Sandbox", Options, options).pipe(
      Effect.mapError((error) => new SandboxError({ reason: "invalid_options", message: error.message }))
    ),
    (valid) => ProcessLayer.make(valid)
  )

/**
 * How many pre-made workspaces the layers keep ready when `poolSize` is not given.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultPoolSize: number = ProcessLayer.defaultPoolSize

/**
 * The sandbox of real processes (the default), built with `options`; see `make` for when it fails. It keeps
 * `poolSize` pre-made workspaces ready (see `Options`), removed when the layer is.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerProcess = (options: Options = {}): Layer.Layer<Sandbox, SandboxError> => Layer.effect(Sandbox, makeScoped(options))

/**
 * `make` with the pool of pre-made workspaces (`poolSize`), which lives as long as the scope: what the layers use.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeScoped = (options: Options = {}): Effect.Effect<Service, SandboxError, Scope.Scope> =>
  Effect.flatMap(
    decode("Sandbox", Options, options).pipe(
      Effect.mapError((error) => new SandboxError({ reason: "invalid_options", message: error.message }))
    ),
    (valid) => ProcessLayer.makeScoped(valid)
  )

/**
 * `layerProcess` configured from the environment: `VALET_SANDBOX_ROOT` (work root), `VALET_SANDBOX_ISOLATION`
 * (`auto` | `bwrap` | `process`: the way to opt into unisolated processes without code), `VALET_SANDBOX_TIMEOUT_MS`;
 * `options` fill in the rest (the environment wins).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerProcessConfig = (options: Options = {}): Layer.Layer<Sandbox, SandboxError | Config.ConfigError> =>
  Layer.effect(
    Sandbox,
    Effect.gen(function*() {
      const root = yield* Config.option(Config.String("VALET_SANDBOX_ROOT"))
      const isolation = yield* Config.option(Config.Literals(["auto", "bwrap", "process"], "VALET_SANDBOX_ISOLATION"))
      const timeout = yield* Config.option(Config.Int("VALET_SANDBOX_TIMEOUT_MS"))
      return yield* makeScoped({
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

/**
 * A sandbox with scripted results and no processes or directories. Commands are decoded and allow-listed by
 * name exactly like the real layer (127 `invalid_command`, 126 `not_allowed`); task ids and seed paths are
 * checked the same way (symbolic links aside: there are none).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTest = (
  respond: TestResponder = () => ({}),
  options?: { readonly allow?: ReadonlyArray<string> }
): Layer.Layer<Sandbox> => Layer.sync(Sandbox, () => TestLayer.make(respond, options))

// ---------------------------------------------------------------------------------------------------------
// Accessors
// ---------------------------------------------------------------------------------------------------------

/**
 * A workspace for `taskId` seeded with `files`, removed when the scope closes (unless kept).
 *
 * @since 0.1.0
 * @category accessors
 */
export const workspace = (
  taskId: string,
  files?: Files,
  options?: WorkspaceOptions
): Effect.Effect<Workspace, SandboxError, Sandbox | Scope.Scope> => Sandbox.use((sandbox) => sandbox.workspace(taskId, files, options))

/**
 * Runs a command (as a model wrote it) in a workspace.
 *
 * @since 0.1.0
 * @category accessors
 */
export const run = (workspace: Workspace, request: RunRequest): Effect.Effect<SandboxResult, SandboxError, Sandbox> =>
  Sandbox.use((sandbox) => sandbox.run(workspace, request))

/**
 * A fresh workspace, one command, the workspace removed: what a tool call needs.
 *
 * @since 0.1.0
 * @category accessors
 */
export const runOnce = (
  taskId: string,
  files: Files,
  request: RunRequest
): Effect.Effect<SandboxResult, SandboxError, Sandbox> =>
  Sandbox.use((sandbox) => Effect.scoped(Effect.flatMap(sandbox.workspace(taskId, files), (ws) => sandbox.run(ws, request))))

/**
 * Removes a kept workspace.
 *
 * @since 0.1.0
 * @category accessors
 */
export const discard = (taskId: string): Effect.Effect<void, SandboxError, Sandbox> => Sandbox.use((sandbox) => sandbox.discard(taskId))

/**
 * What isolation and limits the sandbox in context uses.
 *
 * @since 0.1.0
 * @category accessors
 */
export const info: Effect.Effect<Info, never, Sandbox> = Sandbox.useSync((sandbox) => sandbox.info)
