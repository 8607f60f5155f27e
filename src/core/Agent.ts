/**
 * An agent is a name, instructions, an architecture (ReAct unless told otherwise), tools, and optionally its own
 * model. `run` answers a `RunResult`; `stream` streams the same run's events, ending with a `RunCompleted` that
 * holds the same result. Architectures run sub-agents with `runChild`.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, ScriptedModel, Tool } from "valet"
 *
 * const add = Tool.make({
 *   name: "add",
 *   description: "Adds two numbers",
 *   parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
 *   handler: ({ a, b }) => Effect.succeed(a + b)
 * })
 *
 * // ReAct by default: the model asks for `add`, reads its result, then answers.
 * const agent = Agent.make({ name: "calculator", instructions: "Use the tools to compute.", tools: [add] })
 *
 * const answer = Agent.run(agent, "What is 2 + 3?").pipe(
 *   Effect.map((result) => result.output), // "2 + 3 = 5"
 *   Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] }, "2 + 3 = 5"]))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Clock, ConfigProvider, Console, Context, Effect, type Layer, Predicate, Random, References, Schema, Scope, Stream, Tracer } from "effect"
import { dual } from "effect/Function"
import { type AgentError, InvalidAgent, InvalidOptions, SessionConflict, SubAgentFailed } from "./AgentError.js"
import type * as AgentEvent from "./AgentEvent.js"
import * as Architecture from "./internal/runtime.js"
import * as Budget from "./Budget.js"
import { randomHex20 } from "./internal/ids.js"
import { isNameLike, nameProblem as nameProblem_ } from "./internal/names.js"
import * as Guardrail from "./Guardrail.js"
import * as Output from "./internal/output.js"
import * as Spans from "./internal/spans.js"
import * as ReActInternal from "./internal/toolLoop.js"
import * as Model from "./Model.js"
import * as Turn from "./internal/threads/turn.js"
import * as Threads from "./Threads.js"
import type * as Tool from "./Tool.js"

const TypeId: unique symbol = Symbol.for("valet/Agent")

/**
 * An agent whose runs need the services `R`: those of its architecture, its tools and its model layer, minus
 * `Model` when it carries its own.
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent<out R = never> extends Architecture.AgentDefinition {
  readonly [TypeId]: { readonly _R: (_: never) => R }
}

/**
 * Whether a value is an `Agent`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isAgent = (u: unknown): u is Agent<unknown> => Predicate.hasProperty(u, TypeId)

/**
 * The default `maxTurns`: model turns of the tool loop before the run stops, interrupted with `max_turns_exceeded`,
 * so a model that keeps calling tools cannot loop forever.
 *
 * @since 0.1.0
 * @category options
 */
export const defaultMaxTurns = 50

/**
 * Options of `make`.
 *
 * @since 0.1.0
 * @category options
 */
export interface MakeOptions<RA, RT> {
  readonly name: string
  readonly instructions: string
  /** How the agent works; ReAct by default. */
  readonly architecture?: Architecture.Architecture<RA> | undefined
  readonly tools?: ReadonlyArray<Tool.Tool<RT>> | undefined
  readonly maxTurns?: number | undefined
  /** Input, output and tool checks of every run of the agent (`Guardrail`). */
  readonly guardrails?: Guardrail.Guardrails | undefined
}

/**
 * An agent's requirements, read from its options only: an agent written inside an architecture's options
 * (`Supervisor.make({ workers: [Agent.make(…)] })`) would otherwise take them from the option's type,
 * `Agent<unknown>` (a conditional type is no inference site), and the architecture would need `unknown`.
 */
type FromOptions<R> = [R] extends [infer A] ? A : never

/**
 * Defines an agent that uses the `Model` in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export function make<RA = Model.Model, RT = never>(
  options: MakeOptions<RA, RT> & { readonly model?: undefined }
): Agent<FromOptions<RA | RT>>
/**
 * Defines an agent with its own model layer (an actor on one model, its critic on another). The layer is built
 * once per run; a layer that can fail with an `AgentError` (`OpenAiCompatible.layerNode`'s `InvalidOptions`)
 * fails the run with it.
 *
 * @since 0.1.0
 * @category constructors
 */
