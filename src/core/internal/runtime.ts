/**
 * The runtime of architectures: the run's state, its events, the model and tool calls made for it, sub-agents, and
 * the rules every architecture shares (a spent budget, a cancel or a stopped role ends the run with the best output
 * so far; structured output is decoded and repaired; the run's span). `Architecture` is the public contract and
 * toolkit over it; only core reads this module.
 */
import { type Cause, Clock, Context, Data, Deferred, type Duration, Effect, Exit, Layer, Predicate, Queue, Result, type Schema, Scope, Stream, Tracer } from "effect"
import { type AgentError, type BudgetExhausted, GuardrailFailed, GuardrailTripped, OutputInvalid, type Unanswered } from "../AgentError.js"
import { ContextLengthExceeded } from "../ModelError.js"
import * as AgentEvent from "../AgentEvent.js"
import * as Budget from "../Budget.js"
import * as Model from "../Model.js"
import * as ToolCalls from "./toolCalls.js"
import type { ModelError } from "../ModelError.js"
import * as Tool from "../Tool.js"
import * as Compaction from "../Compaction.js"
import * as Approval from "./approval.js"
import * as Compact from "./compact.js"
import * as Guard from "./guardrail.js"
import * as Question from "./question.js"
import * as Output from "./output.js"
import { yieldBeforeReading } from "./parse.js"
import * as Spans from "./spans.js"

const TypeId: unique symbol = Symbol.for("valet/Architecture")

/** Where events go. `observed` is false when nobody reads them (`Agent.run`): events are then not even built. */
export interface Emitter {
  readonly observed: boolean
  readonly emit: (event: AgentEvent.AgentEvent) => Effect.Effect<void>
  /**
   * Optional: hands the event over at once if that needs no waiting, answering whether it did (false: use `emit`,
   * which waits for room). Saves running an effect per event on the hot path. Only call it where `emit` would
   * run, so that events keep their order.
   */
  readonly unsafeEmit?: ((event: AgentEvent.AgentEvent) => boolean) | undefined
}

/** Emits an event: at once when the emitter can take it without waiting, else through its `emit`. */
const emitNow = (emitter: Emitter, event: AgentEvent.AgentEvent): Effect.Effect<void> =>
  emitter.unsafeEmit !== undefined && emitter.unsafeEmit(event) ? Effect.void : emitter.emit(event)

/** `Effect.as` on an emit's result, without running anything when the event went out at once. */
const thenSucceed = <A>(first: Effect.Effect<void>, value: A): Effect.Effect<A> =>
  first === Effect.void ? Effect.succeed(value) : Effect.as(first, value)

/** An emitter that drops everything. */
export const unobserved: Emitter = { observed: false, emit: () => Effect.void }

/**
 * What the runs of one root run share: the memo map that builds each agent's model layer once for all of them (an
 * actor called in three rounds keeps one HTTP client, and a scripted actor goes on with its script), and the
 * scope those layers live in, closed when the root run ends. Both are created on first use: most runs have no
 * agent with its own model, and a scope per run would cost every concurrent session a few kilobytes.
 */
export interface Resources {
  scope: Scope.Closeable | undefined
  memoMap: Layer.MemoMap | undefined
}

/** Fresh, empty resources for a root run. */
export const makeResources = (): Resources => ({ scope: undefined, memoMap: undefined })

