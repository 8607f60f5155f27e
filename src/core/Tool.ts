/**
 * Tools an agent can call. Parameters are a `Schema`: the model sees its JSON schema, and the arguments the
 * model writes are decoded with it. Whatever goes wrong in a tool call — bad JSON, arguments that do not
 * decode, an unknown tool, a failing or slow handler — comes back to the model as an `ERROR: ...` result it can
 * read and react to; it never crashes the run.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Tool } from "valet"
 *
 * const weather = Tool.make({
 *   name: "get_weather",
 *   description: "The current weather in a city",
 *   parameters: Schema.Struct({ city: Schema.String, unit: Schema.optional(Schema.Literals(["c", "f"])) }),
 *   handler: ({ city, unit = "c" }) => Effect.succeed({ city, temperature: unit === "c" ? 21 : 70 }),
 *   timeout: "5 seconds"
 * })
 *
 * // What the model is shown: the name, the description and the JSON schema of the parameters.
 * const definition = weather.definition
 *
 * // Calls as a model writes them: arguments that do not decode are an `ERROR:` result it reads, not a failure.
 * const kit = Tool.toolkit([weather])
 * const results = Effect.all([
 *   Tool.execute(kit, { id: "call_1", name: "get_weather", arguments: `{"city":"Paris"}` }), // {"city":"Paris","temperature":21}
 *   Tool.execute(kit, { id: "call_2", name: "get_weather", arguments: `{"town":"Paris"}` }) // ERROR: invalid arguments…
 * ])
 * ```
 *
 * @since 0.1.0
 */
import { Cause, Duration, Effect, Exit, Predicate, Result, Schema, SchemaAST } from "effect"
import { jsonDepthWithin, maxJsonDepth, valueDepthWithin } from "./internal/parse.js"
import { formatSchemaError } from "./internal/decode.js"
import { coerce } from "./internal/coerce.js"
import { parametersSchema } from "./internal/jsonSchema.js"
import type * as Model from "./Model.js"
import * as ToolCalls from "./internal/toolCalls.js"

const TypeId: unique symbol = Symbol.for("valet/Tool")

/**
 * The outcome of one tool call, before timeouts and the length cap are applied.
 *
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  readonly content: string
  readonly isError: boolean
  /**
   * What the tool returned besides text (images, audio, files: an MCP tool's image content), for the model to see;
   * not cut by the length cap (the parts' own byte cap applies when the request is sent). @since 0.2.0
   */
  readonly parts?: ReadonlyArray<Model.Part> | undefined
}

/**
 * A tool whose handler needs the services `R`. The parameter and result types are fixed by `make` and erased
 * here, so that tools of different shapes fit in one list.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool<out R = never> {
  readonly [TypeId]: typeof TypeId
  readonly name: string
  readonly description: string
  /** What the model is told: the name, the description and the JSON schema of the parameters. */
  readonly definition: Model.ToolDefinition
  /** How long one call may take before it is interrupted and reported as timed out. */
  readonly timeout: Duration.Duration
  /** Decodes the model's argument text and runs the handler; failures become error outcomes. */
  readonly call: (argumentsText: string) => Effect.Effect<Outcome, never, R>
  /** When calls need a person's approval before they run (`needsApproval`); absent: never. */
  readonly approval?: Approval<R> | undefined
}

/**
 * How a tool's calls are approved by a person (`HumanLoop`): which calls need it, how arguments a person edited are
 * checked, and how long a call waits before it is rejected.
 *
 * @since 0.2.0
 * @category models
 */
export interface Approval<out R = never> {
  /** Whether the call with this argument text waits for a decision (arguments that do not decode: no, they fail). */
  readonly needed: (argumentsText: string) => Effect.Effect<boolean, never, R>
  /** Arguments a person edited, checked by the tool's schema: the argument text to call with, or why they do not fit. */
  readonly check: (value: unknown) => Result.Result<string, string>
  /** How long a call waits for a decision before it is rejected (`undefined`: until decided or the run ends). */
  readonly timeout: Duration.Duration | undefined
}

