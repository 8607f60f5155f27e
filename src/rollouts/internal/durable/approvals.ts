/**
 * Approvals that wait durably (DESIGN §15): inside a durable run, a call that needs a person's decision is a
 * `DurableDeferred` the workflow suspends on — no fiber, no memory; the process may die — and the decision, made from
 * any process on the same store, completes it and wakes the run wherever it is served.
 *
 * The engine keeps what a run waits on only in memory and drops a second completion of a deferred silently (the first
 * wins), so valet keeps its own table of waiting calls (`valet_durable_approvals`): `decide` takes a call from
 * `waiting` to `decided` with a compare-and-set — the one decision that counts — and only then completes the deferred
 * with the decision it stored (sent again after a crash, it is the same one). A timeout (`approvalTimeout`) is a
 * `DurableClock` raced with the decision; when it wins, the row goes to `expired` the same way, so a decision that
 * came first (stored, its completion not yet seen) still counts.
 */
import { Context, Deferred, Duration, Effect, Exit, Layer, Option, Result, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Activity, DurableClock, DurableDeferred, type Workflow, WorkflowEngine } from "effect/workflow"
import * as AgentEvent from "../../../core/AgentEvent.js"
import * as HumanLoop from "../../../core/HumanLoop.js"
import { createTables } from "../../../core/internal/sql.js"
import type { WorkflowContext } from "./activities.js"

/** What a waiting call resumes with, as stored on its deferred (changing it breaks runs waiting on the old one). */
export const Resolution = Schema.Struct({
  approved: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  arguments: Schema.String,
  edited: Schema.Boolean
})

/** One call of a durable run that waits (or waited) for a decision. */
export interface Row extends HumanLoop.ApprovalRequest {
  readonly runId: string
  /** The call's deferred: `approval/<session>/<call id>` (`#n` when a session repeats a call id). */
  readonly key: string
  /** The agent the run was started with (to find the tool that checks edited arguments). */
  readonly agent: string
  readonly state: "waiting" | "decided" | "expired"
}

/** The store of durable approvals. */
export interface Store {
  /** Records a call that starts waiting; a row already there (a replay) is kept as it is. */
  readonly record: (row: Omit<Row, "state">) => Effect.Effect<void>
  /** The rows of a run with this call id (of every session). */
  readonly find: (runId: string, toolCallId: string) => Effect.Effect<ReadonlyArray<Row>>
  /** The calls of a run that wait now, oldest first. */
  readonly waiting: (runId: string) => Effect.Effect<ReadonlyArray<Row>>
  /** `waiting` → `decided` with this resolution: false when the row was not waiting (someone was first). */
  readonly decide: (runId: string, key: string, resolution: typeof Resolution.Type) => Effect.Effect<boolean>
  /** `waiting` → `expired`; a row decided first answers its decision. */
  readonly expire: (runId: string, key: string) => Effect.Effect<Option.Option<typeof Resolution.Type>>
}

/** The service of the store, provided by the durable engines (`layerSqlite`, the PostgreSQL ones). */
export class Approvals extends Context.Service<Approvals, Store>()("valet/Durable/Approvals") {}

const table = "valet_durable_approvals"

