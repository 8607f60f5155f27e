/**
 * How `valet` ends: an exit code that tells the truth and one line on stderr saying why, never a stack trace
 * (`--verbose` adds the full cause). Exit codes: 0 done; 1 the command failed (an error, an empty answer, a
 * problem or task that failed); 2 the command line was wrong (an unknown flag, a bad value, a missing argument,
 * a bad `valet.yaml`); 130 interrupted.
 */
import { Cause, Effect, References, Runtime, Schema } from "effect"
import { CliError, CliOutput, Command, Flag, GlobalFlag } from "effect/cli"
import { ConfigFileError } from "../../serve/AgentConfig.js"
import { CommandFailed, UsageError } from "./failure.js"
import { valet, version } from "./root.js"

/** The exit codes of `valet`. */
export const ExitCode = { ok: 0, failed: 1, usage: 2, interrupted: 130 } as const

/** `--verbose`: print the full cause of a failure (stack traces included). Read by `main` from the arguments. */
export const verboseFlag = GlobalFlag.Setting("verbose")({
  flag: Flag.Boolean("verbose").pipe(
    Flag.withDescription("On failure, print the full cause with stack traces, not just one line."),
    Flag.withDefault(false)
  )
})

/** Where `main` writes its one line (and, verbose, the cause). */
export interface ErrorOutput {
  readonly line: (text: string) => Effect.Effect<void>
}

/** The process's stderr. */
export const stderrOutput: ErrorOutput = { line: (text) => Effect.sync(() => void process.stderr.write(`${text}\n`)) }

/** The command path of an invocation, for messages: `valet run`. */
const commandName = (path: ReadonlyArray<string>): string => path.join(" ")

/**
 * Presents a wrong command line as one line naming what was wrong (`valet run: Invalid value for flag
 * --architecture: "nope". Expected: …`) and where help is, instead of the help page and an error block.
 */
const presenter = (output: ErrorOutput): CliOutput.Presenter => ({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? output.line(
        `${commandName(event.commandPath)}: ${event.errors.map((error) => oneLine(error.message)).join("; ")} ` +
          `(${commandName(event.commandPath)} --help shows the usage)`
      )
      : CliOutput.defaultPresenter.present(event)
})

const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim()

/** The line printed for a failure, and its exit code. */
export const describeFailure = (
  cause: Cause.Cause<unknown>,
  command: string
): { readonly line: string | undefined; readonly exitCode: number } => {
  if (Cause.hasInterruptsOnly(cause)) return { line: `${command}: interrupted`, exitCode: ExitCode.interrupted }
  const error = Cause.squash(cause)
  if (CliError.isCliError(error)) {
    // Already presented (one line), or help that was asked for implicitly (`valet` alone).
    return { line: undefined, exitCode: error._tag === "ShowHelp" && error.errors.length === 0 ? ExitCode.ok : ExitCode.usage }
  }
  if (error instanceof CommandFailed) return { line: `${command}: ${oneLine(error.message)}`, exitCode: ExitCode.failed }
  if (error instanceof UsageError) return { line: `${command}: ${oneLine(error.message)}`, exitCode: ExitCode.usage }
  // A bad config file is a usage error: what the user wrote is wrong, and the line says where.
  if (error instanceof ConfigFileError) return { line: `${command}: ${oneLine(error.message)}`, exitCode: ExitCode.usage }
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some") return { line: `${command}: ${describeError(failure.value)}`, exitCode: ExitCode.failed }
  return {
    line: `${command}: unexpected error: ${describeError(error)} (--verbose shows where)`,
    exitCode: ExitCode.failed
  }
}

/**
 * `Tag: message` of a typed error (the tag is left out when the message already starts with it). An error with no
 * message of its own (effect's `ServeError`, a `Data.TaggedError` wrapping what went wrong) is described by its
 * `cause`, so the line never ends at a bare tag; a server that could not listen is described as such.
 */
