/**
 * The file tools a model uses on a workspace (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`) and
 * `execute`, which runs a command in the workspace's sandbox. A refused path, a missing string or a command that
 * fails is a result the model reads (`ERROR: … <reason>: <message>`), never a failed run. A result too large for the
 * context is written to a file in the workspace; the model gets its path and its head, and reads on with `read_file`.
 */
import { Effect, Schema } from "effect"
import { formatSchemaError } from "../../../core/internal/decode.js"
import * as ToolCalls from "../../../core/internal/toolCalls.js"
import * as Tool from "../../../core/Tool.js"
import type { SandboxResult } from "../sandbox/types.js"
import { checkDirectory, checkFile } from "./shared.js"
import { type Service, WorkspaceError } from "./types.js"

/** Options of `tools`; every one has a default. */
export const ToolsOptions = Schema.Struct({
  /** Results longer than this (characters) are written to a file; the model gets the path and the head (default 20,000). */
  largeResultChars: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  /** How much of a large result the model sees (characters, default 2,000). */
  headChars: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Where large results are written, in the workspace (default `.valet/tool_results`). */
  resultsDir: Schema.optional(Schema.String),
  /** Whether to give the model `execute` (default true; where the workspace has no sandbox, its calls say so). */
  execute: Schema.optional(Schema.Boolean)
})
export type ToolsOptions = typeof ToolsOptions.Type

const decodeOptions = Schema.decodeUnknownResult(ToolsOptions)

/** What the tools need: the workspace of the run (looked up per call, so one agent serves many workspaces). */
export type Lookup<R> = Effect.Effect<Service, never, R>

const message = (error: WorkspaceError): string => `${error.reason}: ${error.message}`

/** Checks the options of `tools` / `withLargeResults`; throws on bad ones (a programming error, named in one line). */
const checked = (module: string, options: ToolsOptions): ToolsOptions => {
  const decoded = decodeOptions(options)
  if (decoded._tag === "Failure") throw new Error(formatSchemaError(module, decoded.failure, options))
  return decoded.success
}

/**
 * What makes a result fit the context: as it is, or — longer than `largeResultChars` — written to a file of the
 * workspace, the model getting its path and head (cut instead where the file cannot be written).
 */
const sizer = <R>(lookup: Lookup<R>, options: ToolsOptions) => {
  const largeResultChars = options.largeResultChars ?? 20_000
  const headChars = Math.min(options.headChars ?? 2_000, largeResultChars)
  const resultsDir = (options.resultsDir ?? ".valet/tool_results").replace(/\/+$/, "")
  let written = 0
  return (tool: string, text: string): Effect.Effect<string, never, R> => {
    if (text.length <= largeResultChars) return Effect.succeed(text)
    const cut = () => Tool.truncate(text, largeResultChars)
    return Effect.flatMap(lookup, (workspace) => {
      // A name no file of the directory has yet: the counter is this wrapper's, and a workspace that outlives it (a
      // thread's next turn, the next `valet run` on a directory) holds the files of earlier ones, which their
      // transcripts still point to.
      const taken = workspace.list(resultsDir).pipe(
        Effect.map((entries) => new Set(entries.map((entry) => entry.path.slice(entry.path.lastIndexOf("/") + 1)))),
        Effect.orElseSucceed(() => new Set<string>())
      )
      return Effect.flatMap(taken, (names) => {
        let n = ++written
        while (names.has(`${tool}_${n}.txt`)) n = ++written
        const path = `${resultsDir}/${tool}_${n}.txt`
        return workspace.write(path, text).pipe(
          Effect.map(() =>
            `The result is too large for the context (${text.length} characters): it was written to ${path}. ` +
            `Read it with read_file (offset / limit) or search it with grep. Its first ${headChars} characters:\n` +
            `${text.slice(0, headChars)}\n[… ${text.length - headChars} more characters in ${path}]`
          ),
          // Nowhere to write it (a read-only directory): cut, as any long tool result is.
          Effect.orElseSucceed(cut)
        )
      })
    })
  }
}

/**
 * A tool whose successful results longer than `largeResultChars` are written to the workspace, the model getting the
 * path and the head (what `tools` does for its own). The call keeps what the runtime reads on the tool (approval, the
 * call-id-aware call of a durable wrapper).
 */
