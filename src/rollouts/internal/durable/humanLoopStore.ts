/**
 * Where durable runs keep what waits for a person (DESIGN §15): the calls that wait for a decision and the questions
 * that wait for an answer, one row each, in a table beside the engine's (`valet_durable_human_loop`). The engine keeps
 * what a run waits on only in memory and drops a second completion of a deferred silently (the first wins), so this
 * table is what lists a run's waits and what makes one decision or answer the one that counts: a compare-and-set
 * from `waiting` to `settled` (or `expired`, when a timeout wins), before the deferred is completed with what the row
 * stored (sent again after a crash, it is the same).
 */
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { createTables } from "../../../core/internal/sql.js"

/** What a row waits for. */
export type Kind = "approval" | "question"

/** One wait of a durable run. */
export interface Row {
  readonly runId: string
  readonly kind: Kind
  /**
   * The wait's deferred: `approval/<session>/<call id>` or `question/<session>/<question id>` (`#n` when a session
   * waits on the same id again: a call id a model repeats, a question asked again after an answer its schema refused).
   */
  readonly key: string
  readonly sessionId: string
  /** The call's id, or the question's. */
  readonly requestId: string
  /** The agent the run was started with (to find the tool that checks edited arguments). */
  readonly agent: string
  /** What waits, as JSON: the call's tool and arguments, or the question and its answer's JSON schema. */
  readonly request: string
  readonly requestedAt: number
  readonly state: "waiting" | "settled" | "expired"
}

/** The store of a durable engine's waits. */
export interface Store {
  /** Records a wait that starts; a row already there (a replay) is kept as it is. */
  readonly record: (row: Omit<Row, "state">) => Effect.Effect<void>
  /** The rows of a run of this kind with this id (of every session, every attempt). */
  readonly find: (runId: string, kind: Kind, requestId: string) => Effect.Effect<ReadonlyArray<Row>>
  /** The waits of a run of this kind waiting now, oldest first. */
  readonly waiting: (runId: string, kind: Kind) => Effect.Effect<ReadonlyArray<Row>>
  /** `waiting` → `settled` with `outcome` (JSON): false when the row was not waiting (someone was first). */
  readonly settle: (runId: string, key: string, outcome: string) => Effect.Effect<boolean>
  /** `waiting` → `expired`; a row settled first answers its outcome. */
  readonly expire: (runId: string, key: string) => Effect.Effect<Option.Option<string>>
  /** The outcome a settled row stored (`None` while it waits, or when it expired). */
  readonly outcome: (runId: string, key: string) => Effect.Effect<Option.Option<string>>
}

/**
 * The service of the store, provided by the durable engines (`layerSqlite`, the PostgreSQL ones).
 *
 * @since 0.2.0
 * @category services
 */
export class HumanLoopStore extends Context.Service<HumanLoopStore, Store>()("valet/Durable/HumanLoopStore") {}

const table = "valet_durable_human_loop"

