/**
 * People in the loop (DESIGN §15): a tool call that needs approval (`Tool.make({ needsApproval })`,
 * `Tool.withApproval`) waits for a person's decision. The run emits `ApprovalRequested` and the call waits — the
 * other calls of its turn go on, and each waiting call resumes on its own decision: approved, the tool runs with the
 * arguments as approved (edited ones checked by the tool's schema when the decision is made); rejected, the model
 * reads `ERROR: rejected: <reason>`; a call whose `approvalTimeout` passes is rejected. `ApprovalDecided` says how.
 *
 * `HumanLoop` is where waiting calls are found and decided: `pending` lists them, `decide` resumes one. `layer` keeps
 * them in this process (a waiting call is a fiber on a `Deferred`: it holds no thread and costs a few objects).
 * Without a `HumanLoop` in context, a call that needs approval is rejected at once: nobody can approve it.
 *
 * @example
 * ```ts
 * import { Effect, Fiber, Schema } from "effect"
 * import { Agent, HumanLoop, ScriptedModel, Tool } from "valet"
 *
 * const refund = Tool.make({
 *   name: "refund",
 *   description: "Refunds an order",
 *   parameters: Schema.Struct({ order: Schema.String, amount: Schema.Number }),
 *   handler: ({ order, amount }) => Effect.succeed(`refunded ${amount} on ${order}`),
 *   needsApproval: ({ amount }) => Effect.succeed(amount > 100)
 * })
 * const agent = Agent.make({ name: "support", instructions: "Help.", tools: [refund] })
 *
 * const program = Effect.gen(function*() {
 *   const run = yield* Effect.forkChild(Agent.run(agent, "Refund order 7, 250 EUR."))
 *   // Someone looks at what waits, and decides (an app would do this from its UI, over HTTP).
 *   const [waiting] = yield* HumanLoop.awaitPending(1)
 *   yield* HumanLoop.decide(waiting!.toolCallId, { approved: true, arguments: { order: "7", amount: 200 } })
 *   return yield* Fiber.join(run)
 * }).pipe(
 *   Effect.provide(HumanLoop.layer),
 *   Effect.provide(ScriptedModel.layer([
 *     { toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 250 } }] },
 *     "Refunded 200 EUR."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Deferred, type Duration, Effect, Layer, type Option, Result, Schema } from "effect"

/**
 * A tool call waiting for a person's decision.
 *
 * @since 0.2.0
 * @category models
 */
export interface ApprovalRequest {
  /** The session of the run that made the call (a sub-agent's calls carry their own, under the root's). */
  readonly sessionId: string
  readonly toolCallId: string
  /** The tool's name. */
  readonly name: string
  /** The arguments as the model wrote them (JSON text). */
  readonly arguments: string
  /** When it started waiting (ms since the epoch, by the run's clock). */
  readonly requestedAt: number
}

/**
 * A person's decision on a waiting call: approved (with arguments edited, as a JSON value the tool's schema
 * decodes) or rejected (with a reason the model reads).
 *
 * @since 0.2.0
 * @category models
 */
export const Decision = Schema.Struct({
  approved: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.Unknown)
})

/**
 * @since 0.2.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * No call with this id waits for a decision (never asked, or it ended — a timeout, the run cancelled).
 *
 * @since 0.2.0
 * @category errors
 */