/** Closes what a root run's resources opened, if anything. */
export const closeResources = (resources: Resources, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  resources.scope === undefined ? Effect.void : Scope.close(resources.scope, exit)

/**
 * What a run runs: an agent's definition. `Agent.Agent` is one; it is declared here so that this module, which
 * `Agent` builds on, does not import `Agent`.
 */
export interface AgentDefinition {
  readonly name: string
  readonly instructions: string
  readonly architecture: Architecture<unknown>
  readonly tools: ReadonlyArray<Tool.Tool<unknown>>
  /** The agent's own model: provided around all of its model calls, instead of the `Model` in context. */
  readonly model: Layer.Layer<Model.Model, AgentError, unknown> | undefined
  /**
   * Services given to the agent (`Agent.provide`), under its own model: what its runs, their sub-agents and its
   * model layer take in place of the caller's.
   */
  readonly context?: Context.Context<unknown> | undefined
  /** The default turn limit of tool loops (ReAct's `maxTurns`). */
  readonly maxTurns: number
  /** The agent's guardrails (`Guardrail`): every run of the agent, sub-runs included, is checked by them. */
  readonly guardrails?: Guard.Guardrails | undefined
}

/** What a run is started with. Built by `Agent.run`, `Agent.stream` and `Agent.runChild`. */
export interface Input {
  readonly agent: AgentDefinition
  /** The task's text (a task given as parts: `Model.textOf` of them): what events, guardrails and prompts read. */
  readonly prompt: string
  /**
   * The task as given when it holds more than text (images, files, audio): `conversation` puts these parts in the
   * first user message in place of `prompt`. Architectures that write their own prompts from `prompt` see the text.
   */
  readonly promptParts?: ReadonlyArray<Model.Part> | undefined
  /** Earlier messages of a conversation, placed between the instructions and the prompt. */
  readonly history: ReadonlyArray<Model.Message>
  readonly sessionId: string
  readonly rootSessionId: string
  readonly budget: Budget.Tracker
  /** Whether model calls stream their text (and emit `TextDelta` events) when someone observes the run. */
  readonly streamText: boolean
  /** The run this one is a sub-agent of: its model calls and usage roll up there. */
  readonly parent: RunContext | undefined
  readonly resources: Resources
  /** The run's tracing span (`invoke_agent <agent>`): the parent of the spans made while the program runs. */
  readonly span?: Tracer.Span | undefined
  /**
   * The structured output the caller asked for (root runs only): the answer is decoded with it after the program
   * ends, and repaired by asking again when it does not decode. A program may also ask natively for its answering
   * call (`Model.Request.responseFormat`), as the tool loop does when there are no tools.
   */
  readonly output?: Output.OutputSpec | undefined
  /**
   * Completes when the caller cancels the run (root runs only): everything in flight is interrupted and the run
   * ends completed, `interrupted` with reason `cancelled`, keeping its output so far.
   */
  readonly cancel?: Effect.Effect<void> | undefined
  /**
   * The run's guardrails: the agent's and the run's own (`Guardrail.merge`, set by `Agent.run` / `Agent.stream`).
   * Unset, the agent's apply.
   */
  readonly guardrails?: Guard.Guardrails | undefined
  /**
   * How many leading messages of `history` the input guardrails skip: a thread turn's stored messages, each checked
   * in its own turn. The rest of the history is the caller's, and each of its user messages is checked.
   */
  readonly checkedHistory?: number | undefined
}

/** What an architecture program returns; the runtime adds the counts and timing to make the `RunResult`. */
export interface Outcome {
  readonly output: string
  /** Set when the run stopped early; the reason becomes `RunResult.interruptionReason`. */
  readonly interrupted?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
  /** The decoded structured output (set by the runtime when `Input.output` is). */
  readonly value?: unknown
}

/** An architecture that needs the services `R` (typically `Model`). */
export interface Architecture<out R = never> {
  readonly [TypeId]: typeof TypeId
  readonly name: string
  /**
   * Runs and streams every event, ending with one `RunCompleted`. (`Agent.stream` streams `execute` itself, through
   * `streamEvents`, so the two must agree: `make` builds `run` that way.)
   */
  readonly run: (input: Input) => Stream.Stream<AgentEvent.AgentEvent, AgentError, R>
  /** Runs and sends every event to `emitter`; answers the same `RunResult` as the stream's `RunCompleted`. */
  readonly execute: (input: Input, emitter: Emitter) => Effect.Effect<AgentEvent.RunResult, AgentError, R>
  /**
   * The tools the program adds to the agent's (DeepAgent's file tools and `execute`), as its runs get them: for whoever
   * must know them outside a run — a durable decision checks edited arguments against the tool's schema.
   */
  readonly addedTools?: ReadonlyArray<Tool.Tool<unknown>> | undefined
  /**
   * The agent runs elsewhere (a remote A2A agent): an architecture that runs its agents' turns itself with a program
   * of its own (a Swarm's members) runs such an agent as it is instead, since its instructions and tools are not here.
   */
  readonly remote?: boolean | undefined
}

/** Whether a value is an `Architecture`. */
export const isArchitecture = (u: unknown): u is Architecture<unknown> => Predicate.hasProperty(u, TypeId)

// ---------------------------------------------------------------------------------------------------------
// The run in progress
// ---------------------------------------------------------------------------------------------------------

/** The run in progress, as an architecture program sees it. */
export interface RunContext {
  readonly sessionId: string
  readonly rootSessionId: string
  readonly agentName: string
  readonly architecture: string
  readonly budget: Budget.Tracker
  readonly streamText: boolean
  readonly emitter: Emitter
  readonly parent: RunContext | undefined
  /** Model calls made for this run so far, sub-agents included. */
  readonly modelCalls: number
  /** Tokens used for this run so far, sub-agents included. */
  readonly usage: Model.Usage
  /** The best output so far: what an interrupted run reports. */
  readonly output: string
}

/** The run the current fiber works for. Provided by the runtime to architecture programs. */
export class CurrentRun extends Context.Service<CurrentRun, RunContext>()("valet/Architecture/CurrentRun") {}

/** The mutable state behind `RunContext`; only this module and `Agent` write it. */
export class RunState implements RunContext {
  modelCalls = 0
  usage: Model.Usage = Model.emptyUsage
  output = ""
  /** Calls made by this session itself: numbers default step names. */
  ownCalls = 0
  /**
   * Whether model and tool calls get spans: only when a tracer is installed (`Telemetry.layer`, any `Tracer`
   * layer). Effect's built-in tracer keeps spans nowhere, and two spans per step would double the cost of a step.
   */
  traced = false
  /**
   * Sub-runs by session id; reserved (undefined) by `Agent.runChild` before the child's state exists. Made on the
   * first sub-run: most runs have none, and an empty map per run is memory every concurrent session holds.
   */
  children: Map<string, RunState | undefined> | undefined = undefined
  /** What the run reports as its metadata if a stopped role or a limit ends it (`Architecture.setMetadata`). */
  metadata: (() => Record<string, unknown>) | undefined = undefined
  /** The run's latest compaction (`Compaction`): what the next calls start from. */
  compaction: Compact.Compacted | undefined = undefined
  /** The characters of the messages the run's calls sent, so far (`Compaction`'s check measures only new ones). */
  measured: Compact.Measured | undefined = undefined
  /** What a `Model.fallback` chain tells when it moves on (`Model.CallContext.onFallback`): a `ModelFellBack`. */
  readonly onFallback = (note: Model.FallbackNote, step: string): Effect.Effect<void> =>
    emitWith(this, (timestamp) => ({
      _tag: "ModelFellBack",
      sessionId: this.sessionId,
      timestamp,
      step,
      from: note.from,
      to: note.to,
      reason: note.reason
    }))
  /**
   * Open while the input guardrails check (`Guardrail`): a model reply waits for it before the program reads it.
   * Undefined without input guardrails, and once they passed: the step then reads one field.
   */
  inputGate: Deferred.Deferred<void> | undefined = undefined
  /**
   * The tool guardrails and where their trips go; undefined without any (the step reads one field). A sub-run
   * takes its parent's, and its own come after them: a worker's calls are checked like the supervisor's, and more.
   */
  toolGuards: ToolGuards | undefined = undefined
  /** Whether the output guardrails checked the outcome (an outcome a limit made is checked at the run's end). */
  outputChecked = false
  /**
   * Set when the run has output guardrails: its model text is not streamed as `TextDelta` events, since a delta goes
   * out before the answer is checked (a redactor's email would reach the watcher before its rewrite).
   */
  textHeld = false
  constructor(
    readonly sessionId: string,
    readonly rootSessionId: string,
    readonly agentName: string,
    readonly architecture: string,
    readonly budget: Budget.Tracker,
    readonly streamText: boolean,
    readonly emitter: Emitter,
    readonly parent: RunState | undefined,
    readonly resources: Resources,
    /** The run's clock, read once: event timestamps then cost a method call, not an effect. */
    readonly clock: Clock.Clock
  ) {}

  /** The current time on the run's clock (`TestClock` in tests). */
  now(): number {
    return this.clock.currentTimeMillisUnsafe()
  }

  /** Counts one model call here and in every ancestor. */
  countCall(): void {
    this.ownCalls++
    for (let run: RunState | undefined = this; run !== undefined; run = run.parent) run.modelCalls++
  }

  /** Reserves a sub-run's session id; false when this run already has a sub-run under it. */
  reserveChild(sessionId: string): boolean {
    const children = this.children ??= new Map()
    if (children.has(sessionId)) return false
    children.set(sessionId, undefined)
    return true
  }

  /** Records a sub-run's state under its (reserved) session id. */
  setChild(state: RunState): void {
    ;(this.children ??= new Map()).set(state.sessionId, state)
  }

  /** Adds a call's tokens here and in every ancestor. */
  addUsage(usage: Model.Usage): void {
    for (let run: RunState | undefined = this; run !== undefined; run = run.parent) {
      run.usage = Model.addUsage(run.usage, usage)
    }
  }
}

/**
 * The state behind the run in context. The runtime is the only provider of `CurrentRun`, so the one cast of the
 * contract's read-only view back to its state is here.
 */
export const stateOf = (run: RunContext): RunState => run as RunState

/** Emits an event built from the current time, only when someone observes the run. */
export const emitWith = (run: RunContext, build: (timestamp: number) => AgentEvent.AgentEvent): Effect.Effect<void> => {
  if (!run.emitter.observed) return Effect.void
  // A run made by `make` holds its clock; any other `RunContext` reads the `Clock` in context.
  return run instanceof RunState
    ? Effect.suspend(() => emitNow(run.emitter, build(run.now())))
    : Effect.flatMap(Clock.currentTimeMillis, (now) => emitNow(run.emitter, build(now)))
}

const emitWarnings = (run: RunContext, warnings: ReadonlyArray<Budget.Warning>): Effect.Effect<void> =>
  warnings.length === 0
    ? Effect.void
    : Effect.forEach(warnings, (warning) =>
      emitWith(run, (timestamp) => ({
        _tag: "BudgetWarning",
        sessionId: run.sessionId,
        timestamp,
        limit: warning.limit,
        used: warning.used,
        max: warning.max
      })), { discard: true })

/**
 * A model call for the run that is none of its answers (a guardrail's judge): counted and held to the budget like
 * any, but silent (no events, no text streamed: a client reading the deltas must not read a verdict) and not held by
 * the input guardrails' gate (an input judge would wait for itself).
 */
export const generateAside = (
  run: RunState,
  request: Model.Request,
  step: string
): Effect.Effect<Model.Response, ModelError | BudgetExhausted, Model.Model> =>
  Effect.withFiber((fiber) => send(run, Context.getUnsafe(fiber.context, Model.Model), request, { step }, true))

/** Options of `generate`. */
export interface GenerateOptions {
  /** The step's name within the session (`react.turn_2`); keys journal records. Default `call_<n>`. */
  readonly step?: string | undefined
}

/** `generate` for a run the caller already holds (the tool loop looks `CurrentRun` up once, not per turn). */
export const generateFor = (
  run: RunState,
  request: Model.Request,
  options?: GenerateOptions
): Effect.Effect<Model.Response, ModelError | BudgetExhausted, Model.Model> => {
  const gate = run.inputGate
  // The input guardrails check beside the call: its reply is read only once they passed (a trip interrupts it).
  // A gate already open (a sub-run's inherited one, after its parent's check passed) costs nothing.
  return gate === undefined || Deferred.isDoneUnsafe(gate)
    ? generateUngated(run, request, options)
    : Effect.tap(generateUngated(run, request, options), () => Deferred.await(gate))
}

const generateUngated = (
  run: RunState,
  request: Model.Request,
  options?: GenerateOptions
): Effect.Effect<Model.Response, ModelError | BudgetExhausted, Model.Model> =>
  // The model and the compaction policy are read from the fiber's context: both save effects on a path every model
  // call of every agent takes (a process's first thousands of calls run unoptimized).
  Effect.withFiber<Model.Response, ModelError | BudgetExhausted>((fiber) => {
    const model = Context.getUnsafe(fiber.context, Model.Model)
    const policy = fiber.getRef(Compaction.CurrentPolicy)
    const messages = request.messages
    if (!policy.enabled || messages === undefined) return send(run, model, request, options)
    // The step is fixed before a summary's call counts: the call keeps the name it would have had without one.
    const named: GenerateOptions = options?.step !== undefined ? options : { ...options, step: `call_${run.ownCalls + 1}` }
    const known = model.contextWindow ?? policy.contextWindow
    const window = known ?? Compaction.assumedContextWindow
    const target = Math.floor(policy.threshold * window)
    const prepared = Compact.withCompacted(messages, run.compaction)
    // A tokenizer in context (`effect/ai`'s) counts instead of the estimate: one lookup, the count only past the
    // characters' pre-check.
    const tokenizer = Context.getOrUndefined(fiber.context, Compact.Tokenizer)
    const settings = (): CompactSettings => ({
      policy,
      window,
      windowKnown: known !== undefined,
      model,
      counter: Compact.counterOf(tokenizer),
      request,
      // Told of the run's own compactions only (a thread turn keeps their summary), not of its sub-agents'.
      observer: run.parent === undefined ? fiber.getRef(Compact.CurrentObserver) : undefined
    })
    const sendChecked = (sent: ReadonlyArray<Model.Message>) =>
      Effect.catchTag(
        send(run, model, sent === messages ? request : { ...request, messages: sent }, named),
        "ContextLengthExceeded",
        // The server counts more than the estimate: compact once more, to half the window, and send again; a
        // compaction that changes nothing, or a second refusal, is the run's error.
        (error) =>
          Effect.flatMap(compact(run, settings(), messages, sent, Math.floor(window / 2), named.step!, true), (again) =>
            again.length === sent.length && again.every((message, i) => message === sent[i])
              ? Effect.fail(error)
              : send(run, model, { ...request, messages: again }, named))
      )
    if (tokenizer !== undefined) {
      return Effect.flatMap(
        Compact.exceedsCounted(request, prepared, target, run, Compact.counterOf(tokenizer)),
        (over) => over ? Effect.flatMap(compact(run, settings(), messages, prepared, target, named.step!, false), sendChecked) : sendChecked(prepared)
      )
    }
    return Compact.mayExceed(request, prepared, target, run)
      ? Effect.flatMap(compact(run, settings(), messages, prepared, target, named.step!, false), sendChecked)
      : sendChecked(prepared)
  })

/** What a compaction works with: the policy, the window, the model, how tokens are counted, who is told. */
interface CompactSettings {
  readonly policy: Compaction.Policy
  readonly window: number
  readonly windowKnown: boolean
  readonly model: Model.Service
  readonly counter: Compact.Counter
  /** The call: its tool definitions are sent with the messages, so they take part of the window too. */
  readonly request: Model.Request
  readonly observer: Compact.Observer | undefined
}

/**
 * Compacts the messages of a call with the policy's strategy, remembers it for the run's next calls, says so. A
 * result still over the window is `ContextLengthExceeded` naming the sizes: sending it would only be refused.
 */
const compact = (
  run: RunState,
  settings: CompactSettings,
  original: ReadonlyArray<Model.Message>,
  messages: ReadonlyArray<Model.Message>,
  target: number,
  step: string,
  forced: boolean
): Effect.Effect<ReadonlyArray<Model.Message>, ModelError | BudgetExhausted> => {
  const { policy, window, model } = settings
  const measure = settings.counter.messages
  const last = run.compaction
  // A summary is asked for again only once the conversation has grown by the messages kept whole since the last
  // one (or when the server refused): otherwise every call past the threshold would pay a summary.
  const mayCallModel = forced || last === undefined || !last.summarized || original.length - last.length >= policy.keepLastMessages
  const summarize = Compact.summarizer(policy, (summary) =>
    // Silent: the summary is no answer of the run (no events, no text streamed), but a counted call of it.
    send(run, model, summary, { step: `context.compact_${(last?.count ?? 0) + 1}` }, true))
  // The tool definitions go with every call and cannot be compacted: the messages come down to what they leave of
  // the target, and must fit in what they leave of the window (DeepAgent's tools are some 1,000 tokens: on a window of
  // 4,000, messages compacted to 80 % of it alone made calls of 4,300).
  return Effect.flatMap(Effect.zip(measure(messages), settings.counter.tools(settings.request)), ([before, tools]) => {
    const strategy = (mayCallModel: boolean) =>
      Effect.flatMap(policy.strategy({ messages, target: Math.max(0, target - tools), policy, measure, summarize, mayCallModel }), (result) =>
        Effect.map(measure(result.messages), (after) => ({ result, after })))
    // Past the window itself (not only the threshold) a summary is asked for even if the last one is recent: the
    // call could not be sent otherwise.
    const compacted = Effect.flatMap(strategy(mayCallModel), (done) =>
      !mayCallModel && settings.windowKnown && done.after + tools > window ? strategy(true) : Effect.succeed(done))
    return Effect.flatMap(compacted, ({ after, result }) => {
      // Nothing could be done (one message too long, nothing old to cut): nothing to say or remember.
      const unchanged = result.messages.length === messages.length && result.messages.every((message, i) => message === messages[i])
      if (after + tools > window && settings.windowKnown) {
        return Effect.fail(new ContextLengthExceeded({
          message: `the messages are about ${after} tokens after compaction (${before} before)` +
            (tools > 0 ? ` and the tool definitions ${tools}` : "") + `, over the model's context window of ${window}`
        }))
      }
      if (unchanged) return Effect.succeed(messages)
      // The messages sent from now on start with the compacted ones: measured again.
      run.measured = undefined
      // Only the latest is kept: the earlier ones would be memory the run holds for nothing.
      run.compaction = {
        length: original.length,
        first: original[0]!,
        last: original.at(-1)!,
        replacement: result.messages,
        summarized: result.messages.some(Compact.isSummary),
        count: (last?.count ?? 0) + 1
      }
      settings.observer?.(original, result.messages)
      return Effect.as(
        emitWith(run, (timestamp) => ({
          _tag: "ContextCompacted",
          sessionId: run.sessionId,
          timestamp,
          step,
          strategy: result.strategy,
          tokensBefore: before,
          tokensAfter: after,
          contextWindow: window
        })),
        result.messages
      )
    })
  })
}

/** A call once its messages are settled: the budget's reservation (unless unlimited), then `call`. */
const send = (
  run: RunState,
  model: Model.Service,
  request: Model.Request,
  options: GenerateOptions | undefined,
  silent = false
): Effect.Effect<Model.Response, ModelError | BudgetExhausted> => {
  // An unlimited budget is not asked for a reservation.
  if (run.budget === Budget.unlimited) return call(run, model, request, options, unreserved, silent)
  return Effect.flatMap(run.budget.reserve(request), (reservation) =>
    // A call that fails or is interrupted gives back what it reserved; one that returns settles it.
    Effect.onError(
      call(run, model, reservation.request, options, reservation, silent),
      () => Effect.sync(reservation.release)
    ))
}

const noWarnings: ReadonlyArray<Budget.Warning> = []
const unreserved: Pick<Budget.Reservation, "warnings" | "settle"> = { warnings: noWarnings, settle: () => noWarnings }

/** One model call once its budget is reserved: counting, the call context, and the events if observed. */
const call = (
  run: RunState,
  model: Model.Service,
  request: Model.Request,
  options: GenerateOptions | undefined,
  reservation: Pick<Budget.Reservation, "warnings" | "settle">,
  silent = false
): Effect.Effect<Model.Response, ModelError> => {
  const warnings = reservation.warnings
  run.countCall()
  const step = options?.step ?? `call_${run.ownCalls}`
  const callContext: Model.CallContext = {
    sessionId: run.sessionId,
    rootSessionId: run.rootSessionId,
    step,
    onFallback: run.onFallback
  }
  const settle = (response: Model.Response): ReadonlyArray<Budget.Warning> => {
    run.addUsage(response.usage)
    return reservation.settle(response.usage)
  }
  // Nobody listens (`Agent.run`), or a call that is not the run's own answer (a compaction's summary): no events, no
  // clock reads, no text streamed.
  if (silent || !run.emitter.observed) {
    const sent = withCallContext(model.generate(request), callContext)
    return Effect.map(run.traced ? Spans.modelCall(model, request, run.sessionId, step, sent) : sent, (response) => {
      settle(response)
      return response
    })
  }
  // While the input guardrails check, a delta waits for them: a tripped input shows none of the reply.
  const gate = run.inputGate !== undefined && !Deferred.isDoneUnsafe(run.inputGate) ? run.inputGate : undefined
  const send = (): Effect.Effect<Model.Response, ModelError> =>
    run.streamText && !run.textHeld
      ? Model.streamIntoWith(model, request, (chunk) => {
        // Called as each chunk arrives (see `Model.Service.streamInto`), so the event can go out right here.
        if (chunk._tag !== "TextDelta" || chunk.text === "") return Effect.void
        const emit = () =>
          emitNow(run.emitter, {
            _tag: "TextDelta",
            sessionId: run.sessionId,
            timestamp: run.now(),
            step,
            index: chunk.index,
            text: chunk.text
          })
        return gate === undefined ? emit() : Effect.andThen(Deferred.await(gate), Effect.suspend(emit))
      })
      : model.generate(request)
  // Events are handed over synchronously when the stream has room (`emitNow`), so a step runs few effects.
  const sendWithEvents = (): Effect.Effect<Model.Response, ModelError> => {
    const startedAt = run.now()
    const called = emitNow(run.emitter, { _tag: "ModelCalled", sessionId: run.sessionId, timestamp: startedAt, step })
    // The request goes out after `ModelCalled` (a provider may do work when the call is made, e.g. a script).
    const traced = (): Effect.Effect<Model.Response, ModelError> =>
      run.traced
        ? Spans.modelCall(model, request, run.sessionId, step, withCallContext(send(), callContext))
        : withCallContext(send(), callContext)
    const sent = called === Effect.void ? traced() : Effect.andThen(called, Effect.suspend(traced))
    return Effect.flatMap(sent, (response) => {
      const after = settle(response)
      const now = run.now()
      const choice = response.choices[0]
      const pricing = run.budget.limits.pricing
      const event: { -readonly [K in keyof typeof AgentEvent.ModelReplied.Type]: typeof AgentEvent.ModelReplied.Type[K] } = {
        _tag: "ModelReplied",
        sessionId: run.sessionId,
        timestamp: now,
        step,
        text: choice?.text ?? "",
        toolCalls: choice?.toolCalls ?? [],
        finishReason: choice?.finishReason ?? "other",
        usage: response.usage,
        latencyMs: now - startedAt
      }
      // The budget's prices, when the run has them: what the viewer and a trace show beside the tokens. (Set after
      // the literal, not spread into it: a spread takes V8's slower object-cloning path on every call.)
      if (pricing !== undefined) {
        event.cost = Budget.costOf(pricing, response.usage)
      }
      // Under output guardrails no model text goes out unchecked: not as deltas, not as the reply's text (a
      // redactor's email reached /runs/stream's readers here).
      if (run.textHeld && event.text !== "") {
        event.text = ""
        event.textWithheld = true
      }
      const replied = emitNow(run.emitter, event)
      return after.length === 0
        ? thenSucceed(replied, response)
        : Effect.as(Effect.andThen(replied, emitWarnings(run, after)), response)
    })
  }
  return warnings.length === 0 ? sendWithEvents() : Effect.andThen(emitWarnings(run, warnings), Effect.suspend(sendWithEvents))
}

/** Provides `Model.currentCallContext` to the call about to be sent (wrappers such as the `Journal` read it). */
const withCallContext = <A, E, R>(effect: Effect.Effect<A, E, R>, context: Model.CallContext): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, Model.currentCallContext, context)