/**
 * The services needed by any of a list of tools.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements<T> = T extends ReadonlyArray<Tool<infer R>> ? R : never

/**
 * The default time a tool call may take.
 *
 * @since 0.1.0
 * @category options
 */
export const defaultTimeout: Duration.Duration = Duration.seconds(30)

/**
 * The default length a tool result is cut to before the model sees it.
 *
 * @since 0.1.0
 * @category options
 */
export const defaultMaxResultChars = 20_000

/**
 * Options of `make`.
 *
 * @since 0.1.0
 * @category options
 */
export interface MakeOptions<P, I, A, E, R> {
  readonly name: string
  readonly description: string
  /** The schema of the arguments object. */
  readonly parameters: Schema.Codec<P, I>
  readonly handler: (params: P) => Effect.Effect<A, E, R>
  /** How the result is shown to the model; by default strings as they are and anything else as JSON. */
  readonly format?: ((result: A) => string) | undefined
  /**
   * What of the result the model sees besides its text: images, files or audio (a screenshot the tool took, a chart
   * it drew), as `Model.Part`s; checked when the request is sent. @since 0.2.0
   */
  readonly parts?: ((result: A) => ReadonlyArray<Model.Part> | undefined) | undefined
  readonly timeout?: Duration.Input | undefined
  /**
   * Whether a call waits for a person's approval before it runs (`HumanLoop`): always (`true`), or by its decoded
   * arguments. Approved, it runs with the arguments as approved (a person may edit them; the schema checks them);
   * rejected, the model reads `ERROR: rejected: <reason>`.
   */
  readonly needsApproval?: boolean | ((params: P) => Effect.Effect<boolean, never, R>) | undefined
  /** How long a call waits for its decision before it is rejected (default: until decided, or the run ends). */
  readonly approvalTimeout?: Duration.Input | undefined
}

const toolNamePattern = /^[a-zA-Z0-9_-]{1,64}$/

/**
 * Whether a tool name is one the OpenAI protocol accepts (letters, digits, `_` and `-`, at most 64): servers
 * reject anything else, so an agent with such a tool fails at the start of its run with `InvalidAgent`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isValidName = (name: string): boolean => toolNamePattern.test(name)

/**
 * The JSON value of a model's argument text (`""`, which servers send for a call without arguments, is `{}`), or a
 * message naming the tool and what is wrong: not JSON, or nested deeper than 100 levels (the decoders and messages
 * that walk a value recursively would overflow the stack on a 10,000-deep array a model can write). For tools made
 * with `fromDefinition`, which read their arguments themselves.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseArguments = (toolName: string, argumentsText: string): Result.Result<unknown, string> => {
  const text = argumentsText.trim() === "" ? "{}" : argumentsText
  if (!jsonDepthWithin(text)) {
    return Result.fail(`the arguments of tool "${toolName}" nest deeper than ${maxJsonDepth} levels: ${cut(text, 200)}`)
  }
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(`the arguments of tool "${toolName}" are not valid JSON (${errorMessage(error)}): ${cut(text, 200)}`)
  }
}

/** Why edited arguments nested too deep are refused. */
const tooDeep = (toolName: string): string => `the arguments of tool "${toolName}" nest deeper than ${maxJsonDepth} levels`

/**
 * The `call` of each tool made by `make`, mapped to the same call on arguments already parsed (`parsedArguments`).
 * Keyed by the function, not carried on the tool: a wrapper that spreads a tool and replaces its `call` (as the
 * durable tools do) must not be bypassed, and its own `call` is not in this map.
 */
/** The schema check of edited arguments of each tool `make` defined, by its `call` (for `withApproval`). */
const editChecks = new WeakMap<Tool<unknown>["call"], (value: unknown) => Result.Result<string, string>>()
const parsedCalls = new WeakMap<Tool<unknown>["call"], (value: unknown) => Effect.Effect<Outcome, never, unknown>>()