/** The store on the engine's own SQL client (SQLite or PostgreSQL); a storage failure is a defect of the run. */
export const layerSql: Layer.Layer<Approvals, never, SqlClient.SqlClient> = Layer.effect(Approvals, Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const t = sql(table)
  // Under PostgreSQL's advisory lock: runners started at once on an empty database would race on the table's
  // catalogue rows (one of them failing with a duplicate key in pg_type).
  yield* createTables(
    sql,
    table,
    sql`CREATE TABLE IF NOT EXISTS ${t} (
    run_id TEXT NOT NULL, approval_key TEXT NOT NULL, session_id TEXT NOT NULL, tool_call_id TEXT NOT NULL,
    agent TEXT NOT NULL, name TEXT NOT NULL, arguments TEXT NOT NULL, requested_at BIGINT NOT NULL,
    state TEXT NOT NULL, resolution TEXT, PRIMARY KEY (run_id, approval_key))`
  ).pipe(Effect.orDie)
  interface Raw {
    readonly run_id: string
    readonly approval_key: string
    readonly session_id: string
    readonly tool_call_id: string
    readonly agent: string
    readonly name: string
    readonly arguments: string
    readonly requested_at: number | bigint | string
    readonly state: Row["state"]
  }
  const toRow = (raw: Raw): Row => ({
    runId: raw.run_id,
    key: raw.approval_key,
    sessionId: raw.session_id,
    toolCallId: raw.tool_call_id,
    agent: raw.agent,
    name: raw.name,
    arguments: raw.arguments,
    requestedAt: Number(raw.requested_at),
    state: raw.state
  })
  const encode = Schema.encodeSync(Schema.fromJsonString(Resolution))
  const decode = Schema.decodeUnknownSync(Schema.fromJsonString(Resolution))
  return {
    record: (row) =>
      sql`INSERT INTO ${t} (run_id, approval_key, session_id, tool_call_id, agent, name, arguments, requested_at, state)
        VALUES (${row.runId}, ${row.key}, ${row.sessionId}, ${row.toolCallId}, ${row.agent}, ${row.name}, ${row.arguments},
        ${row.requestedAt}, 'waiting') ON CONFLICT (run_id, approval_key) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie),
    find: (runId, toolCallId) =>
      sql<Raw>`SELECT * FROM ${t} WHERE run_id = ${runId} AND tool_call_id = ${toolCallId}`.pipe(
        Effect.map((rows) => rows.map(toRow)),
        Effect.orDie
      ),
    waiting: (runId) =>
      sql<Raw>`SELECT * FROM ${t} WHERE run_id = ${runId} AND state = 'waiting' ORDER BY requested_at, approval_key`.pipe(
        Effect.map((rows) => rows.map(toRow)),
        Effect.orDie
      ),
    decide: (runId, key, resolution) =>
      sql`UPDATE ${t} SET state = 'decided', resolution = ${encode(resolution)}
        WHERE run_id = ${runId} AND approval_key = ${key} AND state = 'waiting' RETURNING approval_key`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.orDie
      ),
    expire: (runId, key) =>
      Effect.gen(function*() {
        yield* sql`UPDATE ${t} SET state = 'expired' WHERE run_id = ${runId} AND approval_key = ${key} AND state = 'waiting'`
        const [row] = yield* sql<{ readonly state: string; readonly resolution: string | null }>`SELECT state, resolution FROM ${t}
          WHERE run_id = ${runId} AND approval_key = ${key}`
        return row?.state === "decided" && row.resolution !== null ? Option.some(decode(row.resolution)) : Option.none()
      }).pipe(Effect.orDie)
  }
}))

/** The store in this process's memory (with `WorkflowEngine.layerMemory`: runs that do not outlive the process). */
export const layerMemory: Layer.Layer<Approvals> = Layer.sync(Approvals, () => {
  const rows = new Map<string, { row: Row; resolution?: typeof Resolution.Type }>()
  const id = (runId: string, key: string) => `${runId}\u0000${key}`
  return {
    record: (row) => Effect.sync(() => void (rows.has(id(row.runId, row.key)) || rows.set(id(row.runId, row.key), { row: { ...row, state: "waiting" } }))),
    find: (runId, toolCallId) => Effect.sync(() => [...rows.values()].map((e) => e.row).filter((r) => r.runId === runId && r.toolCallId === toolCallId)),
    waiting: (runId) => Effect.sync(() => [...rows.values()].map((e) => e.row).filter((r) => r.runId === runId && r.state === "waiting")),
    decide: (runId, key, resolution) =>
      Effect.sync(() => {
        const entry = rows.get(id(runId, key))
        if (entry === undefined || entry.row.state !== "waiting") return false
        rows.set(id(runId, key), { row: { ...entry.row, state: "decided" }, resolution })
        return true
      }),
    expire: (runId, key) =>
      Effect.sync(() => {
        const entry = rows.get(id(runId, key))
        if (entry?.row.state === "waiting") rows.set(id(runId, key), { row: { ...entry.row, state: "expired" } })
        return Option.fromNullishOr(entry?.resolution)
      })
  }
})

/**
 * What the calls of one execution are doing about their decisions, so that a call that must wait suspends the run
 * only once its siblings are quiet: while a sibling reads its own decision (`busy`), or was approved and has not yet
 * started its tool's activity, suspending would interrupt it, and it would run only on the next decision. The
 * engine itself waits for activities in flight before it suspends; this covers the steps between them.
 */
export interface Handoffs {
  /** The tools whose calls end a handoff (`durableTools`'): a call of another tool (a sub-agent's own) holds none. */
  readonly tools: Set<string>
  /** A decided call's tool activity has ended (from `durableTools`). */
  readonly started: (sessionId: string, toolCallId: string) => void
}

const makeHandoffs = () => {
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
  return {
    tools: new Set<string>(),
    enter,
    leave,
    handOff: (sessionId: string, toolCallId: string) => void approved.add(`${sessionId}\u0000${toolCallId}`),
    started: (sessionId: string, toolCallId: string) => {
      if (approved.delete(`${sessionId}\u0000${toolCallId}`)) leave()
    },
    // Quiet now, and still after the fibers that were about to start have had their turn.
    quiet: Effect.suspend(function loop(): Effect.Effect<void> {
      return Effect.flatMap(Deferred.await(quiet), () => Effect.flatMap(Effect.yieldNow, () => busy === 0 ? Effect.void : loop()))
    })
  }
}

/** The deferred a call waits on. Its name is the call's key: the same in every execution and in `decide`. */
export const deferredOf = (key: string) => DurableDeferred.make(key, { success: Resolution })

/**
 * The `HumanLoop` of one durable run (`runId`, started for `agent`): a waiting call is recorded (an activity, once),
 * then the run awaits its deferred — raced with a `DurableClock` when the tool has a timeout — and suspends while no
 * decision is there. The engine lets the run's activities in flight (the other calls of the turn) end before it
 * suspends, and each decision wakes the run, whose replay runs the calls decided and suspends again on the others.
 * Decisions come through `Durable.decide`; this loop's own `decide` says so.
 */
export const durableHumanLoop = (
  store: Store,
  runId: string,
  agent: string
): Effect.Effect<{ readonly loop: HumanLoop.Service; readonly handoffs: Handoffs }, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const handoffs = makeHandoffs()
    // Keys are counted per execution in the order calls of one session and id start waiting (a replay starts
    // them in the order it did: ids repeat only across steps, which run one after another).
    const seen = new Map<string, number>()
    const keyOf = (request: HumanLoop.ApprovalRequest): string => {
      // The id escaped, so that `#` and `/` in a model's call id cannot make one call's key another's (`c1#2`).
      const base = `approval/${request.sessionId}/${encodeURIComponent(request.toolCallId)}`
      const n = (seen.get(base) ?? 0) + 1
      seen.set(base, n)
      return n === 1 ? base : `${base}#${n}`
    }
    const waitFor = (
      request: HumanLoop.ApprovalRequest,
      timeout: Duration.Duration | undefined
    ): Effect.Effect<Option.Option<HumanLoop.Resolution>> =>
      Effect.gen(function*() {
        const key = keyOf(request)
        yield* Activity.make({
          name: `${key}/request`,
          success: Schema.Void,
          execute: store.record({ ...request, runId, key, agent })
        })
        const deferred = deferredOf(key)
        const engine = yield* WorkflowEngine.WorkflowEngine
        // Peek first (no await registered: a decision arriving now does not interrupt the siblings), and suspend
        // only when the siblings are quiet.
        handoffs.enter()
        type Peeked = Option.Option<Exit.Exit<unknown, unknown>>
        const peeked = yield* Effect.flatMap(
          timeout === undefined ? Effect.succeed<Peeked>(Option.none()) : engine.deferredResult(raceOf(key)) as Effect.Effect<Peeked, never, WorkflowEngine.WorkflowInstance>,
          (race): Effect.Effect<Peeked, never, WorkflowEngine.WorkflowInstance> => Option.isSome(race) ? Effect.succeed(race) : engine.deferredResult(deferred)
        ).pipe(Effect.onInterrupt(() => Effect.sync(handoffs.leave)))
        if (Option.isSome(peeked) && Exit.isSuccess(peeked.value) && peeked.value.value !== "timeout") {
          const resolution = peeked.value.value as typeof Resolution.Type
          if (resolution.approved && handoffs.tools.has(request.name)) handoffs.handOff(request.sessionId, request.toolCallId)
          else handoffs.leave()
          return Option.some(resolution)
        }
        handoffs.leave()
        yield* handoffs.quiet
        if (timeout === undefined) return Option.some(yield* DurableDeferred.await(deferred))
        const raced = yield* DurableDeferred.raceAll({
          ...raceOptions(key),
          effects: [
            DurableDeferred.await(deferred),
            // inMemoryThreshold 0: a persisted clock at any length (at or below 60 s it would be an in-memory sleep).
            Effect.as(DurableClock.sleep({ name: key, duration: timeout, inMemoryThreshold: Duration.zero }), "timeout" as const)
          ]
        })
        if (raced !== "timeout") return Option.some(raced)
        // Expired, unless a decision was stored first (its completion still on its way): that one counts.
        return yield* Activity.make({
          name: `${key}/expire`,
          success: Schema.Option(Resolution),
          execute: store.expire(runId, key)
        })
      }).pipe(Effect.provideContext(context)) as Effect.Effect<Option.Option<HumanLoop.Resolution>>
    const notDurable = (id: string) =>
      Effect.fail(new HumanLoop.NotWaiting({ toolCallId: id, message: `run ${JSON.stringify(runId)} is durable: its questions do not wait (not durable yet)` }))
    const loop: HumanLoop.Service = {
      wait: (request) => Effect.map(waitFor(request, undefined), Option.getOrThrow),
      waitWithin: (request, _check, timeout) => waitFor(request, timeout),
      decide: (toolCallId) =>
        Effect.fail(new HumanLoop.NotWaiting({ toolCallId, message: `run ${JSON.stringify(runId)} is durable: decide its calls with Durable.decide` })),
      pending: () => store.waiting(runId),
      awaitPending: (count) =>
        Effect.suspend(function loop(): Effect.Effect<ReadonlyArray<HumanLoop.ApprovalRequest>> {
          return Effect.flatMap(store.waiting(runId), (rows) => rows.length >= count ? Effect.succeed(rows) : Effect.andThen(Effect.sleep("100 millis"), loop))
        }),
      // Questions are not durable yet: a durable run that asks is answered at once that nobody can answer there
      // (waiting in this process's memory would be lost with it, and replays would ask again).
      ask: () => Effect.succeed(Result.fail("nobody can answer it in a durable run yet (questions do not wait durably)")),
      answer: notDurable,
      dismiss: notDurable,
      questions: () => Effect.succeed([]),
      awaitQuestions: () => Effect.never
    }
    return { loop, handoffs }
  })