/** `executeTool` for a run the caller already holds. */
export const executeToolFor = <R>(
  run: RunState,
  kit: Tool.Toolkit<R>,
  call: Model.ToolCall,
  options?: Tool.ExecuteOptions
): Effect.Effect<Tool.Result, never, R> => {
  const approval = kit.byName.get(call.name)?.approval
  return approval === undefined ? executeApproved(run, kit, call, options) : executeAfterApproval(run, kit, call, options, approval)
}

/**
 * A call of a tool whose calls may need approval: when this one does, `ApprovalRequested`, the wait, and
 * `ApprovalDecided`; approved, it runs with the arguments as approved; rejected, its result is the rejection (with
 * its `ToolCalled` and `ToolReturned`, so that every call the model made is answered in the events too).
 */
const executeAfterApproval = <R>(
  run: RunState,
  kit: Tool.Toolkit<R>,
  call: Model.ToolCall,
  options: Tool.ExecuteOptions | undefined,
  approval: Tool.Approval<R>
): Effect.Effect<Tool.Result, never, R> =>
  Effect.flatMap(approval.needed(call.arguments), (needed) => {
    if (!needed) return executeApproved(run, kit, call, options)
    // A second call of the session waiting under the same id (a model that repeats ids within a step) could not be
    // told apart from the first by whoever decides: it would replace the first in the lists and the first would
    // wait unseen for ever. Rejected at once instead; the first waits as usual.
    if (!Approval.claim(run, call.id)) return rejected(run, call, `another call of this step waits for a decision under the same id ${JSON.stringify(call.id)}`)
    const request = { sessionId: run.sessionId, toolCallId: call.id, name: call.name, arguments: call.arguments, requestedAt: run.now() }
    const asked = emitWith(run, (timestamp) => ({ _tag: "ApprovalRequested", ...base(run, timestamp), toolCallId: call.id, name: call.name, arguments: call.arguments }))
    return asked.pipe(
      Effect.andThen(Approval.decide(request, approval as Tool.Approval<unknown>, () => run.now())),
      Effect.ensuring(Effect.sync(() => Approval.release(run, call.id))),
      Effect.tap((decided) =>
        emitWith(run, (timestamp) => ({
          _tag: "ApprovalDecided",
          ...base(run, timestamp),
          toolCallId: call.id,
          name: call.name,
          approved: decided.approved,
          edited: decided.edited,
          ...(decided.reason !== undefined ? { reason: decided.reason } : {}),
          waitedMs: decided.waitedMs
        }))),
      Effect.flatMap((decided): Effect.Effect<Tool.Result, never, R> => {
        if (decided.approved) {
          // Edited arguments are new text: the repeat check's parse of the model's is not theirs.
          return decided.edited
            ? executeApproved(run, kit, { ...call, arguments: decided.arguments }, { ...options, parsedArguments: undefined })
            : executeApproved(run, kit, call, options)
        }
        return rejected(run, call, decided.reason)
      })
    )
  })

