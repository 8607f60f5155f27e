/**
 * How a durable run waits for a person, whatever it waits for (a decision on a call, an answer to a question): the
 * wait is recorded (an activity, once), then the run awaits a `DurableDeferred` named by the wait's key — raced with
 * a `DurableClock` when it has a timeout — and suspends while nothing came: no fiber, no memory; the process may die.
 * What settles it, from any process on the store, takes the row from `waiting` to `settled` with a compare-and-set
 * (the one that counts) and only then completes the deferred with what it stored.
 */
import { Deferred, Duration, Effect, Exit, Option, Schema } from "effect"
import { Activity, DurableClock, DurableDeferred, type Workflow, WorkflowEngine } from "effect/workflow"
import * as AgentEvent from "../../../core/AgentEvent.js"
import * as HumanLoop from "../../../core/HumanLoop.js"
import type { WorkflowContext } from "./activities.js"
import { HumanLoopStore, type Kind, type Row, type Store } from "./humanLoopStore.js"

/**
 * What the waits of one execution are doing, so that a wait suspends the run only once its siblings are quiet:
 * while a sibling reads what settled it (`busy`), or was approved and has not yet started its tool's activity,
 * suspending would interrupt it, and it would run only on the next decision. The engine itself waits for
 * activities in flight before it suspends; this covers the steps between them.
 */
export interface Handoffs {
  /** The tools whose calls end a handoff (`durableTools`'): a call of another tool (a sub-agent's own) holds none. */
  readonly tools: Set<string>
  /** A decided call's tool activity has ended (from `durableTools`). */
  readonly started: (sessionId: string, toolCallId: string) => void
}

/** `Handoffs` and what the waits do with them. */
export interface Execution extends Handoffs {
  readonly enter: () => void
  readonly leave: () => void
  /** An approved call of `sessionId` holds the execution busy until its tool's activity starts. */
  readonly handOff: (sessionId: string, toolCallId: string) => void
  /** Quiet now, and still after the fibers that were about to start have had their turn. */
  readonly quiet: Effect.Effect<void>
  /** The key of the next wait on `id` in `sessionId` (`#n` when the session waits on the same id again). */
  readonly keyOf: (kind: Kind, sessionId: string, id: string) => string
}

/** The waits of one execution of a run. */
export const makeExecution = (): Execution => {
  let busy = 0
  let quiet = Deferred.makeUnsafe<void>()
  Deferred.doneUnsafe(quiet, Effect.void)
  const approved = new Set<string>()
  const enter = () => {
    if (busy++ === 0) quiet = Deferred.makeUnsafe<void>()
  }
  const leave = () => {
    if (--busy === 0) Deferred.doneUnsafe(quiet, Effect.void)
  }
  // Keys are counted per execution in the order waits of one session and id start (a replay starts them in the
  // order it did: ids repeat only across steps, which run one after another).
  const seen = new Map<string, number>()
  return {
    tools: new Set<string>(),
    enter,
    leave,
    handOff: (sessionId, toolCallId) => void approved.add(`${sessionId}\u0000${toolCallId}`),
    started: (sessionId, toolCallId) => {
      if (approved.delete(`${sessionId}\u0000${toolCallId}`)) leave()
    },
    quiet: Effect.suspend(function loop(): Effect.Effect<void> {
      return Effect.flatMap(Deferred.await(quiet), () => Effect.flatMap(Effect.yieldNow, () => busy === 0 ? Effect.void : loop()))
    }),
    keyOf: (kind, sessionId, id) => {
      // The id escaped, so that `#` and `/` in a model's call id cannot make one wait's key another's (`c1#2`).
      const base = `${kind}/${sessionId}/${encodeURIComponent(id)}`
      const n = (seen.get(base) ?? 0) + 1
      seen.set(base, n)
      return n === 1 ? base : `${base}#${n}`
    }
  }
}

/** The deferred a wait awaits. Its name is the wait's key: the same in every execution and where it is settled. */
export const deferredOf = <A, I>(key: string, outcome: Schema.Codec<A, I>) => DurableDeferred.make(key, { success: outcome })

/** The race of a wait with its clock, as `DurableDeferred.raceAll` names it. */
const raceOptions = <A, I>(key: string, outcome: Schema.Codec<A, I>) => ({
  name: `${key}/timeout`,
  success: Schema.Union([outcome, Schema.Literal("timeout")]),
  error: Schema.Never
})

/**
 * Waits durably on `row` (recorded once) for what settles it: `None` when `timeout` passed first (the row then
 * expired, unless it was settled first — its completion not yet seen — and that counts). `handsOff` says, of an
 * outcome found at once, whether the execution stays busy until the call's tool starts (an approved call).
 */