/** The store on the engine's own SQL client (SQLite or PostgreSQL); a storage failure is a defect of the run. */
export const layerSql: Layer.Layer<HumanLoopStore, never, SqlClient.SqlClient> = Layer.effect(HumanLoopStore, Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const t = sql(table)
  // Under PostgreSQL's advisory lock: runners started at once on an empty database would race on the table's
  // catalogue rows (one of them failing with a duplicate key in pg_type).
  yield* createTables(
    sql,
    table,
    sql`CREATE TABLE IF NOT EXISTS ${t} (
    run_id TEXT NOT NULL, wait_key TEXT NOT NULL, kind TEXT NOT NULL, session_id TEXT NOT NULL, request_id TEXT NOT NULL,
    agent TEXT NOT NULL, request TEXT NOT NULL, requested_at BIGINT NOT NULL, state TEXT NOT NULL, outcome TEXT,
    PRIMARY KEY (run_id, wait_key))`
  ).pipe(Effect.orDie)
  interface Raw {
    readonly run_id: string
    readonly wait_key: string
    readonly kind: Kind
    readonly session_id: string
    readonly request_id: string
    readonly agent: string
    readonly request: string
    readonly requested_at: number | bigint | string
    readonly state: Row["state"]
  }
  const toRow = (raw: Raw): Row => ({
    runId: raw.run_id,
    kind: raw.kind,
    key: raw.wait_key,
    sessionId: raw.session_id,
    requestId: raw.request_id,
    agent: raw.agent,
    request: raw.request,
    requestedAt: Number(raw.requested_at),
    state: raw.state
  })
  return {
    record: (row) =>
      sql`INSERT INTO ${t} (run_id, wait_key, kind, session_id, request_id, agent, request, requested_at, state)
        VALUES (${row.runId}, ${row.key}, ${row.kind}, ${row.sessionId}, ${row.requestId}, ${row.agent}, ${row.request},
        ${row.requestedAt}, 'waiting') ON CONFLICT (run_id, wait_key) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie),
    find: (runId, kind, requestId) =>
      sql<Raw>`SELECT * FROM ${t} WHERE run_id = ${runId} AND kind = ${kind} AND request_id = ${requestId}`.pipe(
        Effect.map((rows) => rows.map(toRow)),
        Effect.orDie
      ),
    waiting: (runId, kind) =>
      sql<Raw>`SELECT * FROM ${t} WHERE run_id = ${runId} AND kind = ${kind} AND state = 'waiting'
        ORDER BY requested_at, wait_key`.pipe(
        Effect.map((rows) => rows.map(toRow)),
        Effect.orDie
      ),
    settle: (runId, key, outcome) =>
      sql`UPDATE ${t} SET state = 'settled', outcome = ${outcome}
        WHERE run_id = ${runId} AND wait_key = ${key} AND state = 'waiting' RETURNING wait_key`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.orDie
      ),
    expire: (runId, key) =>
      Effect.gen(function*() {
        yield* sql`UPDATE ${t} SET state = 'expired' WHERE run_id = ${runId} AND wait_key = ${key} AND state = 'waiting'`
        const [row] = yield* sql<{ readonly state: string; readonly outcome: string | null }>`SELECT state, outcome FROM ${t}
          WHERE run_id = ${runId} AND wait_key = ${key}`
        return row?.state === "settled" && row.outcome !== null ? Option.some(row.outcome) : Option.none()
      }).pipe(Effect.orDie),
    outcome: (runId, key) =>
      sql<{ readonly outcome: string | null }>`SELECT outcome FROM ${t}
        WHERE run_id = ${runId} AND wait_key = ${key} AND state = 'settled'`.pipe(
        Effect.map(([row]) => Option.fromNullishOr(row?.outcome)),
        Effect.orDie
      )
  }
}))

/** The store in this process's memory (with `WorkflowEngine.layerMemory`: runs that do not outlive the process). */
export const layerMemory: Layer.Layer<HumanLoopStore> = Layer.sync(HumanLoopStore, () => {
  const rows = new Map<string, { readonly row: Row; readonly outcome?: string }>()
  const id = (runId: string, key: string) => `${runId}\u0000${key}`
  const all = () => [...rows.values()].map((entry) => entry.row)
  return {
    record: (row) =>
      Effect.sync(() => void (rows.has(id(row.runId, row.key)) || rows.set(id(row.runId, row.key), { row: { ...row, state: "waiting" } }))),
    find: (runId, kind, requestId) => Effect.sync(() => all().filter((r) => r.runId === runId && r.kind === kind && r.requestId === requestId)),
    waiting: (runId, kind) => Effect.sync(() => all().filter((r) => r.runId === runId && r.kind === kind && r.state === "waiting")),
    settle: (runId, key, outcome) =>
      Effect.sync(() => {
        const entry = rows.get(id(runId, key))
        if (entry === undefined || entry.row.state !== "waiting") return false
        rows.set(id(runId, key), { row: { ...entry.row, state: "settled" }, outcome })
        return true
      }),
    expire: (runId, key) =>
      Effect.sync(() => {
        const entry = rows.get(id(runId, key))
        if (entry?.row.state === "waiting") rows.set(id(runId, key), { row: { ...entry.row, state: "expired" } })
        return Option.fromNullishOr(entry?.outcome)
      }),
    outcome: (runId, key) => Effect.sync(() => Option.fromNullishOr(rows.get(id(runId, key))?.outcome))
  }
})