/** A rejected call's result, with its `ToolCalled` and `ToolReturned` (every call the model made is answered in the events too). */
const rejected = (run: RunState, call: Model.ToolCall, reason: string | undefined): Effect.Effect<Tool.Result> => {
  const result: Tool.Result = { toolCallId: call.id, name: call.name, content: Approval.rejection(reason), isError: true }
  return Effect.as(
    Effect.andThen(
      emitWith(run, (timestamp) => ({ _tag: "ToolCalled", ...base(run, timestamp), toolCallId: call.id, name: call.name, arguments: call.arguments })),
      emitWith(run, (timestamp) => ({
        _tag: "ToolReturned",
        ...base(run, timestamp),
        toolCallId: call.id,
        name: call.name,
        content: result.content,
        isError: true,
        durationMs: 0
      }))
    ),
    result
  )
}

const base = (run: RunState, timestamp: number) => ({ sessionId: run.sessionId, timestamp })

/** A call that needs no (more) approval. */
const executeApproved = <R>(
  run: RunState,
  kit: Tool.Toolkit<R>,
  call: Model.ToolCall,
  options?: Tool.ExecuteOptions
): Effect.Effect<Tool.Result, never, R> => {
  if (!run.emitter.observed) {
    const executed = run.toolGuards === undefined ? Tool.execute(kit, call, options) : guardedExecute(run, run.toolGuards, kit, call, options)
    return run.traced ? Spans.toolCall(call, run.sessionId, executed) : executed
  }
  return Effect.suspend(() => {
    const startedAt = run.now()
    const called = emitNow(run.emitter, {
      _tag: "ToolCalled",
      sessionId: run.sessionId,
      timestamp: startedAt,
      toolCallId: call.id,
      name: call.name,
      arguments: call.arguments
    })
    // The handler starts after `ToolCalled` went out (a handler that answers at once runs when it is called).
    const executed = run.toolGuards === undefined ? Tool.execute(kit, call, options) : guardedExecute(run, run.toolGuards, kit, call, options)
    const traced = run.traced ? Spans.toolCall(call, run.sessionId, executed) : executed
    const execute = called === Effect.void ? traced : Effect.flatMap(called, () => traced)
    return Effect.flatMap(execute, (result) => {
      const now = run.now()
      const event: AgentEvent.Of<"ToolReturned"> = {
        _tag: "ToolReturned",
        sessionId: run.sessionId,
        timestamp: now,
        toolCallId: call.id,
        name: call.name,
        content: result.content,
        isError: result.isError,
        durationMs: now - startedAt
      }
      // Described, not copied: the bytes went to the model (see `AgentEvent.Attachment`).
      let emitted: AgentEvent.Of<"ToolReturned"> = event
      if (result.parts !== undefined) {
        emitted = { ...event, attachments: result.parts.map(AgentEvent.attachmentOf) }
        // The bytes stay beside the event, for a thread turn's transcript (see `ToolCalls.returnedParts`).
        ToolCalls.returnedParts.set(emitted, result.parts)
      }
      const returned = emitNow(run.emitter, emitted)
      return thenSucceed(returned, result)
    })
  })
}