export const withLargeResults = <R, R2>(tool: Tool.Tool<R>, lookup: Lookup<R2>, options: ToolsOptions = {}): Tool.Tool<R | R2> => {
  const sized = sizer(lookup, checked("Workspace.withLargeResults", options))
  const fit = (outcome: Tool.Outcome): Effect.Effect<Tool.Outcome, never, R2> =>
    outcome.isError ? Effect.succeed(outcome) : Effect.map(sized(tool.name, outcome.content), (content) => ({ content, isError: false }))
  const call = (argumentsText: string) => Effect.flatMap(tool.call(argumentsText), fit)
  const withId = ToolCalls.withCallId.get(tool.call as (argumentsText: string) => Effect.Effect<Tool.Outcome>)
  if (withId !== undefined) {
    ToolCalls.withCallId.set(
      call as (argumentsText: string) => Effect.Effect<Tool.Outcome>,
      (id, argumentsText) => Effect.flatMap(withId(id, argumentsText), fit) as Effect.Effect<Tool.Outcome>
    )
  }
  return { ...tool, call }
}

/** The tools over the workspace `lookup` finds; throws on bad options (a programming error, named in one line). */
export const make = <R>(lookup: Lookup<R>, options: ToolsOptions = {}): ReadonlyArray<Tool.Tool<R>> => {
  checked("Workspace.tools", options)
  const sized = sizer(lookup, options)
  const largeResultChars = options.largeResultChars ?? 20_000

  const use = <A>(f: (workspace: Service) => Effect.Effect<A, WorkspaceError>): Effect.Effect<A, string, R> =>
    Effect.flatMap(lookup, (workspace) => Effect.mapError(f(workspace), message))

  const ls = Tool.make({
    name: "ls",
    description: "Lists a directory of the workspace (its files with their sizes, its directories ending in /). Paths are relative to the workspace; omit path for its root.",
    parameters: Schema.Struct({ path: Schema.optional(Schema.String) }),
    handler: ({ path }) =>
      Effect.flatMap(use((ws) => ws.list(path)), (entries) =>
        sized("ls", entries.length === 0 ? "(empty directory)" : entries.map((entry) =>
          entry.kind === "directory" ? `${entry.path}/` : entry.kind === "symlink" ? `${entry.path}@ (symbolic link)` : `${entry.path} (${entry.size ?? 0} bytes)`
        ).join("\n")))
  })

  const readFile = Tool.make({
    name: "read_file",
    description: "Reads a text file of the workspace, its lines numbered. offset is the first line to read (1-based, default 1), limit how many lines (default 2000); read a long file in parts.",
    parameters: Schema.Struct({
      path: Schema.String,
      offset: Schema.optional(Schema.Int),
      limit: Schema.optional(Schema.Int)
    }),
    handler: ({ limit, offset, path }) =>
      Effect.map(use((ws) => ws.read(path, { offset, limit })), (lines) => {
        if (lines.totalLines === 0) return `${lines.path} is empty.`
        // Lines over the size the context takes are not written to another file (they are in one already): the
        // model is told where to read on.
        let content = lines.content
        let endLine = lines.endLine
        if (content.length > largeResultChars) {
          // Room for the note after the lines, so the whole answer fits in `largeResultChars`.
          const room = Math.max(1, largeResultChars - 80)
          const cutAt = content.lastIndexOf("\n", room)
          content = cutAt > 0 ? content.slice(0, cutAt) : content.slice(0, room)
          endLine = lines.startLine + content.split("\n").length - 1
        }
        const rest = endLine < lines.totalLines
          ? `\n[lines ${lines.startLine}-${endLine} of ${lines.totalLines}; read on with offset ${endLine + 1}]`
          : ""
        return `${content}${rest}`
      })
  })

  const writeFile = Tool.make({
    name: "write_file",
    description: "Writes a text file of the workspace (replacing it if it exists), creating the directories it needs.",
    parameters: Schema.Struct({ path: Schema.String, content: Schema.String }),
    handler: ({ content, path }) =>
      Effect.map(use((ws) => ws.write(path, content)), (done) => `Wrote ${done.bytes} bytes to ${done.path}${done.created ? " (a new file)" : ""}.`)
  })

  const editFile = Tool.make({
    name: "edit_file",
    description: "Replaces an exact string in a file of the workspace. old_string must occur exactly once (include enough surrounding lines to make it unique), or set replace_all to replace every occurrence. Read the file first: whitespace and indentation must match.",
    parameters: Schema.Struct({
      path: Schema.String,
      old_string: Schema.String,
      new_string: Schema.String,
      replace_all: Schema.optional(Schema.Boolean)
    }),
    handler: (args) =>
      Effect.map(
        use((ws) => ws.edit(args.path, { oldString: args.old_string, newString: args.new_string, replaceAll: args.replace_all })),
        (done) => `Edited ${done.path}: ${done.replacements} replacement${done.replacements === 1 ? "" : "s"}.`
      )
  })

  const glob = Tool.make({
    name: "glob",
    description: "Finds the files of the workspace whose paths match a glob pattern (\"**/*.py\", \"src/*.ts\"; ** crosses directories), relative to path (default the root).",
    parameters: Schema.Struct({ pattern: Schema.String, path: Schema.optional(Schema.String) }),
    handler: ({ path, pattern }) =>
      Effect.flatMap(use((ws) => ws.glob(pattern, { path })), (found) =>
        sized(
          "glob",
          found.paths.length === 0
            ? `No files match ${pattern}.`
            : `${found.paths.join("\n")}${found.truncated ? `\n[more files match: narrow the pattern]` : ""}`
        ))
  })

  const grep = Tool.make({
    name: "grep",
    description: "Searches the text files of the workspace for lines containing pattern (literal text, not a regular expression): answers path:line: text. path limits the search to a directory or a file, glob to files matching a pattern (\"*.py\").",
    parameters: Schema.Struct({
      pattern: Schema.String,
      path: Schema.optional(Schema.String),
      glob: Schema.optional(Schema.String),
      ignore_case: Schema.optional(Schema.Boolean)
    }),
    handler: (args) =>
      Effect.flatMap(use((ws) => ws.grep(args.pattern, { path: args.path, glob: args.glob, ignoreCase: args.ignore_case })), (found) =>
        sized(
          "grep",
          found.matches.length === 0
            ? `No lines contain ${JSON.stringify(args.pattern)}.`
            : `${found.matches.map((match) => `${match.path}:${match.line}: ${match.text}`).join("\n")}${found.truncated ? "\n[more lines match: narrow the search]" : ""}`
        ))
  })

  const execute = Tool.make({
    name: "execute",
    description: "Runs a command in the workspace, in a sandbox (no network, only the workspace writable): command is the program and its arguments as a list, [\"python3\", \"-m\", \"pytest\", \"-q\"] — no shell. Only allowed programs run. Answers the exit code, the output and the files the command changed.",
    parameters: Schema.Struct({
      command: Schema.Array(Schema.String),
      timeout_seconds: Schema.optional(Schema.Number)
    }),
    handler: ({ command, timeout_seconds }) =>
      Effect.flatMap(lookup, (workspace) => {
        const run = workspace.run
        if (run === undefined) return Effect.fail(`execute is not available: this workspace (${workspace.location}) has no sandbox to run commands in`)
        return run({ command, ...(timeout_seconds !== undefined ? { timeoutMs: Math.round(timeout_seconds * 1000) } : {}) }).pipe(
          Effect.mapError((error) => `${error.reason}: ${error.message}`),
          Effect.flatMap((result) => sized("execute", describe(result)))
        )
      }),
    // The sandbox's own timeout ends the command; this one only keeps a stuck call from waiting for ever.
    timeout: "1 hour"
  })

  return [ls, readFile, writeFile, editFile, glob, grep, ...(options.execute === false ? [] : [execute])]
}