export function make<RA = Model.Model, RT = never, RM = never>(
  options: MakeOptions<RA, RT> & { readonly model: Layer.Layer<Model.Model, AgentError, RM> }
): Agent<FromOptions<Exclude<RA, Model.Model> | RT | RM>>
export function make(
  options: MakeOptions<unknown, unknown> & { readonly model?: Layer.Layer<Model.Model, AgentError, unknown> | undefined }
): Agent<unknown> {
  return {
    [TypeId]: { _R: (_: never) => _ },
    name: options.name,
    instructions: options.instructions,
    architecture: options.architecture ?? ReActInternal.defaultArchitecture,
    tools: options.tools ?? [],
    // Provided around the whole run, so it is built once per run (not per call).
    model: options.model,
    maxTurns: options.maxTurns ?? defaultMaxTurns,
    guardrails: options.guardrails
  }
}

/**
 * A copy of an agent with some definitions replaced; its model layer and the services given to it kept.
 *
 * @example
 * ```ts
 * import { Agent } from "valet"
 *
 * const writer = Agent.make({ name: "writer", instructions: "Write plainly." })
 * // The same agent under another name, with stricter instructions.
 * const editor = Agent.clone(writer, { name: "editor", instructions: "Cut every word you can." })
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const clone = <R, RA = never, RT = never>(
  agent: Agent<R>,
  changes: {
    readonly name?: string | undefined
    readonly instructions?: string | undefined
    readonly architecture?: Architecture.Architecture<RA> | undefined
    readonly tools?: ReadonlyArray<Tool.Tool<RT>> | undefined
    readonly maxTurns?: number | undefined
    readonly guardrails?: Guardrail.Guardrails | undefined
  }
): Agent<R | RA | RT> => ({ ...agent, ...changes } as Agent<R | RA | RT>)

/**
 * `clone`'s former name.
 *
 * @deprecated Use `Agent.clone`.
 * @since 0.1.0
 * @category constructors
 */
export const with_: typeof clone = clone

/**
 * The agent with services given to it, so that its runs need them no more: they are provided around each run (its
 * sub-agents' included), under the agent's own model, in place of the caller's. What belongs to the fiber running
 * the run stays the caller's: the tracing parent span, log annotations and levels, the clock, random, console and
 * config provider are left out of the context given. `Agents.layer` does this with
 * the services of the context it is built in, so that one agent value runs on `ScriptedModel` in a test and on a
 * real model in production.
 *
 * @example
 * ```ts
 * import { Agent, ScriptedModel } from "valet"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief." }) // Agent<Model>
 * // Agent<never>: its runs take this scripted model, whatever the caller's context holds.
 * const ready = Agent.provide(assistant, ScriptedModel.context(["Hi!"]))
 * const answer = Agent.run(ready, "Hello")
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const provide: {
  <R2>(context: Context.Context<R2>): <R>(agent: Agent<R>) => Agent<Exclude<R, R2>>
  <R, R2>(agent: Agent<R>, context: Context.Context<R2>): Agent<Exclude<R, R2>>
} = dual(2, <R, R2>(agent: Agent<R>, context: Context.Context<R2>): Agent<Exclude<R, R2>> => {
  const given = withoutAmbient(context)
  return {
    ...agent,
    // Given twice, the first given wins, as with nested `Effect.provide`.
    context: agent.context === undefined ? given : Context.merge(given, agent.context)
  } as Agent<Exclude<R, R2>>
})

/**
 * The keys of what belongs to the fiber running a run, not to the services given to its agent: the tracing parent
 * and settings, log annotations, levels and loggers, the clock, random, console, config provider and scheduler. A
 * context captured where a layer is built holds the builder's (a startup span, startup log annotations); given to
 * every run, they would replace the request's own.
 */
const ambientKeys: ReadonlySet<string> = new Set([
  ...(Object.values(References) as ReadonlyArray<unknown>).flatMap((value) =>
    // References are callable objects: `typeof` says "function".
    (typeof value === "object" || typeof value === "function") && value !== null && "key" in value &&
      Context.isReference(value as Context.Key<unknown, unknown>)
      ? [String(value.key)]
      : []
  ),
  Tracer.ParentSpan.key,
  Tracer.Tracer.key,
  Clock.Clock.key,
  Random.Random.key,
  Console.Console.key,
  ConfigProvider.ConfigProvider.key,
  Scope.Scope.key
])

const withoutAmbient = <R>(context: Context.Context<R>): Context.Context<R> => {
  let ambient = false
  for (const key of context.mapUnsafe.keys()) {
    if (ambientKeys.has(key)) {
      ambient = true
      break
    }
  }
  if (!ambient) return context
  const kept = new Map<string, unknown>()
  for (const [key, value] of context.mapUnsafe) if (!ambientKeys.has(key)) kept.set(key, value)
  return Context.makeUnsafe<R>(kept)
}