/** See `Architecture.ask`. */
export const ask = <A, I>(
  question: string,
  schema: Schema.Codec<A, I>,
  options?: { readonly timeout?: Duration.Input | undefined }
): Effect.Effect<A, Unanswered, CurrentRun> =>
  CurrentRun.use((run) => {
    const state = stateOf(run)
    const request = { sessionId: run.sessionId, questionId: Question.nextId(state), question, schema: Question.schemaOf(schema), requestedAt: state.now() }
    const ended = (answered: boolean, reason?: string) =>
      emitWith(run, (timestamp) => ({
        _tag: "QuestionAnswered",
        ...base(state, timestamp),
        questionId: request.questionId,
        answered,
        ...(reason !== undefined ? { reason } : {}),
        waitedMs: state.now() - request.requestedAt
      }))
    return emitWith(run, (timestamp) => ({ _tag: "QuestionAsked", ...base(state, timestamp), questionId: request.questionId, question, schema: request.schema })).pipe(
      Effect.andThen(Question.wait(request, schema, options?.timeout)),
      Effect.tap(() => ended(true)),
      Effect.tapError((error) => ended(false, error.reason))
    )
  })

/** Emits an architecture-specific milestone, e.g. `progress("self_refine.critique", { round, critique })`. */
export const progress = (name: string, data: Record<string, unknown> = {}): Effect.Effect<void, never, CurrentRun> =>
  CurrentRun.use((run) =>
    emitWith(run, (timestamp) =>
      run instanceof RunState && run.textHeld
        ? { _tag: "Progress", sessionId: run.sessionId, timestamp, name, data: withholdText(data) as Record<string, unknown>, textWithheld: true }
        : { _tag: "Progress", sessionId: run.sessionId, timestamp, name, data }))

/** A value with every string emptied (numbers, flags and shape kept): progress data under output guardrails. */
const withholdText = (value: unknown): unknown => {
  if (typeof value === "string") return ""
  if (Array.isArray(value)) return value.map(withholdText)
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) out[key] = withholdText(item)
    return out
  }
  return value
}

/** Records the best output so far: what the run reports if a budget or the wall clock stops it. */
export const setOutput = (output: string): Effect.Effect<void, never, CurrentRun> =>
  CurrentRun.useSync((run) => {
    stateOf(run).output = output
  })

/** Records what the run's metadata is if a limit ends it (read then, so it may describe the run so far). */
export const setMetadata = (metadata: () => Record<string, unknown>): Effect.Effect<void, never, CurrentRun> =>
  CurrentRun.useSync((run) => {
    stateOf(run).metadata = metadata
  })

/**
 * Calls the model for the current run: reserves a budget slot first (failing with `BudgetExhausted` when a
 * limit is reached), counts the call for this run and its ancestors, streams the text as `TextDelta` events
 * when the run is observed, and emits `ModelCalled` / `ModelReplied`.
 */
export const generate = (
  request: Model.Request,
  options?: GenerateOptions
): Effect.Effect<Model.Response, ModelError | BudgetExhausted, Model.Model | CurrentRun> =>
  CurrentRun.use((run) =>
    // A reply of megabytes is read by the program after a turn of the event loop, so timers and other runs go on.
    Effect.tap(generateFor(stateOf(run), request, options), (response) => yieldBeforeReading(response.choices[0]?.text ?? ""))
  )

/**
 * Executes one tool call for the current run (see `Tool.execute`: never fails, errors become `ERROR:` results),
 * emitting `ToolCalled` and `ToolReturned` when the run is observed.
 */
export const executeTool = <R>(
  kit: Tool.Toolkit<R>,
  call: Model.ToolCall,
  options?: Tool.ExecuteOptions
): Effect.Effect<Tool.Result, never, R | CurrentRun> =>
  CurrentRun.use((run) => executeToolFor(stateOf(run), kit, call, options))

/** See `Architecture.conversation`. */
export const conversation = (input: Pick<Input, "history" | "prompt" | "promptParts">): Array<Model.Message> =>
  input.promptParts !== undefined
    ? [...input.history, Model.user(input.promptParts)]
    : input.prompt === "" && input.history.length > 0
    ? [...input.history]
    : [...input.history, Model.user(input.prompt)]

/**
 * A role's run stopped at a limit (its turns, a budget, a cancel): the run it works for ends here, interrupted with
 * `reason`, keeping its best output so far. Raised by `Architecture.role`, turned into the run's outcome by the
 * runtime; a program never needs to catch it.
 */
export class RoleStopped extends Data.TaggedError("RoleStopped")<{
  readonly reason: string
}> {}

// ---------------------------------------------------------------------------------------------------------
// Building architectures
// ---------------------------------------------------------------------------------------------------------

/** Options of `make`. */
export interface MakeOptions<R> {
  readonly name: string
  /** The architecture's logic; it finds the run in `CurrentRun`. */
  readonly program: (input: Input) => Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun>
  /** The tools the program adds to the agent's, as its runs get them (see `Architecture.addedTools`). */
  readonly addedTools?: ReadonlyArray<Tool.Tool<unknown>> | undefined
  /** The runs happen elsewhere (see `Architecture.remote`). */
  readonly remote?: boolean | undefined
}

/** Turns a program into an architecture that streams its events and ends with one `RunCompleted`. */
export const make = <R>(options: MakeOptions<R>): Architecture<Exclude<R, CurrentRun>> => {
  const execute = (input: Input, emitter: Emitter): Effect.Effect<AgentEvent.RunResult, AgentError, Exclude<R, CurrentRun>> =>
    executeProgram(options.name, options.program, input, emitter)
  const run = (input: Input): Stream.Stream<AgentEvent.AgentEvent, AgentError, Exclude<R, CurrentRun>> =>
    streamEvents(Effect.succeed(input), execute)
  return {
    [TypeId]: TypeId,
    name: options.name,
    run,
    execute,
    ...(options.addedTools !== undefined ? { addedTools: options.addedTools } : {}),
    ...(options.remote === true ? { remote: true } : {})
  }
}