/**
 * Defines a tool. The JSON schema sent to the model is derived once, here.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, I, A, E = never, R = never>(options: MakeOptions<P, I, A, E, R>): Tool<R> => {
  const parameters = parametersSchema(options.parameters)
  const decodeStrict = Schema.decodeUnknownResult(options.parameters)
  const ast = SchemaAST.toEncoded(options.parameters.ast)
  const format = options.format ?? formatResult
  const name = options.name

  const decode = (raw: unknown): Result.Result<P, string> => {
    const strict = decodeStrict(raw)
    if (Result.isSuccess(strict)) return Result.succeed(strict.success)
    const lenient = decodeStrict(coerce(ast, raw))
    if (Result.isSuccess(lenient)) return Result.succeed(lenient.success)
    return Result.fail(formatSchemaError(`invalid arguments for tool "${name}"`, strict.failure, raw))
  }

  const failed = (cause: Cause.Cause<unknown>): Outcome => ({
    content: `ERROR: tool "${name}" failed: ${describeCause(cause)}`,
    isError: true
  })
  const partsOf = options.parts
  const formatted = (result: A): Outcome => {
    try {
      if (partsOf === undefined) return { content: format(result), isError: false }
      const parts = partsOf(result)
      return parts === undefined || parts.length === 0
        ? { content: format(result), isError: false }
        : { content: format(result), isError: false, parts }
    } catch (defect) {
      return failed(Cause.die(defect))
    }
  }

  const callParsed = (value: unknown): Effect.Effect<Outcome, never, R> => {
    const params = decode(value)
    if (Result.isFailure(params)) return Exit.succeed({ content: `ERROR: ${params.failure}`, isError: true })
    const handled = options.handler(params.success)
    // A handler that answers at once (`Effect.succeed`, `Effect.fail`) gives an `Exit`: its outcome is an `Exit`
    // too, which `execute` reads without running a fiber or arming a timeout.
    const done = exitOf(handled)
    if (done !== undefined) {
      if (Exit.isSuccess(done)) return Exit.succeed(formatted(done.value))
      return Cause.hasInterruptsOnly(done.cause) ? Exit.failCause(done.cause as Cause.Cause<never>) : Exit.succeed(failed(done.cause))
    }
    return handled.pipe(
      Effect.map(formatted),
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : Effect.succeed(failed(cause))
      )
    )
  }

  const call = (argumentsText: string): Effect.Effect<Outcome, never, R> => {
    const parsed = parseArguments(name, argumentsText)
    return Result.isFailure(parsed) ? Exit.succeed({ content: `ERROR: ${parsed.failure}`, isError: true }) : callParsed(parsed.success)
  }
  parsedCalls.set(call, callParsed as (value: unknown) => Effect.Effect<Outcome, never, unknown>)
  // Depth first: a person's edit is any JSON value, and a deep one would overflow the decoder's stack.
  const check = (value: unknown): Result.Result<string, string> =>
    valueDepthWithin(value) ? Result.map(decode(value), () => JSON.stringify(value)) : Result.fail(tooDeep(name))
  editChecks.set(call, check)

  const needsApproval = options.needsApproval
  const approval: Approval<R> | undefined = needsApproval === undefined || needsApproval === false
    ? undefined
    : {
      needed: needsApproval === true ? () => Effect.succeed(true) : (argumentsText) => {
        const parsed = parseArguments(name, argumentsText)
        const params = Result.isSuccess(parsed) ? decode(parsed.success) : undefined
        // Arguments that do not decode fail the call as they are: there is nothing to approve.
        return params === undefined || Result.isFailure(params) ? Effect.succeed(false) : needsApproval(params.success)
      },
      check,
      timeout: options.approvalTimeout !== undefined ? Duration.fromInputUnsafe(options.approvalTimeout) : undefined
    }

  return {
    [TypeId]: TypeId,
    name,
    description: options.description,
    definition: { name, description: options.description, parameters },
    timeout: options.timeout !== undefined ? Duration.fromInputUnsafe(options.timeout) : defaultTimeout,
    call,
    ...(approval !== undefined ? { approval } : {})
  }
}

/**
 * The tool with its calls waiting for a person's approval (`HumanLoop`): every call, or those `needsApproval`
 * says (on the argument text); edited arguments must be a JSON object. For tools `make` did not define (an MCP
 * server's, an `effect/ai` toolkit's) — `make` takes `needsApproval` itself.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Tool } from "valet"
 *
 * const deleteFile = Tool.make({
 *   name: "delete_file",
 *   description: "Deletes a file",
 *   parameters: Schema.Struct({ path: Schema.String }),
 *   handler: ({ path }) => Effect.succeed(`deleted ${path}`)
 * })
 * const guarded = Tool.withApproval(deleteFile, { timeout: "10 minutes" })
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const withApproval = <R, R2 = never>(
  tool: Tool<R>,
  options: {
    readonly needsApproval?: ((argumentsText: string) => Effect.Effect<boolean, never, R2>) | undefined
    readonly timeout?: Duration.Input | undefined
  } = {}
): Tool<R | R2> => ({
  ...tool,
  approval: {
    needed: options.needsApproval ?? (() => Effect.succeed(true)),
    // A tool `make` defined checks edits with its schema (needing approval or not until now: a policy may add it, as
    // DeepAgent's `approvals` does to its file tools); another's, as a JSON object.
    check: tool.approval?.check ?? editChecks.get(tool.call) ?? ((value) =>
      !valueDepthWithin(value)
        ? Result.fail(tooDeep(tool.name))
        : Predicate.isObject(value) && !Array.isArray(value)
        ? Result.succeed(JSON.stringify(value))
        : Result.fail(`the arguments of tool "${tool.name}" must be a JSON object`)),
    timeout: options.timeout !== undefined ? Duration.fromInputUnsafe(options.timeout) : undefined
  }
})

/**
 * Options of `fromDefinition`.
 *
 * @since 0.2.0
 * @category options
 */