/**
 * Options of `run` and `stream`.
 *
 * @since 0.1.0
 * @category options
 */
export interface RunOptions {
  /** The session id of the run; `sess_<random>` by default. Letters, digits, `-`, `.`, `:` and single `_`. */
  readonly sessionId?: string | undefined
  /** Limits for this run (shared by its sub-agents). Without it, a `Budget` in context applies, if any. */
  readonly budget?: Budget.Limits | undefined
  /** Earlier messages of a conversation, placed between the instructions and the prompt. */
  readonly history?: ReadonlyArray<Model.Message> | undefined
  /**
   * Completes when the run should stop (`Deferred.await(cancelled)`): everything in flight is interrupted
   * (requests aborted, processes killed) and the run ends `interrupted` with reason `cancelled`, keeping its
   * output so far — where interrupting the fiber would leave no result at all.
   */
  readonly cancel?: Effect.Effect<void> | undefined
  /** Guardrails of this run, checked after the agent's own (`Guardrail`); its `onOutputTrip` / `onToolTrip` win. */
  readonly guardrails?: Guardrail.Guardrails | undefined
}

/**
 * Structured output: the run's answer is decoded with `output` into `RunResult.value`. An answer that does not
 * decode is shown back to the model with the error (asking natively, `response_format` json_schema) up to
 * `outputRetries` times (default 2); then the run fails with `OutputInvalid`. The tool loop asks natively from the
 * start when the agent has no tools. Each attempt is a `Progress` event `output.attempt`.
 *
 * @since 0.2.0
 * @category options
 */
export interface OutputOptions<A, I> {
  readonly output: Schema.Codec<A, I>
  readonly outputRetries?: number | undefined
}

/**
 * A run's result with its decoded structured output.
 *
 * @since 0.2.0
 * @category models
 */
export type ResultWithValue<A> = AgentEvent.RunResult & { readonly value: A }

/**
 * Options of `stream`.
 *
 * @since 0.1.0
 * @category options
 */
export interface StreamOptions extends RunOptions {
  /** Stream the model's text as `TextDelta` events as it is generated (default true). */
  readonly textDeltas?: boolean | undefined
}

const sessionIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/

/**
 * Why `sessionId` cannot be a root run's session id, or `undefined` when it can: letters, digits, `-`, `.`, `:`
 * and single `_` (`__` separates sub-agents), at most 128 characters. For ids a client chooses (a server's
 * `sessionId` field), checked before the run starts.
 *
 * @since 0.2.0
 * @category names
 */
export const sessionIdProblem = (sessionId: string): string | undefined =>
  sessionIdPattern.test(sessionId) && !sessionId.includes("__") && sessionId.length <= 128
    ? undefined
    : `invalid session id ${JSON.stringify(sessionId.length > 60 ? `${sessionId.slice(0, 57)}...` : sessionId)}: use letters, digits, -, ., : and single _ ("__" separates sub-agents), at most 128 characters`

/**
 * Why `name` cannot be an agent's name (or a worker's, a route's, a solver's), or `undefined` when it can: it becomes
 * part of session ids, MCP tool names and OpenAI model names, so letters and digits joined by single `-` or `_`, at
 * most 48 characters.
 *
 * @since 0.2.0
 * @category names
 */
export const nameProblem: (name: string) => string | undefined = nameProblem_

/**
 * A session id a client may choose, as a schema (see `sessionIdProblem`).
 *
 * @since 0.2.0
 * @category names
 */
export const SessionId = Schema.String.check(Schema.makeFilter((id: string) => sessionIdProblem(id) ?? true))

const newSessionId = (): string => `sess_${randomHex20()}`

/**
 * A thread turn's run options: `checkedHistory` leading messages of `history` are the thread's stored ones, whose
 * user messages the input guardrails checked in their own turns (see `Architecture.Input.checkedHistory`).
 */
interface TurnRunOptions {
  readonly checkedHistory?: number | undefined
}

/** The options of a turn's run: the thread's history first (already checked), then the caller's. */
const turnOptions = <O extends { readonly history?: ReadonlyArray<Model.Message> | undefined }>(
  options: O | undefined,
  history: ReadonlyArray<Model.Message>
): O & TurnRunOptions & { readonly history: ReadonlyArray<Model.Message> } => ({
  ...options as O,
  history,
  checkedHistory: history.length - (options?.history?.length ?? 0)
})