/**
 * Streams the events of a run: `start` prepares the input in the stream's scope (`Agent.stream` adds its
 * finalizer there), then `execute` runs in a fiber of that scope, emitting into a bounded queue the stream reads.
 * One `Stream.unwrap` for both: each layer of stream plumbing costs about as much per run as a few tool-loop steps.
 */
export const streamEvents = <E, R>(
  start: Effect.Effect<Input, E, R | Scope.Scope>,
  execute: (input: Input, emitter: Emitter) => Effect.Effect<AgentEvent.RunResult, AgentError, R>
): Stream.Stream<AgentEvent.AgentEvent, E | AgentError, Exclude<R, Scope.Scope>> =>
  Stream.unwrap(
    Effect.flatMap(start, (input) =>
      // Bounded: a slow consumer slows the run down instead of the stream retaining every event.
      Effect.flatMap(Queue.make<AgentEvent.AgentEvent, AgentError | Cause.Done>({ capacity: 1024 }), (queue) => {
        const emitter: Emitter = {
          observed: true,
          emit: (event) => Effect.asVoid(Queue.offer(queue, event)),
          unsafeEmit: (event) => Queue.offerUnsafe(queue, event)
        }
        // Started at once, on this fiber's turn: the run goes as far as it can before the stream's first pull, so a
        // run that never waits (an in-memory model) streams without a single event-loop turn, where a scheduled
        // fork cost one or more `setImmediate` hops per run (≈ 9 µs of idle time per streamed run, measured).
        return Effect.as(
          Effect.forkScoped(Queue.into(queue)(execute(input, emitter)), { startImmediately: true }),
          Stream.fromQueue(queue)
        )
      }))
  ) as Stream.Stream<AgentEvent.AgentEvent, E | AgentError, Exclude<R, Scope.Scope>>

/**
 * Decodes the program's answer with the output schema; when it does not decode, shows the model its answer and the
 * error and asks again (natively: `response_format`), up to `spec.retries` times. Each attempt is a `Progress`
 * event `output.attempt` ({ attempt, ok, error? }). Fails with `OutputInvalid` when no attempt decodes, also when
 * the budget refuses a repair.
 */
const finalizeOutput = (
  run: RunState,
  input: Input,
  spec: Output.OutputSpec,
  outcome: Outcome
): Effect.Effect<Outcome, AgentError> => {
  const report = (attempt: number, error: string | undefined) =>
    emitWith(run, (timestamp) => ({
      _tag: "Progress",
      sessionId: run.sessionId,
      timestamp,
      name: "output.attempt",
      data: error === undefined ? { attempt, ok: true } : { attempt, ok: false, error }
    }))
  const attempt = (n: number, text: string): Effect.Effect<Outcome, AgentError> => {
    const decoded = spec.decode(text)
    if (Result.isSuccess(decoded)) {
      return Effect.as(report(n, undefined), { ...outcome, output: text, value: decoded.success })
    }
    const invalid = (error: string) =>
      new OutputInvalid({ sessionId: run.sessionId, attempts: n, text, error })
    if (n > spec.retries) return Effect.andThen(report(n, decoded.failure), Effect.fail(invalid(decoded.failure)))
    const repair = Output.repairRequest(spec, input.agent.instructions, input.prompt, text, decoded.failure)
    return Effect.gen(function*() {
      yield* report(n, decoded.failure)
      // A program that never calls a model may run without one: then there is nothing to repair with.
      const model = yield* Effect.serviceOption(Model.Model)
      if (model._tag === "None") return yield* invalid(`${decoded.failure} (no model to repair it with)`)
      const response = yield* Effect.provideService(
        generateFor(run, repair, { step: `output.repair_${n}` }),
        Model.Model,
        model.value
      ).pipe(
        Effect.catchTag("BudgetExhausted", (exhausted) =>
          Effect.fail(invalid(`${decoded.failure} (no repair: ${exhausted.message})`)))
      )
      const repaired = response.choices[0]?.text ?? ""
      run.output = repaired
      return yield* attempt(n + 1, repaired)
    })
  }
  return attempt(1, outcome.output)
}

// ---------------------------------------------------------------------------------------------------------
// Guardrails
// ---------------------------------------------------------------------------------------------------------

/** One run's tool guardrails, and where a trip that fails that run (or a guardrail that fails) goes. */
export interface ToolGuardGroup {
  readonly guardrails: ReadonlyArray<Guard.Guardrail>
  readonly failRun: boolean
  /** Failed by a tool guardrail that ends the run: the run's program races it. */
  readonly tripwire: Deferred.Deferred<never, GuardrailTripped | GuardrailFailed>
}

/**
 * The tool guardrails a run's calls go through: its ancestors' first (outermost first), then its own. Each group
 * keeps its run's `onToolTrip`: a supervisor's guardrail that fails runs ends the supervisor's run, from a worker's call.
 */
export interface ToolGuards {
  readonly groups: ReadonlyArray<ToolGuardGroup>
}
/** Emits `GuardrailTripped` for a trip or a rewrite. */
const reportGuard = (run: RunState, kind: Guard.Kind, tool?: Guard.ToolSubject) => (report: Guard.Report) =>
  emitWith(run, (timestamp) => ({
    _tag: "GuardrailTripped",
    sessionId: run.sessionId,
    timestamp,
    guardrail: report.guardrail,
    kind,
    reason: report.reason,
    ...(report.rewritten ? { rewritten: true } : {}),
    ...(tool !== undefined ? { toolCallId: tool.toolCallId, name: tool.name, phase: tool.phase } : {})
  }))

/**
 * A tool call under the run's tool guardrails: its arguments are checked before it runs (rewritten ones are what it
 * runs with), its result before the model reads it. A trip is the call's error result, or, when the run asked for
 * it, ends the run (through the tripwire the program races); so does a guardrail that fails.
 */
const guardedExecute = <R>(
  run: RunState,
  guards: ToolGuards,
  kit: Tool.Toolkit<R>,
  call: Model.ToolCall,
  options: Tool.ExecuteOptions | undefined
): Effect.Effect<Tool.Result, never, R> => {
  const groups = guards.groups
  /** The text after every group (outermost first), or the trip that stopped it and the group it belongs to. */
  const checkTool = (phase: "arguments" | "result", text: string) => {
    const tool = { name: call.name, toolCallId: call.id, phase }
    const report = reportGuard(run, "tool", tool)
    const next = (i: number, text: string): Effect.Effect<{ readonly text: string; readonly tripped?: Tripped | undefined }> => {
      if (i >= groups.length) return Effect.succeed({ text })
      const group = groups[i]!
      const about: Guard.Subject = { kind: "tool", text, sessionId: run.sessionId, agent: run.agentName, tool }
      return Effect.flatMap(
        Effect.catch(Guard.check(group.guardrails, about, report, run.traced), (failed) => endRun(group, failed)),
        (checked) =>
          checked.tripped !== undefined
            ? Effect.succeed({ text: checked.text, tripped: { ...checked.tripped, group } })
            : next(i + 1, checked.text)
      )
    }
    return next(0, text)
  }
  const refused = (tripped: Tripped, what: string): Effect.Effect<Tool.Result> =>
    tripped.group.failRun
      ? endRun(tripped.group, new GuardrailTripped({ sessionId: run.sessionId, guardrail: tripped.guardrail, kind: "tool", reason: tripped.reason }))
      : Effect.succeed({
        toolCallId: call.id,
        name: call.name,
        content: `ERROR: the guardrail ${tripped.guardrail} ${what}: ${tripped.reason}`,
        isError: true
      })
  return Effect.flatMap(checkTool("arguments", call.arguments), (args) => {
    if (args.tripped !== undefined) return refused(args.tripped, "refused this call")
    const executed = args.text === call.arguments
      ? Tool.execute(kit, call, options)
      : Tool.execute(kit, { ...call, arguments: args.text }, { ...options, parsedArguments: undefined })
    return Effect.flatMap(executed, (result) =>
      Effect.flatMap(checkTool("result", result.content), (checked): Effect.Effect<Tool.Result> => {
        if (checked.tripped !== undefined) return refused(checked.tripped, "withheld this call's result")
        return Effect.succeed(checked.text === result.content ? result : { ...result, content: checked.text })
      }))
  })
}