export class NotWaiting extends Schema.TaggedError<NotWaiting>()("NotWaiting", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * The call was decided already: a decision counts once.
 *
 * @since 0.2.0
 * @category errors
 */
export class AlreadyDecided extends Schema.TaggedError<AlreadyDecided>()("AlreadyDecided", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * A decision that cannot be taken: edited arguments the tool's schema refuses, or a call id that several waiting
 * calls share (name the session). Nothing changed: the call still waits.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()("InvalidDecision", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * What `decide` may fail with.
 *
 * @since 0.2.0
 * @category errors
 */
export type DecideError = NotWaiting | AlreadyDecided | InvalidDecision

/**
 * What a decided call resumes with: the decision, and the argument text to call the tool with when approved.
 *
 * @since 0.2.0
 * @category models
 */
export interface Resolution {
  readonly approved: boolean
  readonly reason?: string | undefined
  /** The argument text the tool runs with (the model's, or the edited arguments as JSON). */
  readonly arguments: string
  readonly edited: boolean
}

/**
 * Where waiting calls are kept and decided.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /**
   * Waits for the decision on `request` (the runtime calls this for a call that needs approval). `check` checks
   * edited arguments (the tool's schema): the argument text to call with, or why they do not fit.
   */
  readonly wait: (
    request: ApprovalRequest,
    check: (value: unknown) => Result.Result<string, string>
  ) => Effect.Effect<Resolution>
  /**
   * Waits as `wait` does, for at most `timeout` (`None` when it passed), on a clock of the loop's own: a durable loop
   * keeps it in its store so that it survives the process. Without it, `wait` is raced with a timer of this process.
   *
   * @since 0.2.0
   */
  readonly waitWithin?: (
    request: ApprovalRequest,
    check: (value: unknown) => Result.Result<string, string>,
    timeout: Duration.Duration
  ) => Effect.Effect<Option.Option<Resolution>>
  /**
   * Decides a waiting call. `sessionId` narrows it to a run (its root session: its sub-agents' calls too) when call
   * ids repeat across runs.
   */
  readonly decide: (
    toolCallId: string,
    decision: Decision,
    options?: { readonly sessionId?: string | undefined }
  ) => Effect.Effect<ApprovalRequest, DecideError>
  /** The calls waiting now, oldest first (of one run and its sub-agents with `sessionId`). */
  readonly pending: (options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<ApprovalRequest>>
  /** Waits until at least `count` calls wait (of one run with `sessionId`), and answers them. */
  readonly awaitPending: (count: number, options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<ApprovalRequest>>
}

/**
 * The service.
 *
 * @since 0.2.0
 * @category services
 */
export class HumanLoop extends Context.Service<HumanLoop, Service>()("valet/HumanLoop") {}

/** A run's session and its sub-agents' (`<root>__…`). */
const inRun = (sessionId: string, root: string | undefined): boolean =>
  root === undefined || sessionId === root || sessionId.startsWith(`${root}__`)

/** How many decided calls are remembered (to answer `AlreadyDecided` rather than `NotWaiting`). */
const rememberedDecisions = 10_000

/**
 * A `HumanLoop` in this process: waiting calls are fibers on `Deferred`s.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make: Effect.Effect<Service> = Effect.sync(() => {
  interface Waiting {
    readonly request: ApprovalRequest
    readonly check: (value: unknown) => Result.Result<string, string>
    readonly done: Deferred.Deferred<Resolution>
  }
  const waiting = new Map<string, Waiting>()
  const decided = new Map<string, true>()
  // Woken whenever a call starts waiting, for `awaitPending`.
  let changed = Deferred.makeUnsafe<void>()
  const keyOf = (request: { readonly sessionId: string; readonly toolCallId: string }) => `${request.sessionId}\u0000${request.toolCallId}`

  const list = (root: string | undefined): ReadonlyArray<ApprovalRequest> =>
    [...waiting.values()].filter((entry) => inRun(entry.request.sessionId, root)).map((entry) => entry.request)

  const wait: Service["wait"] = (request, check) =>
    Effect.suspend(() => {
      const key = keyOf(request)
      const done = Deferred.makeUnsafe<Resolution>()
      waiting.set(key, { request, check, done })
      const wake = changed
      changed = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(wake, Effect.void)
      // However the wait ends (decided, timed out, the run interrupted), the call no longer waits.
      return Deferred.await(done).pipe(Effect.ensuring(Effect.sync(() => {
        if (waiting.get(key)?.done === done) waiting.delete(key)
      })))
    })

  const decide: Service["decide"] = (toolCallId, decision, options) =>
    Effect.suspend((): Effect.Effect<ApprovalRequest, DecideError> => {
      const root = options?.sessionId
      const matches = [...waiting.entries()].filter(([, entry]) =>
        entry.request.toolCallId === toolCallId && inRun(entry.request.sessionId, root))
      if (matches.length === 0) {
        const wasDecided = [...decided.keys()].some((key) => {
          const [sessionId, id] = key.split("\u0000")
          return id === toolCallId && inRun(sessionId!, root)
        })
        return wasDecided
          ? Effect.fail(new AlreadyDecided({ toolCallId, message: `the call ${JSON.stringify(toolCallId)} was decided already` }))
          : Effect.fail(new NotWaiting({ toolCallId, message: `no call ${JSON.stringify(toolCallId)} waits for a decision` }))
      }
      if (matches.length > 1) {
        return Effect.fail(new InvalidDecision({
          toolCallId,
          message: `${matches.length} waiting calls have the id ${JSON.stringify(toolCallId)} (sessions ${matches.map(([, entry]) => entry.request.sessionId).join(", ")}): name the session`
        }))
      }
      const [key, entry] = matches[0]!
      let argumentsText = entry.request.arguments
      const edited = decision.approved && decision.arguments !== undefined
      if (edited) {
        const checked = entry.check(decision.arguments)
        if (Result.isFailure(checked)) {
          return Effect.fail(new InvalidDecision({ toolCallId, message: `arguments: ${checked.failure}` }))
        }
        argumentsText = checked.success
      }
      waiting.delete(key)
      decided.set(key, true)
      if (decided.size > rememberedDecisions) decided.delete(decided.keys().next().value!)
      Deferred.doneUnsafe(entry.done, Effect.succeed({ approved: decision.approved, reason: decision.reason, arguments: argumentsText, edited }))
      return Effect.succeed(entry.request)
    })

  const pending: Service["pending"] = (options) => Effect.sync(() => list(options?.sessionId))

  const awaitPending: Service["awaitPending"] = (count, options) =>
    Effect.suspend(function loop(): Effect.Effect<ReadonlyArray<ApprovalRequest>> {
      const now = list(options?.sessionId)
      if (now.length >= count) return Effect.succeed(now)
      return Effect.flatMap(Deferred.await(changed), loop)
    })

  return { wait, decide, pending, awaitPending }
})

/**
 * `make` as a layer: one per process (or per server), shared by every run that may wait.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer: Layer.Layer<HumanLoop> = Layer.effect(HumanLoop, make)

/**
 * Decides a waiting call (see `Service.decide`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const decide = (
  toolCallId: string,
  decision: Decision,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<ApprovalRequest, DecideError, HumanLoop> => HumanLoop.use((loop) => loop.decide(toolCallId, decision, options))

/**
 * The calls waiting now (see `Service.pending`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const pending = (options?: { readonly sessionId?: string | undefined }): Effect.Effect<ReadonlyArray<ApprovalRequest>, never, HumanLoop> =>
  HumanLoop.use((loop) => loop.pending(options))

/**
 * Waits until at least `count` calls wait (see `Service.awaitPending`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const awaitPending = (
  count: number,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<ReadonlyArray<ApprovalRequest>, never, HumanLoop> => HumanLoop.use((loop) => loop.awaitPending(count, options))