/** The race of a call's decision with its clock, as `DurableDeferred.raceAll` names it. */
const raceOptions = (key: string) => ({
  name: `${key}/timeout`,
  success: Schema.Union([Resolution, Schema.Literal("timeout")]),
  error: Schema.Never
})
const raceOf = (key: string) => {
  const options = raceOptions(key)
  return DurableDeferred.make(`raceAll/${options.name}`, { success: options.success, error: options.error })
}

/** The `Result` a tool's check gives, as the error `decide` fails with. */
const checked = (toolCallId: string, result: Result.Result<string, string>): Effect.Effect<string, HumanLoop.InvalidDecision> =>
  Result.isSuccess(result)
    ? Effect.succeed(result.success)
    : Effect.fail(new HumanLoop.InvalidDecision({ toolCallId, message: `arguments: ${result.failure}` }))

/**
 * Decides a waiting call of durable run `runId` from any process on the store: the compare-and-set on its row, then
 * the completion of its deferred. `checkOf` finds the tool's check for edited arguments (by the run's agent and the
 * tool's name): they are checked before anything changes.
 */
export const decide = <W extends Workflow.Any>(
  workflow: W,
  executionId: string,
  runId: string,
  toolCallId: string,
  decision: HumanLoop.Decision,
  options: {
    readonly sessionId?: string | undefined
    readonly checkOf: (agent: string, tool: string) => Effect.Effect<Option.Option<(value: unknown) => Result.Result<string, string>>>
  }
): Effect.Effect<HumanLoop.ApprovalRequest, HumanLoop.DecideError, Approvals | WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const store = yield* Approvals
    const root = options.sessionId
    const rows = (yield* store.find(runId, toolCallId)).filter((row) =>
      root === undefined || AgentEvent.isWithinSession(row.sessionId, root))
    const waiting = rows.filter((row) => row.state === "waiting")
    if (waiting.length === 0) {
      return yield* rows.length > 0
        ? Effect.fail(new HumanLoop.AlreadyDecided({ toolCallId, message: `the call ${JSON.stringify(toolCallId)} of run ${JSON.stringify(runId)} was decided already (or its time ran out)` }))
        : Effect.fail(new HumanLoop.NotWaiting({ toolCallId, message: `no call ${JSON.stringify(toolCallId)} of run ${JSON.stringify(runId)} waits for a decision` }))
    }
    if (waiting.length > 1) {
      return yield* new HumanLoop.InvalidDecision({
        toolCallId,
        message: `${waiting.length} waiting calls of run ${JSON.stringify(runId)} have the id ${JSON.stringify(toolCallId)} (sessions ${waiting.map((row) => row.sessionId).join(", ")}): name the session`
      })
    }
    const row = waiting[0]!
    const edited = decision.approved && decision.arguments !== undefined
    let argumentsText = row.arguments
    if (edited) {
      const check = yield* options.checkOf(row.agent, row.name)
      if (Option.isNone(check)) {
        return yield* new HumanLoop.InvalidDecision({
          toolCallId,
          message: `arguments: cannot check edited arguments here: this process does not know tool ${JSON.stringify(row.name)} of agent ${JSON.stringify(row.agent)} (pass its agents)`
        })
      }
      argumentsText = yield* checked(toolCallId, check.value(decision.arguments))
    }
    const resolution: typeof Resolution.Type = {
      approved: decision.approved,
      ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
      arguments: argumentsText,
      edited
    }
    if (!(yield* store.decide(runId, row.key, resolution))) {
      return yield* new HumanLoop.AlreadyDecided({ toolCallId, message: `the call ${JSON.stringify(toolCallId)} of run ${JSON.stringify(runId)} was decided already (or its time ran out)` })
    }
    const deferred = deferredOf(row.key)
    yield* DurableDeferred.succeed(deferred, {
      token: DurableDeferred.tokenFromExecutionId(deferred, { workflow, executionId }),
      value: resolution
    })
    const { agent: _agent, key: _key, runId: _runId, state: _state, ...request } = row
    return request
  })
