/**
 * A `Workspace` is the files an agent works on: list, read (numbered lines, offset / limit), write, edit (an exact
 * string, refused when absent or not unique), glob and grep — and, on a sandbox's workspace, commands. Two layers
 * answer alike: `layerMemory` (a map in the process: tests, no processes, no disk) and `layerSandbox` (a `Sandbox`
 * workspace on disk, where `execute` runs commands); `layerDirectory` is a directory of your own, without commands.
 * `makeSandboxCopy` seeds a sandbox's workspace with a copy of a directory and answers the diff of what the agent
 * changed there, written back to the directory only when asked (`apply`).
 *
 * Every path is relative to the workspace and confined to it: an absolute path, `..`, a NUL byte or a symbolic link
 * that leads out is a `WorkspaceError` naming the reason and the path (the sandbox's own checks and reasons). `grep`
 * looks for literal text, not a regular expression: a model's pattern cannot stall the process by backtracking.
 *
 * `tools()` gives a model the file tools over the workspace in context: `ls`, `read_file`, `write_file`,
 * `edit_file`, `glob`, `grep` and `execute`. What goes wrong is a result the model reads, never a failed run; a
 * result too large for the context is written to a file in the workspace and the model gets its path and head.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Workspace from "valet/Workspace"
 *
 * // Direct use: write, edit, read back.
 * const program = Effect.gen(function*() {
 *   yield* Workspace.write("notes/todo.md", "- buy milk\n")
 *   yield* Workspace.edit("notes/todo.md", { oldString: "milk", newString: "oat milk" })
 *   return (yield* Workspace.read("notes/todo.md")).content // "     1\t- buy oat milk"
 * })
 * const inMemory = program.pipe(Effect.provide(Workspace.layerMemory()))
 *
 * // A model with the file tools, on a workspace in memory (a sandbox's: `Workspace.layerSandbox("task-1")`).
 * const agent = Agent.make({ name: "editor", instructions: "Edit files as asked.", tools: Workspace.tools() })
 * const run = Agent.run(agent, "Create hello.txt").pipe(
 *   Effect.provide(Workspace.layerMemory()),
 *   Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "write_file", arguments: { path: "hello.txt", content: "hi\n" } }] }, "Done."]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type * as Tool from "../core/Tool.js"
import type { Files, SandboxError, WorkspaceOptions } from "./internal/sandbox/types.js"
import { Sandbox } from "./internal/sandbox/types.js"
import * as Copy from "./internal/workspace/copy.js"
import * as Directory from "./internal/workspace/directory.js"
import * as Memory from "./internal/workspace/memory.js"
import * as Tools from "./internal/workspace/tools.js"
import { WorkspaceError as WorkspaceErrorClass } from "./internal/workspace/types.js"
import type {
  Applied,
  Changes,
  Edit,
  Edited,
  Entry,
  Found,
  GlobOptions,
  GrepOptions,
  Lines,
  Matches,
  ReadOptions,
  Service,
  WorkspaceError,
  Written
} from "./internal/workspace/types.js"

export * from "./internal/workspace/types.js"

/**
 * The workspace service.
 *
 * @since 0.2.0
 * @category services
 */
export class Workspace extends Context.Service<Workspace, Service>()("valet/Workspace") {}

// ---------------------------------------------------------------------------------------------------------
// Layers
// ---------------------------------------------------------------------------------------------------------

/**
 * A fresh workspace in memory, seeded with `files` (path → text; a refused path fails it): no processes, no disk.
 * `execute` there answers that it has no sandbox.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeMemory = (files?: Readonly<Record<string, string>>): Effect.Effect<Service, WorkspaceError> => Memory.make(files)

/**
 * A workspace in memory, seeded with `files`; each build of the layer is a fresh one.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerMemory = (files?: Readonly<Record<string, string>>): Layer.Layer<Workspace, WorkspaceError> =>
  Layer.effect(Workspace, Memory.make(files))

/**
 * A workspace over a directory that exists (yours: no commands run there; `layerSandbox` for that).
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeDirectory = (path: string): Effect.Effect<Service, WorkspaceError> => Directory.make(path)

/**
 * A workspace over a directory that exists, without commands.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerDirectory = (path: string): Layer.Layer<Workspace, WorkspaceError> => Layer.effect(Workspace, Directory.make(path))

/**
 * Options of `layerSandbox`: the seed files, a directory to copy in (`from`), and whether the sandbox keeps the
 * workspace across runs (`keep`).
 *
 * @since 0.2.0
 * @category options
 */