const describeError = (error: unknown, depth = 0): string => {
  if (typeof error !== "object" || error === null) return oneLine(String(error))
  const listen = describeListenError(error)
  if (listen !== undefined) return listen
  const tag = "_tag" in error && typeof error._tag === "string" ? error._tag : undefined
  const message = "message" in error && typeof error.message === "string" && error.message !== ""
    ? oneLine(error.message)
    : undefined
  if (message === undefined) {
    // A cycle of causes, or a very deep chain, ends at the tag rather than looping.
    const cause = "cause" in error && error.cause !== undefined && depth < 8 ? describeError(error.cause, depth + 1) : undefined
    const name = tag ?? (error instanceof Error ? error.name : undefined)
    if (cause === undefined) return name ?? oneLine(String(error))
    return name === undefined || cause.startsWith(name) ? cause : `${name}: ${cause}`
  }
  return tag === undefined || message.startsWith(tag) ? message : `${tag}: ${message}`
}

/**
 * What Node says when a server cannot listen (its `error` event: `code`, `syscall: "listen"`, `address`, `port`),
 * found on the error or its cause (effect's `ServeError` wraps it): `port 8787 is in use`, or `cannot listen on
 * <host>:<port>: <why> (<code>)`. Undefined for any other error.
 */
const describeListenError = (error: object): string | undefined => {
  const found = [error, "cause" in error ? error.cause : undefined].find(isListenError)
  if (found === undefined) return undefined
  if (found.code === "EADDRINUSE" && found.port !== undefined) return `port ${found.port} is in use`
  const where = found.address !== undefined && found.port !== undefined
    ? `${found.address.includes(":") ? `[${found.address}]` : found.address}:${found.port}`
    : found.address ?? (found.port !== undefined ? `port ${found.port}` : "the address")
  // Node's message repeats the syscall, the code and the address: `listen EADDRNOTAVAIL: address not available 10.0.0.1:80`.
  const why = found.message.replace(/^listen \S+: /, "").replace(/ \S+:\d+$/, "")
  return `cannot listen on ${where}: ${oneLine(why)}${found.code !== undefined ? ` (${found.code})` : ""}`
}

// The fields Node sets on a server's `error` event (an `ErrnoException` with the address it tried).
const ListenError = Schema.Struct({
  syscall: Schema.Literal("listen"),
  message: Schema.String,
  code: Schema.optional(Schema.String),
  address: Schema.optional(Schema.String),
  port: Schema.optional(Schema.Number)
})
const isListenError = Schema.is(ListenError)

/**
 * Runs `valet` on `args`: the command's own output, then on failure one line on `errors` (and the full cause when
 * `--verbose` is among the arguments). Answers the exit code; never fails.
 */
export const main = (
  args: ReadonlyArray<string>,
  errors: ErrorOutput = stderrOutput
): Effect.Effect<number, never, Command.Environment> => {
  const verbose = args.includes("--verbose")
  const command = commandName(["valet", ...args.filter((arg) => !arg.startsWith("-")).slice(0, 1)])
  const cli = valet.pipe(Command.withGlobalFlags([verboseFlag]))
  return Command.runWith(cli, { version })(args).pipe(
    Effect.provide(CliOutput.layerPresenter(presenter(errors))),
    // stdout carries what a command answers (an answer, a table, a protocol): logs — a deprecation said once, a
    // library's warning — go to stderr.
    Effect.provideService(References.LogToStderr, true),
    Effect.as(ExitCode.ok as number),
    Effect.catchCause((cause) =>
      Effect.gen(function*() {
        const { exitCode, line } = describeFailure(cause, command)
        if (line !== undefined) yield* errors.line(line)
        if (verbose && exitCode !== ExitCode.ok) yield* errors.line(Cause.pretty(cause))
        return exitCode
      })
    )
  )
}

/** An exit code as a failure `NodeRuntime.runMain` turns into the process's exit code, unreported. */
export class ExitWith extends Schema.TaggedError<ExitWith>()("ExitWith", { code: Schema.Int }) {
  override readonly [Runtime.errorExitCode]: number = this.code
}

/** `main` for a process: a non-zero code fails with `ExitWith`, so the runner exits with it. */
export const mainProcess = (args: ReadonlyArray<string>): Effect.Effect<void, ExitWith, Command.Environment> =>
  Effect.flatMap(main(args), (code) => (code === ExitCode.ok ? Effect.void : Effect.fail(new ExitWith({ code }))))
