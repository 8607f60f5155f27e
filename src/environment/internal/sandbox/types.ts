/**
 * The data of `Sandbox`: results, requests, workspaces, options, the error and the service's tag. `Sandbox`
 * re-exports all of it; it lives here so that the layers' internals, and `Workspace` (which the root entry loads
 * through DeepAgent), use it without loading the process layer.
 */
import { Context, type Effect, Schema, type Scope } from "effect"
import { IntAtLeast } from "../../../core/internal/decode.js"

/**
 * A workspace could not be made, seeded or used, or the sandbox could not be set up: `isolation_unavailable` when
 * no isolation works here and the caller did not opt into plain processes (`isolation: "process"`).
 *
 * @since 0.1.0
 * @category errors
 */
export class SandboxError extends Schema.TaggedError<SandboxError>()("SandboxError", {
  reason: Schema.Literals([
    "unsafe_task_id",
    "absolute_path",
    "parent_path",
    "invalid_path",
    "symlink_escape",
    "workspace_closed",
    "io",
    "isolation_unavailable",
    "invalid_options"
  ]),
  taskId: Schema.optional(Schema.String),
  path: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/**
 * A command as a model must write it: a non-empty list of strings, no NUL bytes.
 *
 * @since 0.1.0
 * @category models
 */
export const Command = Schema.NonEmptyArray(
  Schema.String.check(Schema.makeFilter((arg: string) => !arg.includes("\0"), { expected: "a string without NUL bytes" }))
)

// ---------------------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------------------

/**
 * Seed files of a workspace: relative path → content.
 *
 * @since 0.1.0
 * @category models
 */
export const Files = Schema.Record(Schema.String, Schema.String)
/**
 * Seed files of a workspace: relative path → content.
 *
 * @since 0.1.0
 * @category models
 */
export type Files = typeof Files.Type

/**
 * Why a command did not run normally.
 *
 * @since 0.1.0
 * @category models
 */
export const ErrorKind = Schema.Literals(["not_allowed", "invalid_command", "timeout", "spawn_failed"])
/**
 * Why a command did not run normally.
 *
 * @since 0.1.0
 * @category models
 */
export type ErrorKind = typeof ErrorKind.Type

/**
 * How a command was isolated: bubblewrap, a plain process group, not run at all (refused), or the test layer.
 *
 * @since 0.1.0
 * @category models
 */
export const Isolation = Schema.Literals(["bwrap", "process", "none", "test"])
/**
 * How a command was isolated.
 *
 * @since 0.1.0
 * @category models
 */
export type Isolation = typeof Isolation.Type

/**
 * What a command did. Exit code 124 with `timedOut` on timeout, 126 `not_allowed`, 127 `invalid_command` (or
 * `spawn_failed`), 128 + n when signal n ended it. `diff` and `changedFiles` describe the workspace after the
 * command. The encoded form (JSON on disk) is snake case.
 *
 * @since 0.1.0
 * @category models
 */
export const SandboxResult = Schema.Struct({
  command: Schema.Array(Schema.String),
  exitCode: Schema.Int,
  stdout: Schema.String,
  stderr: Schema.String,
  durationMs: Schema.Number,
  timedOut: Schema.Boolean,
  error: Schema.optional(ErrorKind),
  signal: Schema.optional(Schema.String),
  isolation: Isolation,
  stdoutTruncated: Schema.optional(Schema.Boolean),
  stderrTruncated: Schema.optional(Schema.Boolean),
  diff: Schema.optional(Schema.String),
  changedFiles: Schema.optional(Schema.Array(Schema.String))
}).pipe(Schema.encodeKeys({
  exitCode: "exit_code",
  durationMs: "duration_ms",
  timedOut: "timed_out",
  stdoutTruncated: "stdout_truncated",
  stderrTruncated: "stderr_truncated",
  changedFiles: "changed_files"
}))
/**
 * What a command did.
 *
 * @since 0.1.0
 * @category models
 */
export type SandboxResult = typeof SandboxResult.Type


/**
 * A workspace: a directory that lives as long as the scope it was made in (or, kept, across steps).
 *
 * @since 0.1.0
 * @category models
 */
export interface Workspace {
  readonly taskId: string
  readonly path: string
  /** Kept across the steps of a task (`workspace(…, { keep: true })`): not removed when the scope closes. */
  readonly kept: boolean
}

/**
 * Options of `workspace`.
 *
 * @since 0.1.0
 * @category options
 */
export interface WorkspaceOptions {
  /**
   * Keep one workspace for the task across steps: the first call creates and seeds it; later calls reuse it
   * as the earlier commands left it (seed files that exist are not overwritten). One scope at a time holds it;
   * `discard(taskId)` removes it.
   */
  readonly keep?: boolean | undefined
  /**
   * With `keep`: seed the files only when the kept workspace is made, not each time it is reopened — a reopened one
   * is exactly as its commands left it (a seed file they deleted stays deleted). A durable episode resumed after a
   * kill reopens its workspace so: what its replayed commands did is what its next live command sees.
   *
   * @since 0.2.0
   */
  readonly seedOnce?: boolean | undefined
}

/**
 * A command to run. `command` is what a model wrote, decoded here.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunRequest {
  readonly command: unknown
  /** Default: the layer's `timeoutMs`. */
  readonly timeoutMs?: number | undefined
  /** Snapshot the workspace and answer `diff` / `changedFiles` (default true). */
  readonly diff?: boolean | undefined
}


/**
 * What isolation and limits this machine gave the sandbox.
 *
 * @since 0.1.0
 * @category models
 */
export interface Info {
  readonly isolation: "bwrap" | "process" | "test"
  /** Why bwrap is not used, when it is not. */
  readonly bwrapUnavailable: string | undefined
  /**
   * bwrap: the host paths commands can read (read-only), besides their workspace. Undefined otherwise: a process
   * reads whatever its uid can.
   */
  readonly readOnlyPaths: ReadonlyArray<string> | undefined
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

/**
 * What a sandbox implements.
 *
 * @since 0.1.0
 * @category services
 */
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


// ---------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------

const PositiveInt = IntAtLeast(1)

/**
 * Options of `layerProcess`; every one has a default.
 *
 * @since 0.1.0
 * @category options
 */
export const Options = Schema.Struct({
  /** Where workspaces are made (default `<os tmpdir>/valet-sandbox-<uid>`: one per user, as it is not listable). */
  workRoot: Schema.optional(Schema.String),
  /** Programs that may run (default `ast-grep`, `python3`, `python`, `pytest`, `node`). */
  allow: Schema.optional(Schema.Array(Schema.String)),
  /**
   * `auto` (default) and `bwrap`: bubblewrap — no network, no other processes, only the system directories and the
   * allowed programs' directories readable, only the workspace writable; building fails (`isolation_unavailable`)
   * when it does not work here, never falling back. `process`: plain processes with the limits, a scrubbed
   * environment and (as root) a pooled uid, but NOT isolated: a command reads what its uid can read (as root, every
   * file), writes wherever it may (/tmp), sees other processes and reaches the network. Choose it only for code you
   * trust, or where bubblewrap cannot run.
   */
  isolation: Schema.optional(Schema.Literals(["auto", "bwrap", "process"])),
  /** Default timeout of a command (default 30 s). */
  timeoutMs: Schema.optional(PositiveInt),
  /** SIGTERM → SIGKILL delay (default 1 s). */
  graceMs: Schema.optional(IntAtLeast(0)),
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
  env: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  /** More variables copied from our environment. */
  passEnv: Schema.optional(Schema.Array(Schema.String)),
  /** Files larger than this are listed in `changedFiles` without a diff (default 256 KiB). */
  maxDiffFileBytes: Schema.optional(PositiveInt),
  /** Workspaces with more files than this get no diff (default 10,000). */
  maxDiffFiles: Schema.optional(PositiveInt),
  /**
   * Pre-made workspaces the layers keep ready (default 2; 0: none): empty directories whose command process is
   * already started, isolated, limited and under its uid, waiting for the command — a run then costs one exec.
   * Refilled in the background as they are taken; removed with the layer. `make`, which has no scope, keeps none.
   */
  poolSize: Schema.optional(IntAtLeast(0)),
  /** When root, run commands under pooled unprivileged uids (default true; see `Info.pooledUids`). */
  dropPrivileges: Schema.optional(Schema.Boolean),
  /** The uid pool (default 65,536 uids from 1,800,000,000). */
  uidRange: Schema.optional(Schema.Struct({ start: PositiveInt, size: PositiveInt }))
})
/**
 * Options of `layerProcess`.
 *
 * @since 0.1.0
 * @category options
 */
export type Options = typeof Options.Type

/**
 * The programs allowed by default.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultAllow: ReadonlyArray<string> = ["ast-grep", "python3", "python", "pytest", "node"]

/**
 * What the test layer's responder sees: the decoded, allowed command and the (virtual) workspace's files.
 *
 * @since 0.1.0
 * @category models
 */
export interface TestCall {
  readonly command: ReadonlyArray<string>
  readonly workspace: Workspace
  readonly files: Readonly<Record<string, string>>
  readonly timeoutMs: number | undefined
}

/**
 * How the test layer answers a command: parts of a result (the rest defaults to a silent exit 0).
 *
 * @since 0.1.0
 * @category models
 */
export type TestResponder = (call: TestCall) => Partial<SandboxResult> | Effect.Effect<Partial<SandboxResult>>


/**
 * The sandbox service.
 *
 * @since 0.1.0
 * @category services
 */
export class Sandbox extends Context.Service<Sandbox, Service>()("valet/Sandbox") {}