export interface SandboxOptions extends WorkspaceOptions {
  readonly files?: Files | undefined
  /**
   * A directory copied into the workspace after `files` (files as bytes, symbolic links as they are, every `.git`
   * left out; at most 10,000 files and 256 MiB, checked before copying): the agent works on the copy, never on the
   * directory. A kept workspace keeps its edits.
   */
  readonly from?: string | undefined
}

/**
 * The workspace of task `taskId` in the `Sandbox` in context (seeded with `files`, then a copy of `from`; removed
 * when the layer's scope closes unless `keep`): the file operations work on its directory, and `run` (the `execute`
 * tool) runs commands there through the sandbox — bubblewrap unless the sandbox was built with `isolation: "process"`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerSandbox = (taskId: string, options: SandboxOptions = {}): Layer.Layer<Workspace, SandboxError | WorkspaceError, Sandbox> =>
  Layer.effect(Workspace, Effect.map(sandboxWorkspace(taskId, options), ({ service }) => service))

/** The sandbox's workspace as a `Service`, and the copy of `from` in it when there is one. */
const sandboxWorkspace = (taskId: string, options: SandboxOptions) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const workspace = yield* sandbox.workspace(taskId, options.files, options.keep !== undefined ? { keep: options.keep } : undefined)
    const from = options.from
    const copy = from === undefined ? undefined : yield* Effect.flatMap(
      Effect.promise(() => Copy.make(from, workspace.path, workspace.kept)),
      (made) => made instanceof WorkspaceErrorClass ? Effect.fail(made) : Effect.succeed(made)
    )
    const files = yield* Directory.make(workspace.path)
    return { service: { ...files, run: (request) => sandbox.run(workspace, request) } satisfies Service, copy }
  })

/**
 * A sandbox workspace that is a copy of a directory (`makeSandboxCopy`): the workspace, what it changed since the
 * copy was made, and how to write that back.
 *
 * @since 0.2.0
 * @category models
 */
export interface SandboxCopy {
  /** The workspace: give it to the agent (`Effect.provideService(Workspace, copy.workspace)`). */
  readonly workspace: Service
  /** The directory copied (its real path). */
  readonly from: string
  /** What the workspace changed since the copy: the changed paths and the unified diff of the text files. */
  readonly changes: Effect.Effect<Changes, WorkspaceError>
  /**
   * Writes the changes back to `from`: refused (`conflict`, nothing written) when a file to change was changed there
   * since the copy, or when a directory on the way is no longer a directory there; never through a symbolic link,
   * never into a `.git` (at any depth); only execute bits of the agent's modes are carried over.
   */
  readonly apply: Effect.Effect<Applied, WorkspaceError>
}

/**
 * A fresh workspace of the `Sandbox` in context, seeded with a copy of the directory `from`, for the scope: the agent
 * edits and runs commands on the copy, the user's directory is untouched until `apply`. A missing `from` fails with
 * `not_found` naming it; a directory of more than 10,000 files or 256 MiB with `too_large`, before anything is copied.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Sandbox from "valet/Sandbox"
 * import * as Workspace from "valet/Workspace"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const copy = yield* Workspace.makeSandboxCopy("fix-1", "./my-project")
 *   yield* Workspace.write("NOTES.md", "checked\n").pipe(Effect.provideService(Workspace.Workspace, copy.workspace))
 *   const { diff } = yield* copy.changes // "--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+checked\n"
 *   return diff
 * })).pipe(Effect.provide(Sandbox.layerProcess()))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeSandboxCopy = (
  taskId: string,
  from: string
): Effect.Effect<SandboxCopy, SandboxError | WorkspaceError, Sandbox | Scope.Scope> =>
  Effect.map(sandboxWorkspace(taskId, { from }), ({ copy, service }) => {
    const made = copy!
    return {
      workspace: service,
      from: made.from,
      changes: Effect.flatMap(Effect.promise(() => Copy.changes(made)), (found) =>
        found instanceof WorkspaceErrorClass ? Effect.fail(found) : Effect.succeed({ changedFiles: found.changedFiles, diff: found.diff })),
      apply: Effect.flatMap(Effect.promise(() => Copy.apply(made)), (done) => done instanceof WorkspaceErrorClass ? Effect.fail(done) : Effect.succeed(done))
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Accessors
// ---------------------------------------------------------------------------------------------------------

/**
 * The entries of a directory of the workspace in context (the root when `path` is omitted).
 *
 * @since 0.2.0
 * @category accessors
 */
export const list = (path?: string): Effect.Effect<ReadonlyArray<Entry>, WorkspaceError, Workspace> => Workspace.use((ws) => ws.list(path))