/** A command's result as the model reads it. */
const describe = (result: SandboxResult): string => {
  const status = result.timedOut
    ? `timed out (exit code ${result.exitCode})`
    : result.error !== undefined
    ? `not run: ${result.error} (exit code ${result.exitCode})`
    : `exit code ${result.exitCode}${result.signal !== undefined ? ` (signal ${result.signal})` : ""}`
  const parts = [status]
  if (result.stdout !== "") parts.push(`--- stdout${result.stdoutTruncated === true ? " (cut)" : ""} ---\n${result.stdout.replace(/\n$/, "")}`)
  if (result.stderr !== "") parts.push(`--- stderr${result.stderrTruncated === true ? " (cut)" : ""} ---\n${result.stderr.replace(/\n$/, "")}`)
  if (result.changedFiles !== undefined && result.changedFiles.length > 0) parts.push(`--- changed files ---\n${result.changedFiles.join("\n")}`)
  return parts.join("\n")
}

/** The tools whose `path` names a directory (absent or `.`: the root), not a file. */
const directoryPaths = new Set(["ls", "glob", "grep"])

/**
 * The arguments of a call of the tool `name` as the workspace acts on them, for a policy to judge (approvals): `path`
 * normalized as the tool will read it (`./deploy/x` and `deploy//x` are `deploy/x`), and `execute`'s program by its
 * name (`/usr/bin/python3` is `python3`: the sandbox finds programs by name on its allow-list, so a rule about
 * `python3` must hold for any spelling of it). `undefined` when a path is refused: the policy cannot tell what it
 * names, so it asks.
 */
export const effectiveArguments = (name: string, args: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> | undefined => {
  let out: Record<string, unknown> = args
  if (typeof args.path === "string") {
    const checked = directoryPaths.has(name) ? checkDirectory(args.path) : checkFile(args.path)
    if (checked instanceof WorkspaceError) return undefined
    out = { ...out, path: checked }
  }
  const command = args.command
  if (name === "execute" && Array.isArray(command) && typeof command[0] === "string" && /[\\/]/.test(command[0])) {
    const program = command[0].split(/[\\/]/).at(-1)!
    out = { ...out, command: [program, ...command.slice(1)] }
  }
  return out
}