export const wait = <A, I>(
  store: Store,
  execution: Execution,
  row: Omit<Row, "state">,
  outcome: Schema.Codec<A, I>,
  timeout: Duration.Duration | undefined,
  handsOff: (value: A) => boolean = () => false
): Effect.Effect<Option.Option<A>, never, WorkflowContext> =>
  Effect.gen(function*() {
    const { key } = row
    yield* Activity.make({ name: `${key}/request`, success: Schema.Void, execute: store.record(row) })
    const deferred = deferredOf(key, outcome)
    const engine = yield* WorkflowEngine.WorkflowEngine
    // Peek first (no await registered: what settles it arriving now does not interrupt the siblings), and suspend
    // only when the siblings are quiet.
    execution.enter()
    type Peeked = Option.Option<Exit.Exit<unknown, unknown>>
    const race = raceOptions(key, outcome)
    const peeked = yield* Effect.flatMap(
      timeout === undefined
        ? Effect.succeed<Peeked>(Option.none())
        : engine.deferredResult(DurableDeferred.make(`raceAll/${race.name}`, { success: race.success, error: race.error })) as Effect.Effect<Peeked, never, WorkflowEngine.WorkflowInstance>,
      (raced): Effect.Effect<Peeked, never, WorkflowEngine.WorkflowInstance> => Option.isSome(raced) ? Effect.succeed(raced) : engine.deferredResult(deferred)
    ).pipe(Effect.onInterrupt(() => Effect.sync(execution.leave)))
    if (Option.isSome(peeked) && Exit.isSuccess(peeked.value) && peeked.value.value !== "timeout") {
      const found = peeked.value.value as A
      if (!handsOff(found)) execution.leave()
      return Option.some(found)
    }
    execution.leave()
    yield* execution.quiet
    if (timeout === undefined) return Option.some(yield* DurableDeferred.await(deferred))
    const raced = yield* DurableDeferred.raceAll({
      ...race,
      effects: [
        DurableDeferred.await(deferred),
        // inMemoryThreshold 0: a persisted clock at any length (at or below 60 s it would be an in-memory sleep).
        Effect.as(DurableClock.sleep({ name: key, duration: timeout, inMemoryThreshold: Duration.zero }), "timeout" as const)
      ]
    })
    if (raced !== "timeout") return Option.some(raced as A)
    const decode = Schema.decodeUnknownSync(Schema.fromJsonString(outcome) as unknown as Schema.Codec<A, unknown>)
    return Option.map(
      yield* Activity.make({ name: `${key}/expire`, success: Schema.Option(Schema.String), execute: store.expire(row.runId, key) }),
      decode
    )
  }) as Effect.Effect<Option.Option<A>, never, WorkflowContext>

/** How errors name what waits: `call` / `decided`, `question` / `answered`. */
const words = {
  approval: { what: "call", settled: "decided", waits: "waits for a decision" },
  question: { what: "question", settled: "answered", waits: "waits for an answer" }
} as const

/**
 * Settles the one wait of durable run `runId` of this kind and id (of `sessionId` and its sub-agents when given),
 * from any process on the store: `prepare` makes the outcome of its row (or refuses with why: nothing changes), the
 * compare-and-set takes the row, then the deferred is completed. `NotWaiting` for a wait that never was,
 * `AlreadyDecided` when it was settled (or expired) before — what it was settled with is sent again first, for a
 * settler that died between the two.
 */
export const settle = <A, I, W extends Workflow.Any>(
  workflow: W,
  executionId: string,
  options: {
    readonly runId: string
    readonly kind: Kind
    readonly id: string
    readonly sessionId?: string | undefined
    readonly outcome: Schema.Codec<A, I>
    readonly prepare: (row: Row) => Effect.Effect<A, HumanLoop.DecideError>
  }
): Effect.Effect<Row, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const { id, kind, runId } = options
    const word = words[kind]
    const store = yield* HumanLoopStore
    const rows = (yield* store.find(runId, kind, id)).filter((row) =>
      options.sessionId === undefined || AgentEvent.isWithinSession(row.sessionId, options.sessionId))
    const waiting = rows.filter((row) => row.state === "waiting")
    const already = new HumanLoop.AlreadyDecided({
      toolCallId: id,
      message: `the ${word.what} ${JSON.stringify(id)} of run ${JSON.stringify(runId)} was ${word.settled} already (or its time ran out)`
    })
    const complete = (key: string, value: A) => {
      const deferred = deferredOf(key, options.outcome)
      return DurableDeferred.succeed(deferred, { token: DurableDeferred.tokenFromExecutionId(deferred, { workflow, executionId }), value })
    }
    if (waiting.length === 0) {
      if (rows.length === 0) {
        return yield* new HumanLoop.NotWaiting({ toolCallId: id, message: `no ${word.what} ${JSON.stringify(id)} of run ${JSON.stringify(runId)} ${word.waits}` })
      }
      // What a settled row stored is sent again: a process that died between its compare-and-set and the deferred
      // left the run waiting on it, listed nowhere. The engine keeps a deferred's first completion, so when it did
      // arrive this changes nothing.
      const decode = Schema.decodeUnknownSync(Schema.fromJsonString(options.outcome) as unknown as Schema.Codec<A, unknown>)
      for (const row of rows) {
        const stored = yield* store.outcome(runId, row.key)
        if (Option.isSome(stored)) yield* complete(row.key, decode(stored.value))
      }
      return yield* Effect.fail(already)
    }
    if (waiting.length > 1) {
      return yield* new HumanLoop.InvalidDecision({
        toolCallId: id,
        message: `${waiting.length} waiting ${word.what}s of run ${JSON.stringify(runId)} have the id ${JSON.stringify(id)} (sessions ${waiting.map((row) => row.sessionId).join(", ")}): name the session`
      })
    }
    const row = waiting[0]!
    const value = yield* options.prepare(row)
    const encoded = Schema.encodeSync(Schema.fromJsonString(options.outcome) as unknown as Schema.Codec<A, string>)(value)
    if (!(yield* store.settle(runId, row.key, encoded))) return yield* Effect.fail(already)
    yield* complete(row.key, value)
    return row
  })