/**
 * Lines of a file, numbered (`offset`, `limit`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const read = (path: string, options?: ReadOptions): Effect.Effect<Lines, WorkspaceError, Workspace> =>
  Workspace.use((ws) => ws.read(path, options))

/**
 * The whole text of a file.
 *
 * @since 0.2.0
 * @category accessors
 */
export const readText = (path: string): Effect.Effect<string, WorkspaceError, Workspace> => Workspace.use((ws) => ws.readText(path))

/**
 * Writes a file, creating the directories it needs.
 *
 * @since 0.2.0
 * @category accessors
 */
export const write = (path: string, content: string): Effect.Effect<Written, WorkspaceError, Workspace> =>
  Workspace.use((ws) => ws.write(path, content))

/**
 * Replaces an exact string in a file (`string_not_found`, or `string_not_unique` with the count, when it cannot).
 *
 * @since 0.2.0
 * @category accessors
 */
export const edit = (path: string, change: Edit): Effect.Effect<Edited, WorkspaceError, Workspace> => Workspace.use((ws) => ws.edit(path, change))

/**
 * The files whose paths match a glob pattern.
 *
 * @since 0.2.0
 * @category accessors
 */
export const glob = (pattern: string, options?: GlobOptions): Effect.Effect<Found, WorkspaceError, Workspace> =>
  Workspace.use((ws) => ws.glob(pattern, options))

/**
 * The lines of text files that contain `text` (literal).
 *
 * @since 0.2.0
 * @category accessors
 */
export const grep = (text: string, options?: GrepOptions): Effect.Effect<Matches, WorkspaceError, Workspace> =>
  Workspace.use((ws) => ws.grep(text, options))

// ---------------------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `tools`: `largeResultChars` (results longer are written to a file in the workspace; default 20,000),
 * `headChars` (what of such a result the model sees; default 2,000), `resultsDir` (where they go; default
 * `.valet/tool_results`), `execute` (give the model `execute`; default true).
 *
 * @since 0.2.0
 * @category tools
 */
export type ToolsOptions = Tools.ToolsOptions

/**
 * The arguments of a call of one of `tools` as the workspace acts on them, for a policy to judge (DeepAgent's
 * `approvals`): `path` normalized as the tool reads it (`./deploy/x` is `deploy/x`), and `execute`'s program by its name
 * (`/usr/bin/python3` is `python3`). `undefined` when a path is refused: a policy cannot tell what it names, so it asks.
 *
 * @example
 * ```ts
 * import * as Workspace from "valet/Workspace"
 *
 * Workspace.effectiveArguments("write_file", { path: "./deploy//prod.yaml", content: "" }) // { path: "deploy/prod.yaml", content: "" }
 * Workspace.effectiveArguments("execute", { command: ["/usr/bin/python3", "-V"] })        // { command: ["python3", "-V"] }
 * ```
 *
 * @since 0.2.0
 * @category tools
 */
export const effectiveArguments: (
  name: string,
  args: Readonly<Record<string, unknown>>
) => Readonly<Record<string, unknown>> | undefined = Tools.effectiveArguments

/**
 * The file tools over the workspace in context, for a model: `ls`, `read_file`, `write_file`, `edit_file`, `glob`,
 * `grep`, and `execute` (unless `execute: false`). Bad options throw at once (a programming error, in one line).
 *
 * @since 0.2.0
 * @category tools
 */
export const tools = (options?: ToolsOptions): ReadonlyArray<Tool.Tool<Workspace>> => Tools.make(Workspace.use(Effect.succeed), options)

/**
 * The same tools over a workspace given here rather than found in context (what an architecture that makes one per
 * run uses).
 *
 * @since 0.2.0
 * @category tools
 */
export const toolsFor = (workspace: Service, options?: ToolsOptions): ReadonlyArray<Tool.Tool> => Tools.make(Effect.succeed(workspace), options)

/**
 * Any tool with its large results kept out of the context: a successful result longer than `largeResultChars` is
 * written to a file of the workspace in context (`resultsDir`), and the model gets its path and its first `headChars`
 * — what `tools` does for its own (DeepAgent does it for the agent's tools too). Approval and the rest of the tool
 * are kept.
 *
 * @since 0.2.0
 * @category tools
 */
export const withLargeResults = <R>(tool: Tool.Tool<R>, options?: ToolsOptions): Tool.Tool<R | Workspace> =>
  Tools.withLargeResults(tool, Workspace.use(Effect.succeed), options)