// Written without a generator, like the rest of a run's start: a generator frame and its objects stay alive
// for as long as the run, in every concurrent session.
const rootInput = (
  agent: Agent<unknown>,
  task: Task,
  options: (RunOptions & Partial<OutputOptions<unknown, unknown>> & TurnRunOptions) | undefined,
  streamText: boolean,
  resources: Architecture.Resources,
  span: Tracer.Span | undefined
): Effect.Effect<Architecture.Input, InvalidAgent | InvalidOptions> =>
  Effect.suspend((): Effect.Effect<Architecture.Input, InvalidAgent | InvalidOptions> => {
    // A task given as parts: checked here, naming the part, so a bad one fails the run before anything starts.
    if (typeof task !== "string") {
      const invalid = Model.checkContent([Model.user(task)])
      if (invalid !== undefined) {
        return Effect.fail(new InvalidOptions({ module: "Agent", message: `Agent: the task's part ${invalid.partIndex}: ${invalid.reason}` }))
      }
    }
    const sessionId = options?.sessionId ?? newSessionId()
    span?.attribute("valet.session_id", sessionId)
    const problem = sessionIdProblem(sessionId)
    if (problem !== undefined) return Effect.fail(new InvalidOptions({ module: "Agent", message: `Agent: ${problem}` }))
    const retries = options?.outputRetries
    if (retries !== undefined && (!Number.isInteger(retries) || retries < 0)) {
      return Effect.fail(new InvalidOptions({
        module: "Agent",
        message: `Agent: outputRetries must be an integer >= 0, got ${retries}`
      }))
    }
    if (!Number.isInteger(agent.maxTurns) || agent.maxTurns < 1) {
      return Effect.fail(new InvalidAgent({ agent: agent.name, message: `maxTurns must be an integer >= 1, got ${agent.maxTurns}` }))
    }
    const budget = options?.budget !== undefined
      ? Budget.make(options.budget)
      : Effect.map(Effect.serviceOption(Budget.Budget), (tracker) => tracker._tag === "Some" ? tracker.value : Budget.unlimited)
    const guardrails = Guardrail.merge(agent.guardrails, options?.guardrails)
    return Effect.map(budget, (budget): Architecture.Input => ({
      agent,
      prompt: typeof task === "string" ? task : Model.textOf(task),
      ...(typeof task !== "string" ? { promptParts: task } : {}),
      history: options?.history ?? [],
      sessionId,
      rootSessionId: sessionId,
      budget,
      streamText,
      parent: undefined,
      resources,
      ...(span !== undefined ? { span } : {}),
      ...(options?.output !== undefined ? { output: Output.make(options.output, retries) } : {}),
      ...(options?.cancel !== undefined ? { cancel: options.cancel } : {}),
      ...(guardrails !== undefined ? { guardrails } : {}),
      ...(options?.checkedHistory !== undefined && options.checkedHistory > 0 ? { checkedHistory: options.checkedHistory } : {})
    }))
  })


/**
 * What a run is asked: text, or parts (text with images, files, audio) that go in its first user message. Events,
 * guardrails and architectures that write their own prompts read its text (`Model.textOf`).
 *
 * @since 0.2.0
 * @category models
 */
export type Task = string | ReadonlyArray<Model.Part>

/**
 * Options of a turn on a thread (`run` / `stream` with `thread`): the thread's id alone, or with how it is held,
 * read and kept (`Threads`).
 *
 * @since 0.2.0
 * @category options
 */
export interface ThreadOptions {
  /**
   * The thread this run is a turn of: its last messages are the run's history (before `history`, if given), and the
   * turn's messages are appended when the run ends. Needs `Threads` in context.
   */
  readonly thread: string | Threads.TurnOptions
}

// A run's body with the emitter it reports to: `unobserved` for a plain run, a recorder for a turn on a thread.
const runWith = (
  agent: Agent<unknown>,
  prompt: Task,
  options: (RunOptions & Partial<OutputOptions<unknown, unknown>> & TurnRunOptions) | undefined,
  emitter: Architecture.Emitter
): Effect.Effect<AgentEvent.RunResult, AgentError, unknown> =>
  // What `Effect.withSpan` around an `Effect.onExit` would do, with one exit handler (ending the span and closing
  // the run's resources) and the span provided together with the run's context: each wrapper is a frame the
  // run keeps for its whole life, in every concurrent session. `makeSpan` captures no stack (an Error per run).
  Effect.flatMap(
    Effect.makeSpan(Spans.runSpanName(agent.name), { attributes: Spans.runAttributes(agent.name, agent.architecture.name) }),
    (span) => {
      const resources = Architecture.makeResources()
      return Effect.onExit(
        Effect.flatMap(
          rootInput(agent, prompt, options, false, resources, span),
          (input) => agent.architecture.execute(input, emitter)
        ),
        (exit) => Effect.andThen(Architecture.closeResources(resources, exit), Spans.end(span, exit))
      )
    }
  )