export interface DefinitionOptions<R> {
  readonly name: string
  readonly description: string
  /** The JSON schema of the arguments object, as the model is shown it. */
  readonly parameters: Model.ToolDefinition["parameters"]
  /** Runs one call on the model's argument text; failures must already be error outcomes. */
  readonly call: (argumentsText: string) => Effect.Effect<Outcome, never, R>
  readonly timeout?: Duration.Input | undefined
}

/**
 * A tool defined by its JSON schema and a call on the raw argument text: for tools valet does not decode itself —
 * an `effect/ai` toolkit's (`EffectAi.toolsOf`), a remote server's. `make` is the way to write one.
 *
 * @since 0.2.0
 * @category constructors
 */
export const fromDefinition = <R>(options: DefinitionOptions<R>): Tool<R> => ({
  [TypeId]: TypeId,
  name: options.name,
  description: options.description,
  definition: { name: options.name, description: options.description, parameters: options.parameters },
  timeout: options.timeout !== undefined ? Duration.fromInputUnsafe(options.timeout) : defaultTimeout,
  call: options.call
})

/**
 * Whether a value is a `Tool`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isTool = (u: unknown): u is Tool<unknown> => Predicate.hasProperty(u, TypeId)

/**
 * The result of one executed tool call, ready to send back to the model.
 *
 * @since 0.1.0
 * @category models
 */
export interface Result {
  readonly toolCallId: string
  readonly name: string
  readonly content: string
  readonly isError: boolean
  /** The outcome's parts (see `Outcome.parts`). @since 0.2.0 */
  readonly parts?: ReadonlyArray<Model.Part> | undefined
}

/**
 * Options of `execute`.
 *
 * @since 0.1.0
 * @category options
 */
export interface ExecuteOptions {
  /** Results longer than this are cut, with a note of how much was cut. */
  readonly maxResultChars?: number | undefined
  /**
   * The JSON value of the call's argument text (`{}` for `""`), when the caller has parsed it already: a tool made by
   * `make` then decodes it instead of parsing the text again. Must be what `JSON.parse` makes of that text.
   */
  readonly parsedArguments?: unknown
}

/**
 * Tools indexed by name, built once per run so each call is a map lookup.
 *
 * @since 0.1.0
 * @category models
 */
export interface Toolkit<R> {
  readonly tools: ReadonlyArray<Tool<R>>
  readonly definitions: ReadonlyArray<Model.ToolDefinition>
  readonly byName: ReadonlyMap<string, Tool<R>>
}