/** A tool guardrail's trip, and the group (the run) whose `onToolTrip` decides what it does. */
interface Tripped {
  readonly guardrail: string
  readonly reason: string
  readonly group: ToolGuardGroup
}

/** Fails the group's run through its tripwire; the call waits to be interrupted with it. */
const endRun = (group: ToolGuardGroup, error: GuardrailTripped | GuardrailFailed): Effect.Effect<never> =>
  Effect.andThen(Deferred.fail(group.tripwire, error), Effect.never)

/**
 * The texts the input guardrails check: every user and system message the caller supplied with this run — each of the history's
 * (but a thread's stored ones, checked in their own turns) and the prompt — oldest first. A caller could otherwise
 * put what a check refuses in an earlier message of the conversation it sends (the OpenAI facade, `POST /runs`'
 * `history`), where only the last was checked.
 */
const inputTexts = (input: Input): ReadonlyArray<string> => {
  const texts: Array<string> = []
  for (let i = input.checkedHistory ?? 0; i < input.history.length; i++) {
    const message = input.history[i]!
    // Its text: an image's or a file's base64 is no text to check (JSON of the parts tripped a size limit on any
    // picture, fed the bytes to a redactor's regular expressions and a judge's prompt).
    // The caller's system messages too: over the OpenAI facade a client writes them (`system`, `developer`), and a
    // check of only the user's turns would let anything through in one. Assistant and tool messages are answers.
    if (message.role === "user" || message.role === "system") texts.push(Model.textOf(message.content))
  }
  if (input.prompt !== "") texts.push(input.prompt)
  return texts
}

/**
 * Checks each of `texts` with the input guardrails, one after the other (a judge's calls in order): the first trip
 * stops it. A redactor's rewrite of an input is a trip (the text is already on its way).
 */
const checkInputs = (
  run: RunState,
  guardrails: ReadonlyArray<Guard.Guardrail>,
  texts: ReadonlyArray<string>
): Effect.Effect<Guard.Checked, GuardrailFailed> => {
  const report = reportGuard(run, "input")
  const next = (i: number): Effect.Effect<Guard.Checked, GuardrailFailed> => {
    if (i >= texts.length) return Effect.succeed({ text: "" })
    const subject: Guard.Subject = { kind: "input", text: texts[i]!, sessionId: run.sessionId, agent: run.agentName }
    return Effect.flatMap(Guard.check(guardrails, subject, report, run.traced), (result) =>
      result.tripped !== undefined ? Effect.succeed(result) : next(i + 1))
  }
  return next(0)
}

/** How long the output guardrails may take on the output a limit or a cancel made (the run's time is already up). */
const afterLimitCheckMs = 10_000

/**
 * The program under the run's guardrails: the input ones beside it (the first model reply waits for them; a trip
 * interrupts everything and fails the run), the output ones on its answer, the tool ones on its calls.
 */
const guardProgram = <R>(
  run: RunState,
  guardrails: Guard.Guardrails,
  answer: (input: Input) => Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun>
) =>
(input: Input): Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun> => {
  let body = answer(input)
  const output = guardrails.output ?? []
  if (output.length > 0) {
    run.textHeld = true
    body = Effect.flatMap(body, (outcome) => checkOutput(run, input, output, guardrails.onOutputTrip === "repair", outcome))
  }
  // A sub-run's own tool guardrails come after its parent's (inherited in `executeProgram`), never instead of them;
  // one its parent already applies (the same agent as a role, the same guardrail object) is not run twice.
  const inherited = run.toolGuards?.groups ?? []
  const tool = inherited.length === 0
    ? guardrails.tool ?? []
    : (guardrails.tool ?? []).filter((guardrail) => !inherited.some((group) => group.guardrails.includes(guardrail)))
  if (tool.length > 0) {
    const tripwire = Deferred.makeUnsafe<never, GuardrailTripped | GuardrailFailed>()
    run.toolGuards = { groups: [...inherited, { guardrails: tool, failRun: guardrails.onToolTrip === "fail", tripwire }] }
    body = Effect.raceFirst(body, Deferred.await(tripwire))
  }
  const inputs = guardrails.input ?? []
  if (inputs.length > 0) {
    const gate = Deferred.makeUnsafe<void>()
    // A parent's gate this sub-run inherited: its own opens only once that one did as well.
    const inherited = run.inputGate
    run.inputGate = gate
    const checked = Effect.flatMap(checkInputs(run, inputs, inputTexts(input)), (result) => {
      if (result.tripped !== undefined) {
        return Effect.fail(new GuardrailTripped({ sessionId: run.sessionId, guardrail: result.tripped.guardrail, kind: "input", reason: result.tripped.reason }))
      }
      const open = Effect.suspend(() => {
        run.inputGate = undefined
        return Deferred.succeed(gate, undefined)
      })
      return inherited === undefined ? open : Effect.andThen(Deferred.await(inherited), open)
    })
    // Both at once; the first failure (a trip) interrupts the other (the model call in flight).
    body = Effect.map(Effect.all([body, checked], { concurrency: 2 }), ([outcome]) => outcome)
  }
  return body
}

/**
 * Checks the answer with the output guardrails: a rewrite (a redactor) becomes the output; a trip fails the run, or,
 * when `repair`, the model is shown its answer and the reason and asked once more (checked again; no second repair).
 */
const checkOutput = (
  run: RunState,
  input: Input,
  guardrails: ReadonlyArray<Guard.Guardrail>,
  repair: boolean,
  outcome: Outcome
): Effect.Effect<Outcome, AgentError> => {
  const subject = (text: string): Guard.Subject => ({ kind: "output", text, sessionId: run.sessionId, agent: run.agentName })
  const tripped = (trip: { readonly guardrail: string; readonly reason: string }) =>
    new GuardrailTripped({ sessionId: run.sessionId, guardrail: trip.guardrail, kind: "output", reason: trip.reason })
  const accept = (outcome: Outcome, text: string): Outcome => {
    run.output = text
    run.outputChecked = true
    return text === outcome.output ? outcome : { ...outcome, output: text }
  }
  return Effect.flatMap(Guard.check(guardrails, subject(outcome.output), reportGuard(run, "output"), run.traced), (checked) => {
    if (checked.tripped === undefined) return Effect.succeed(accept(outcome, checked.text))
    if (!repair) return Effect.fail(tripped(checked.tripped))
    const trip = checked.tripped
    return Effect.gen(function*() {
      const model = yield* Effect.serviceOption(Model.Model)
      if (model._tag === "None") return yield* tripped({ ...trip, reason: `${trip.reason} (no model to repair it with)` })
      const request: Model.Request = {
        messages: [
          ...(input.agent.instructions !== "" ? [Model.system(input.agent.instructions)] : []),
          ...conversation(input),
          Model.assistant(outcome.output),
          Model.user(`That answer was refused (${trip.guardrail}): ${trip.reason}. Answer again, keeping to it.`)
        ],
        ...(input.output !== undefined ? { responseFormat: input.output.responseFormat } : {})
      }
      const response = yield* Effect.provideService(
        generateFor(run, request, { step: "guardrail.repair" }),
        Model.Model,
        model.value
      ).pipe(Effect.catchTag("BudgetExhausted", (exhausted) =>
        Effect.fail(tripped({ ...trip, reason: `${trip.reason} (no repair: ${exhausted.message})` }))))
      const text = response.choices[0]?.text ?? ""
      run.output = text
      // Structured output decodes the repaired answer too (repairing that, as usual, if it must).
      const repaired = input.output !== undefined ? yield* finalizeOutput(run, input, input.output, { ...outcome, output: text }) : { ...outcome, output: text }
      const again = yield* Guard.check(guardrails, subject(repaired.output), reportGuard(run, "output"), run.traced)
      if (again.tripped !== undefined) return yield* tripped(again.tripped)
      return accept(repaired, again.text)
    })
  })
}