/**
 * Runs an agent on a prompt and answers its result. A spent budget is not a failure: the result is marked
 * interrupted (`budget:<limit>`) and keeps the best output so far. Interrupting the fiber stops the run at once.
 * With `thread`, the run is a turn of that thread (`Threads`): its history is loaded, its messages appended.
 *
 * @since 0.1.0
 * @category running
 */
export const run: {
  <R, A, I>(
    agent: Agent<R>,
    prompt: Task,
    options: RunOptions & OutputOptions<A, I> & ThreadOptions
  ): Effect.Effect<ResultWithValue<A>, AgentError | Threads.ThreadError, R | Threads.Threads>
  <R>(
    agent: Agent<R>,
    prompt: Task,
    options: RunOptions & ThreadOptions
  ): Effect.Effect<AgentEvent.RunResult, AgentError | Threads.ThreadError, R | Threads.Threads>
  <R, A, I>(
    agent: Agent<R>,
    prompt: Task,
    options: RunOptions & OutputOptions<A, I>
  ): Effect.Effect<ResultWithValue<A>, AgentError, R>
  <R>(agent: Agent<R>, prompt: Task, options?: RunOptions): Effect.Effect<AgentEvent.RunResult, AgentError, R>
} = <R>(
  agent: Agent<R>,
  prompt: Task,
  options?: RunOptions & Partial<OutputOptions<unknown, unknown>> & Partial<ThreadOptions>
  // The overloads say what the result holds: `value` is set when `output` was given (see `Architecture.Input.output`).
): Effect.Effect<never, AgentError, R> => {
  const thread = options?.thread
  if (thread === undefined) return runWith(agent, prompt, options, Architecture.unobserved) as Effect.Effect<never, AgentError, R>
  return Effect.flatMap(Effect.service(Threads.Threads), (threads) =>
    Turn.run(threads, thread, prompt, options?.history, (history, emitter, tools) =>
      runWith(withTools(agent, tools), prompt, turnOptions(options, history), emitter))) as unknown as Effect.Effect<never, AgentError, R>
}

/** The agent with the tools a thread turn gives it (its working memory's), when there are any. */
const withTools = <R>(agent: Agent<R>, tools: ReadonlyArray<Tool.Tool>): Agent<R> =>
  tools.length === 0 ? agent : clone(agent, { tools: [...agent.tools, ...tools] }) as Agent<R>

const streamWith = (
  agent: Agent<unknown>,
  prompt: Task,
  options: (StreamOptions & Partial<OutputOptions<unknown, unknown>> & TurnRunOptions) | undefined
): Stream.Stream<AgentEvent.AgentEvent, AgentError, unknown> =>
  Architecture.streamEvents(
    Effect.suspend(() => {
      const resources = Architecture.makeResources()
      return Effect.tap(
        rootInput(agent, prompt, options, options?.textDeltas ?? true, resources, undefined),
        () => Effect.addFinalizer((exit) => Architecture.closeResources(resources, exit))
      )
    }),
    agent.architecture.execute
  )

/**
 * Runs an agent and streams its events, sub-agents' included: `RunStarted` first, one `RunCompleted` (holding
 * the same result `run` answers) last. Stopping the stream early interrupts the run. With `thread`, a turn of that
 * thread, kept when the stream ends (however it ends).
 *
 * @since 0.1.0
 * @category running
 */
export const stream: {
  <R>(
    agent: Agent<R>,
    prompt: Task,
    options: StreamOptions & Partial<OutputOptions<unknown, unknown>> & ThreadOptions
  ): Stream.Stream<AgentEvent.AgentEvent, AgentError | Threads.ThreadError, R | Threads.Threads>
  <R>(
    agent: Agent<R>,
    prompt: Task,
    options?: StreamOptions & Partial<OutputOptions<unknown, unknown>>
  ): Stream.Stream<AgentEvent.AgentEvent, AgentError, R>
} = <R>(
  agent: Agent<R>,
  prompt: Task,
  options?: StreamOptions & Partial<OutputOptions<unknown, unknown>> & Partial<ThreadOptions>
): Stream.Stream<AgentEvent.AgentEvent, AgentError, R> => {
  const thread = options?.thread
  if (thread === undefined) return streamWith(agent, prompt, options) as Stream.Stream<AgentEvent.AgentEvent, AgentError, R>
  return Stream.unwrap(Effect.map(Effect.service(Threads.Threads), (threads) =>
    Turn.stream(threads, thread, prompt, options?.history, (history, tools) =>
      streamWith(withTools(agent, tools), prompt, turnOptions(options, history))))) as unknown as Stream.Stream<
      AgentEvent.AgentEvent,
      AgentError,
      R
    >
}