/**
 * Indexes a list of tools by name. A later tool with the same name replaces an earlier one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolkit = <R>(tools: ReadonlyArray<Tool<R>>): Toolkit<R> => {
  const byName = new Map<string, Tool<R>>()
  for (const tool of tools) byName.set(tool.name, tool)
  return { tools, definitions: [...byName.values()].map((tool) => tool.definition), byName }
}

/**
 * Executes one tool call: looks the tool up, decodes the arguments, runs the handler under its timeout and
 * cuts a long result. Never fails; interruption still interrupts the handler (and runs its finalizers).
 *
 * @since 0.1.0
 * @category execution
 */
export const execute = <R>(
  kit: Toolkit<R>,
  call: Model.ToolCall,
  options?: ExecuteOptions
): Effect.Effect<Result, never, R> => {
  const tool = kit.byName.get(call.name)
  const maxChars = options?.maxResultChars ?? defaultMaxResultChars
  if (tool === undefined) {
    const known = [...kit.byName.keys()]
    const content = `ERROR: unknown tool "${call.name}"; available tools: ${known.length > 0 ? known.join(", ") : "(none)"}`
    return Effect.succeed({ toolCallId: call.id, name: call.name, content, isError: true })
  }
  const completed = (outcome: Outcome): Result =>
    outcome.parts !== undefined && outcome.parts.length > 0
      ? { toolCallId: call.id, name: call.name, content: truncate(outcome.content, maxChars), isError: outcome.isError, parts: outcome.parts }
      : { toolCallId: call.id, name: call.name, content: truncate(outcome.content, maxChars), isError: outcome.isError }
  const callParsed = options?.parsedArguments !== undefined ? parsedCalls.get(tool.call) : undefined
  const callWithId = callParsed === undefined ? ToolCalls.withCallId.get(tool.call as (argumentsText: string) => Effect.Effect<Outcome>) : undefined
  const running = callParsed !== undefined
    ? (callParsed(options!.parsedArguments) as Effect.Effect<Outcome, never, R>)
    : callWithId !== undefined
    ? (callWithId(call.id, call.arguments) as Effect.Effect<Outcome, never, R>)
    : tool.call(call.arguments)
  // Already done (a pure handler, arguments that did not decode): nothing to time out.
  const done = exitOf(running)
  if (done !== undefined) return Exit.isSuccess(done) ? Exit.succeed(completed(done.value)) : Exit.failCause(done.cause)
  // Effect 4's own timeout costs about 1.5 us here (Effect 3's raced two fibers: 60-100 us, which is why this
  // once ran the handler synchronously first).
  return Effect.timeoutOption(running, tool.timeout).pipe(
    Effect.map((outcome): Result =>
      outcome._tag === "Some" ? completed(outcome.value) : {
        toolCallId: call.id,
        name: call.name,
        content: `ERROR: tool "${call.name}" timed out after ${Duration.format(tool.timeout)}`,
        isError: true
      }
    )
  )
}

/** The effect itself when it is already an `Exit` (what `Effect.succeed` and `Effect.fail` build). */
const exitOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? (effect as Exit.Exit<A, E>) : undefined

/**
 * Cuts a text to `maxChars`, noting how many characters were cut.
 *
 * @since 0.1.0
 * @category utils
 */
export const truncate = (text: string, maxChars: number): string =>
  text.length <= maxChars ? text : `${text.slice(0, maxChars)}\n[truncated: ${text.length - maxChars} more characters]`

const formatResult = (result: unknown): string => {
  if (typeof result === "string") return result
  if (result === undefined) return ""
  try {
    return JSON.stringify(result) ?? String(result)
  } catch {
    return String(result)
  }
}

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

const errorMessage = (error: unknown): string => {
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") {
    const tag = Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? `${error._tag}: ` : ""
    return `${tag}${error.message}`
  }
  if (Predicate.hasProperty(error, "_tag") && typeof error._tag === "string") return error._tag
  return formatResult(error)
}

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some") return errorMessage(failure.value)
  const defect = Cause.findDefect(cause)
  if (Result.isSuccess(defect)) return `defect: ${errorMessage(defect.success)}`
  return Cause.pretty(cause)
}