// No generator here: a generator frame (and everything its closure holds) stays alive for the whole run, in
// every concurrent session; so does each wrapper, which is why the run's context is provided in one piece.
const executeProgram = <R>(
  name: string,
  program: (input: Input) => Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun>,
  input: Input,
  emitter: Emitter
): Effect.Effect<AgentEvent.RunResult, AgentError, Exclude<R, CurrentRun>> =>
  Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    const startedAt = clock.currentTimeMillisUnsafe()
    const state = new RunState(
      input.sessionId,
      input.rootSessionId,
      input.agent.name,
      name,
      input.budget,
      input.streamText,
      emitter,
      input.parent === undefined ? undefined : stateOf(input.parent),
      input.resources,
      clock
    )
    state.parent?.setChild(state)
    if (state.parent?.toolGuards !== undefined) state.toolGuards = state.parent.toolGuards
    // A parent's output guardrails hold its sub-runs' text as well: a sub-agent's reply may be the parent's answer.
    if (state.parent?.textHeld === true) state.textHeld = true
    // A sub-run started while its parent's input guardrails still check (a supervisor delegating at once) waits for
    // them too: its replies, and so its tools, come after the parent's check passed.
    if (state.parent?.inputGate !== undefined) state.inputGate = state.parent.inputGate
    state.traced = fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer
    // With structured output, the answer is decoded (and repaired) where the program's model is in context.
    const output = input.output
    const decoded = output === undefined
      ? program
      : (input: Input) => Effect.flatMap(program(input), (outcome) => finalizeOutput(state, input, output, outcome))
    // The agent's guardrails and the run's; none (the usual case) adds nothing to the run.
    const guardrails = input.guardrails ?? input.agent.guardrails
    const answer = guardrails === undefined ? decoded : guardProgram(state, guardrails, decoded)
    let body: Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun> = Effect.suspend(() => answer(input))
    const model = input.agent.model
    if (model !== undefined) {
      const resources = input.resources
      body = Effect.gen(function*() {
        if (resources.scope === undefined) resources.scope = yield* Scope.make()
        if (resources.memoMap === undefined) resources.memoMap = yield* Layer.makeMemoMap
        const context = yield* Layer.buildWithMemoMap(model, resources.memoMap, resources.scope)
        return yield* Effect.provide(answer(input), context)
      }) as Effect.Effect<Outcome, AgentError | RoleStopped, R | CurrentRun>
    }
    // Outside the own model, so that the model wins over a `Model` given with the agent and its layer is built
    // with the services given.
    const given = input.agent.context
    if (given !== undefined) body = Effect.provide(body, given)
    // A limit ends the run with what it has: a spent budget, or a role that stopped at one (the rule every
    // architecture shares, so none repeats it).
    const stopped = (interrupted: string): Effect.Effect<Outcome> =>
      Effect.sync(() => ({ output: state.output, interrupted, ...(state.metadata !== undefined ? { metadata: state.metadata() } : {}) }))
    let guarded: Effect.Effect<Outcome, AgentError, R | CurrentRun> = body.pipe(
      Effect.catchTags({
        BudgetExhausted: (error) => stopped(error.reason),
        RoleStopped: (error) => stopped(error.reason)
      })
    )
    // The run that owns a deadline interrupts everything in flight when it passes; sub-agents share it.
    if (input.parent === undefined && input.budget.deadline !== undefined) {
      const left = Math.max(0, input.budget.deadline - startedAt)
      guarded = guarded.pipe(
        Effect.timeoutOrElse({
          duration: left,
          orElse: () => Effect.succeed<Outcome>({ output: state.output, interrupted: "budget:wall_clock" })
        })
      )
    }
    // A cancel, like a deadline, stops everything in flight and keeps what the run has so far.
    if (input.parent === undefined && input.cancel !== undefined) {
      guarded = Effect.raceFirst(
        guarded,
        Effect.andThen(input.cancel, Effect.sync((): Outcome => ({ output: state.output, interrupted: "cancelled" })))
      )
    }
    // What a limit or a cancel made of the run's best output so far is checked by the output guardrails too (a
    // redactor must see every output; a trip fails the run, without a repair: the run is over).
    const outputGuards = guardrails?.output
    if (outputGuards !== undefined && outputGuards.length > 0) {
      guarded = Effect.flatMap(guarded, (outcome) =>
        state.outputChecked
          ? Effect.succeed(outcome)
          : checkOutput(state, input, outputGuards, false, outcome).pipe(
            // The run's deadline or cancel is behind it: a check that hangs (a judge on a dead model) must not keep
            // the run past them for good. A check that did not finish is no pass.
            Effect.timeoutOrElse({
              duration: afterLimitCheckMs,
              orElse: () =>
                Effect.fail(
                  new GuardrailFailed({
                    sessionId: state.sessionId,
                    guardrail: outputGuards.map((guardrail) => guardrail.name).join(", "),
                    kind: "output",
                    error: `the check of the output a limit made did not finish within ${afterLimitCheckMs} ms`
                  })
                )
            })
          ))
    }
    // The run's state and span go on top of the fiber's context as two entries (`Context.add`), where providing a
    // context of both (`Effect.provide`) would copy every service of the fiber's context into a new map, per run.
    const withRun = (span: Tracer.AnySpan) =>
      Effect.updateContext(
        guarded,
        (context: Context.Context<Exclude<R, CurrentRun>>) =>
          Context.add(Context.add(context, CurrentRun, state), Tracer.ParentSpan, span) as Context.Context<R | CurrentRun>
      )
    // A run started by `Agent.run` comes with its span; a streamed run and every sub-agent get theirs here.
    const traced: Effect.Effect<Outcome, AgentError, R | CurrentRun> = input.span !== undefined
      ? withRun(input.span)
      : Effect.flatMap(
        Effect.makeSpan(Spans.runSpanName(input.agent.name), {
          attributes: { ...Spans.runAttributes(input.agent.name, name), "valet.session_id": state.sessionId }
        }),
        (span) =>
          Effect.onExit(withRun(span), (exit) => Spans.end(span, exit))
      )
    const finished = Effect.flatMap(traced, (outcome) => {
      const endedAt = state.now()
      const result: AgentEvent.RunResult = {
        sessionId: state.sessionId,
        output: outcome.output,
        modelCalls: state.modelCalls,
        usage: state.usage,
        interrupted: outcome.interrupted !== undefined,
        ...(outcome.interrupted !== undefined ? { interruptionReason: outcome.interrupted } : {}),
        durationMs: endedAt - startedAt,
        metadata: outcome.metadata ?? state.metadata?.() ?? {},
        ...(output !== undefined ? { value: outcome.value } : {})
      }
      if (!emitter.observed) return Effect.succeed(result)
      // A sub-run under its parent's output guardrails: its answer is unchecked text (the parent checks its own).
      if (state.textHeld && state.parent !== undefined) {
        const { value: _, ...shown } = result
        return Effect.as(
          emitter.emit({ _tag: "RunCompleted", sessionId: state.sessionId, timestamp: endedAt, result: { ...shown, output: "" }, textWithheld: true }),
          result
        )
      }
      return Effect.as(emitter.emit({ _tag: "RunCompleted", sessionId: state.sessionId, timestamp: endedAt, result }), result)
    })
    if (!emitter.observed) return finished
    return Effect.andThen(
      emitter.emit({
        _tag: "RunStarted",
        sessionId: state.sessionId,
        timestamp: startedAt,
        agent: input.agent.name,
        architecture: name,
        prompt: input.prompt
      }),
      finished
    )
  }) as Effect.Effect<AgentEvent.RunResult, AgentError, Exclude<R, CurrentRun>>