// ---------------------------------------------------------------------------------------------------------
// Sub-agents
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `runChild`.
 *
 * @since 0.1.0
 * @category sub-agents
 */
export interface ChildOptions {
  /** What the child is to its parent: `actor`, `critic`, `worker_search`… */
  readonly role: string
  /** Which one: a round, a number, or `1_round_2`. Omitted for a single child such as a `judge`. */
  readonly index?: number | string | undefined
  /** Earlier messages of a conversation, placed between the instructions and the prompt. */
  readonly history?: ReadonlyArray<Model.Message> | undefined
}


/**
 * The session id of a child: `<parent>__<role>` or `<parent>__<role>_<index>`.
 *
 * @since 0.1.0
 * @category sub-agents
 */
export const childSessionId = (parentSessionId: string, role: string, index?: number | string): string =>
  `${parentSessionId}__${role}${index !== undefined ? `_${index}` : ""}`

/**
 * Runs a sub-agent for the current run under a deterministic session id (`childSessionId`). Its events flow
 * into the parent's stream unchanged, its model calls and usage count for the parent, it shares the parent's
 * budget, and it is framed by `SubRunStarted` / `SubRunCompleted` events in the parent's session. A child that
 * fails makes this fail with `SubAgentFailed` (never an empty answer); an interrupted child answers its
 * interrupted result, which the caller must look at.
 *
 * @since 0.1.0
 * @category sub-agents
 */
export const runChild = <R>(
  agent: Agent<R>,
  prompt: string,
  options: ChildOptions
): Effect.Effect<
  AgentEvent.RunResult,
  SubAgentFailed | InvalidOptions | SessionConflict,
  R | Architecture.CurrentRun
> =>
  Effect.gen(function*() {
    const parent = Architecture.stateOf(yield* Architecture.CurrentRun)
    const index = options.index
    if (!isNameLike(options.role) || (index !== undefined && !isNameLike(String(index)))) {
      return yield* new InvalidOptions({
        module: "Agent.runChild",
        message: `Agent.runChild: invalid role ${JSON.stringify(options.role)} / index ${JSON.stringify(index)}: use letters and digits joined by single - or _`
      })
    }
    const sessionId = childSessionId(parent.sessionId, options.role, index)
    if (!parent.reserveChild(sessionId)) return yield* new SessionConflict({ sessionId })
    yield* Architecture.emitWith(parent, (timestamp) => ({
      _tag: "SubRunStarted",
      sessionId: parent.sessionId,
      timestamp,
      childSessionId: sessionId,
      role: options.role,
      agent: agent.name
    }))
    const input: Architecture.Input = {
      agent,
      prompt,
      history: options.history ?? [],
      sessionId,
      rootSessionId: parent.rootSessionId,
      budget: parent.budget,
      streamText: parent.streamText,
      parent,
      resources: parent.resources
    }
    return yield* (agent.architecture.execute(input, parent.emitter) as Effect.Effect<AgentEvent.RunResult, AgentError, R>)
      .pipe(
        Effect.tap((result) =>
          Architecture.emitWith(parent, (timestamp) => ({
            _tag: "SubRunCompleted",
            sessionId: parent.sessionId,
            timestamp,
            childSessionId: sessionId,
            role: options.role,
            interrupted: result.interrupted,
            ...(result.interruptionReason !== undefined ? { interruptionReason: result.interruptionReason } : {}),
            modelCalls: result.modelCalls
          }))
        ),
        Effect.tapError((error) =>
          Architecture.emitWith(parent, (timestamp) => ({
            _tag: "SubRunCompleted",
            sessionId: parent.sessionId,
            timestamp,
            childSessionId: sessionId,
            role: options.role,
            interrupted: false,
            error: `${error._tag}: ${error.message}`,
            modelCalls: parent.children?.get(sessionId)?.modelCalls ?? 0
          }))
        ),
        Effect.mapError((error) => new SubAgentFailed({ sessionId, role: options.role, error }))
      )
  })
