/**
 * The working state of a task between the steps of an RL loop: goals, constraints, decisions, hypotheses,
 * history, open issues and the next focus. `merge` folds a model's `state_update` into it, `render` prints it
 * for the next prompt, and the store keeps it per task id.
 *
 * Layers: `layerMemory` (tests, one process), `layerSql` on any `effect/sql` `SqlClient` (SQLite and PostgreSQL
 * dialects — `@effect/sql-pg`'s `PgClient` for PostgreSQL; table `valet_state`, created when missing) and
 * `layerSqlite({ filename })`, the embedded default (`data/state.sqlite3`, on valet's `SqliteClient` over
 * `node:sqlite`). Every write is one statement; `update` / `modify` are atomic read-modify-writes (optimistic, on
 * a version column), so concurrent writers of one task — fibers or processes — never lose an update. Rows read
 * back are schema-checked: a bad one is a `StateStoreError` naming the task and what is wrong. `layerSqlite` commits
 * in WAL mode with `synchronous = NORMAL`: a killed process keeps every commit; an OS crash or a power loss can lose
 * the last ones (the state then lags the trajectory lines of those steps). For a sync per commit, use `layerSql` on
 * a client you opened with `PRAGMA synchronous = FULL`.
 *
 * @example
 * ```ts
 * import { Effect, Result } from "effect"
 * import * as StateStore from "valet/StateStore"
 *
 * // One step: the model's `state_update` (parsed JSON, snake or camel case) is folded into the task's state,
 * // which the next prompt shows.
 * const step = (stateUpdate: unknown) =>
 *   Effect.gen(function*() {
 *     const update = StateStore.decodeUpdate(stateUpdate)
 *     if (Result.isFailure(update)) return `state_update ignored: ${update.failure}`
 *     const state = yield* StateStore.update("task-7", update.success)
 *     return StateStore.render(state)
 *   })
 *
 * // In memory for a test; `StateStore.layerSqlite()` keeps states in `data/state.sqlite3` across processes.
 * const prompt = step({ decisions: ["use a heap"], next_focus: "write the tests" }).pipe(
 *   Effect.provide(StateStore.layerMemory())
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Result, Schema, Semaphore } from "effect"
import type { SqlError } from "effect/sql"
import { SqlClient } from "effect/sql"
import { formatIssue } from "../core/internal/decode.js"
import { createTables, describeSqlError, IntegerColumn, openSqliteFile } from "./internal/sqliteStores.js"

// ---------------------------------------------------------------------------------------------------------
// State, merge, render
// ---------------------------------------------------------------------------------------------------------

const Strings = Schema.Array(Schema.String)

/**
 * The state of a task. Snake case when encoded (`open_issues`, `next_focus`), as the seed's readers expect.
 *
 * @since 0.1.0
 * @category models
 */
export const State = Schema.Struct({
  goals: Strings,
  constraints: Strings,
  decisions: Strings,
  hypotheses: Strings,
  history: Strings,
  openIssues: Strings,
  nextFocus: Schema.String
}).pipe(Schema.encodeKeys({ openIssues: "open_issues", nextFocus: "next_focus" }))
/**
 * The state of a task.
 *
 * @since 0.1.0
 * @category models
 */
export type State = typeof State.Type

/**
 * What a step adds: lists to append, and a new next focus.
 *
 * @since 0.1.0
 * @category models
 */
export const StateUpdate = Schema.Struct({
  goals: Schema.optional(Strings),
  constraints: Schema.optional(Strings),
  decisions: Schema.optional(Strings),
  hypotheses: Schema.optional(Strings),
  history: Schema.optional(Strings),
  openIssues: Schema.optional(Strings),
  nextFocus: Schema.optional(Schema.String)
}).pipe(Schema.encodeKeys({ openIssues: "open_issues", nextFocus: "next_focus" }))
/**
 * What a step adds.
 *
 * @since 0.1.0
 * @category models
 */
export type StateUpdate = typeof StateUpdate.Type

/**
 * The state of a task nothing was saved for.
 *
 * @since 0.1.0
 * @category constants
 */
export const empty: State = {
  goals: [],
  constraints: [],
  decisions: [],
  hypotheses: [],
  history: [],
  openIssues: [],
  nextFocus: ""
}

/**
 * Caps that keep prompts short.
 *
 * @since 0.1.0
 * @category options
 */
export interface Caps {
  /** Each string at most this many characters (default 256). */
  readonly maxItemChars: number
  /** `history` keeps its last this many items (default 3). */
  readonly historyItems: number
}

/**
 * The default caps.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultCaps: Caps = { maxItemChars: 256, historyItems: 3 }

const listFields = ["goals", "constraints", "decisions", "hypotheses", "history", "openIssues"] as const

/**
 * Appends each list of the update to the state's (no dedup), takes `nextFocus` from the update when it is
 * non-empty, then applies the caps: every string cut to `maxItemChars`, `history` to its last `historyItems`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const merge = (existing: State, update: StateUpdate, caps: Caps = defaultCaps): State => {
  const cap = (text: string) => (text.length > caps.maxItemChars ? text.slice(0, caps.maxItemChars) : text)
  const list = (field: typeof listFields[number]) => {
    const joined = [...existing[field], ...(update[field] ?? [])].map(cap)
    return field === "history" ? joined.slice(Math.max(0, joined.length - caps.historyItems)) : joined
  }
  const nextFocus = update.nextFocus !== undefined && update.nextFocus.trim() !== "" ? update.nextFocus : existing.nextFocus
  return {
    goals: list("goals"),
    constraints: list("constraints"),
    decisions: list("decisions"),
    hypotheses: list("hypotheses"),
    history: list("history"),
    openIssues: list("openIssues"),
    nextFocus: cap(nextFocus)
  }
}

const sections: ReadonlyArray<readonly [typeof listFields[number], string]> = [
  ["goals", "Goals:"],
  ["constraints", "Constraints:"],
  ["decisions", "Decisions:"],
  ["hypotheses", "Hypotheses:"],
  ["history", "History:"],
  ["openIssues", "Open issues:"]
]

/**
 * The state as prompt text: `Goals:`, `Constraints:`, `Decisions:`, `Hypotheses:`, `History:`, `Open issues:`
 * (each followed by `- item` lines) and `Next focus:` (followed by the text on the next line), in that order,
 * only the non-empty ones, separated by a blank line. The empty state renders as `""`.
 *
 * @since 0.1.0
 * @category utils
 */
export const render = (state: State): string => {
  const parts: Array<string> = []
  for (const [field, title] of sections) {
    const items = state[field]
    if (items.length > 0) parts.push(`${title}\n${items.map((item) => `- ${item}`).join("\n")}`)
  }
  if (state.nextFocus.trim() !== "") parts.push(`Next focus:\n${state.nextFocus}`)
  return parts.join("\n\n")
}

const snakeNames: Record<string, typeof listFields[number] | "nextFocus"> = {
  goals: "goals",
  constraints: "constraints",
  decisions: "decisions",
  hypotheses: "hypotheses",
  history: "history",
  open_issues: "openIssues",
  openIssues: "openIssues",
  next_focus: "nextFocus",
  nextFocus: "nextFocus"
}

const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
const decodeObject = Schema.decodeUnknownResult(JsonObject)

/**
 * A `state_update` as a model wrote it (already parsed JSON): an object whose lists are strings or arrays of
 * strings (numbers and booleans become strings, objects their JSON), in snake or camel case; `next_focus` a
 * string. Unknown keys are ignored. A failure says what was wrong.
 *
 * @since 0.1.0
 * @category parsing
 */
export const decodeUpdate = (value: unknown): Result.Result<StateUpdate, string> => {
  const object = decodeObject(value)
  if (Result.isFailure(object) || Array.isArray(value)) {
    return Result.fail(`state_update must be a JSON object, got ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value}`)
  }
  const update: { -readonly [K in keyof StateUpdate]: StateUpdate[K] } = {}
  for (const [key, raw] of Object.entries(object.success)) {
    const field = snakeNames[key]
    if (field === undefined || raw === null || raw === undefined) continue
    if (field === "nextFocus") {
      if (typeof raw === "string" || typeof raw === "number") update.nextFocus = String(raw)
      else return Result.fail(`state_update.${key} must be a string, got ${typeof raw}`)
      continue
    }
    const items = typeof raw === "string" ? [raw] : Array.isArray(raw) ? raw : undefined
    if (items === undefined) return Result.fail(`state_update.${key} must be a list of strings, got ${typeof raw}`)
    update[field] = [...(update[field] ?? []), ...items.filter((item) => item !== null && item !== undefined).map((item) =>
      typeof item === "string" ? item : typeof item === "object" ? JSON.stringify(item) : String(item)
    )]
  }
  return Result.succeed(update)
}

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * A state store could not read or write; `operation` and `taskId` say what it was doing.
 *
 * @since 0.1.0
 * @category errors
 */
export class StateStoreError extends Schema.TaggedError<StateStoreError>()("StateStoreError", {
  operation: Schema.String,
  taskId: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/**
 * What a state store does.
 *
 * @since 0.1.0
 * @category services
 */
export interface Service {
  /** The caps `update` applies. */
  readonly caps: Caps
  /** The saved state of a task; the empty state when there is none. */
  readonly load: (taskId: string) => Effect.Effect<State, StateStoreError>
  /** Replaces the state of a task. */
  readonly save: (taskId: string, state: State) => Effect.Effect<void, StateStoreError>
  /** Atomically applies `f` to the saved state and saves the result, which it answers. */
  readonly modify: (taskId: string, f: (state: State) => State) => Effect.Effect<State, StateStoreError>
  /** Atomically merges an update into the saved state (with the store's caps); answers the new state. */
  readonly update: (taskId: string, update: StateUpdate) => Effect.Effect<State, StateStoreError>
}

/**
 * The state store service.
 *
 * @since 0.1.0
 * @category services
 */
export class StateStore extends Context.Service<StateStore, Service>()("valet/StateStore") {}

/**
 * The saved state of a task.
 *
 * @since 0.1.0
 * @category accessors
 */
export const load = (taskId: string): Effect.Effect<State, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.load(taskId))

/**
 * Replaces the state of a task.
 *
 * @since 0.1.0
 * @category accessors
 */
export const save = (taskId: string, state: State): Effect.Effect<void, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.save(taskId, state))

/**
 * Atomically merges an update into the saved state of a task.
 *
 * @since 0.1.0
 * @category accessors
 */
export const update = (taskId: string, stateUpdate: StateUpdate): Effect.Effect<State, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.update(taskId, stateUpdate))

/**
 * Atomically transforms the saved state of a task.
 *
 * @since 0.1.0
 * @category accessors
 */
export const modify = (taskId: string, f: (state: State) => State): Effect.Effect<State, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.modify(taskId, f))

const checkTaskId = (operation: string, taskId: string): Effect.Effect<void, StateStoreError> =>
  taskId.trim() === ""
    ? Effect.fail(new StateStoreError({ operation, taskId, message: "the task id is empty" }))
    : Effect.void

const withCaps = (caps: Partial<Caps> | undefined): Caps => ({ ...defaultCaps, ...caps })

// ---------------------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------------------

/**
 * A store in this process's memory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (caps?: Partial<Caps>): Effect.Effect<Service> =>
  Effect.sync(() => {
    const states = new Map<string, State>()
    const allCaps = withCaps(caps)
    // Each operation is one synchronous step: JavaScript runs one fiber at a time, so it is atomic.
    const modify = (taskId: string, f: (state: State) => State) =>
      Effect.andThen(
        checkTaskId("modify", taskId),
        Effect.sync(() => {
          const next = f(states.get(taskId) ?? empty)
          states.set(taskId, next)
          return next
        })
      )
    return {
      caps: allCaps,
      load: (taskId) => Effect.andThen(checkTaskId("load", taskId), Effect.sync(() => states.get(taskId) ?? empty)),
      save: (taskId, state) => Effect.andThen(checkTaskId("save", taskId), Effect.sync(() => void states.set(taskId, state))),
      modify,
      update: (taskId, stateUpdate) => modify(taskId, (state) => merge(state, stateUpdate, allCaps))
    }
  })

/**
 * A store in this process's memory: states last as long as the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (caps?: Partial<Caps>): Layer.Layer<StateStore> => Layer.effect(StateStore, makeMemory(caps))

// ---------------------------------------------------------------------------------------------------------
// SQL
// ---------------------------------------------------------------------------------------------------------

/**
 * The table the SQL store keeps states in.
 *
 * @since 0.1.0
 * @category constants
 */
export const tableName = "valet_state"

const encodeState = Schema.encodeSync(State)
const decodeState = Schema.decodeUnknownResult(State)
const Row = Schema.Struct({ state: Schema.String, version: IntegerColumn })
const decodeRow = Schema.decodeUnknownResult(Row)

/** A row as the saved state and its version, or a message (starting with `what`) saying what is wrong with it. */
const fromRow = (row: unknown, what: string): Result.Result<{ readonly state: State; readonly version: number }, string> => {
  const decoded = decodeRow(row)
  if (Result.isFailure(decoded)) return Result.fail(formatIssue(`${what} is not a state row`, decoded.failure.issue, row))
  let json: unknown
  try {
    json = JSON.parse(decoded.success.state)
  } catch (error) {
    return Result.fail(`${what} is not a state: the state column is not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  const state = decodeState(json)
  return Result.isFailure(state)
    ? Result.fail(formatIssue(`${what} is not a state`, state.failure.issue, json))
    : Result.succeed({ state: state.success, version: decoded.success.version })
}

const sqlFailure = (operation: string, taskId?: string) => (error: SqlError.SqlError) =>
  new StateStoreError({
    operation,
    ...(taskId !== undefined ? { taskId } : {}),
    message: `${tableName}: ${describeSqlError(error)}`
  })

/** How many times an optimistic write is retried when another writer got in between. */
const maxAttempts = 100

/**
 * A store on the `SqlClient` in context; creates its table when missing.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSql = (caps?: Partial<Caps>): Effect.Effect<Service, StateStoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    // Column names are ours whatever name transforms the client was configured with.
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* createTables(
      sql,
      tableName,
      sql`CREATE TABLE IF NOT EXISTS ${sql(tableName)} (
        task_id TEXT PRIMARY KEY, state TEXT NOT NULL, version BIGINT NOT NULL, updated_at BIGINT NOT NULL)`
    ).pipe(Effect.mapError(sqlFailure("create table")))
    const allCaps = withCaps(caps)
    // Writers of one task in this process take turns, so the optimistic check only races other processes.
    const locks = new Map<string, { semaphore: Semaphore.Semaphore; users: number }>()
    const withLock = <A, E>(taskId: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        let lock = locks.get(taskId)
        if (lock === undefined) {
          lock = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
          locks.set(taskId, lock)
        }
        const held = lock
        held.users++
        return held.semaphore.withPermits(1)(effect).pipe(
          Effect.ensuring(Effect.sync(() => {
            if (--held.users === 0) locks.delete(taskId)
          }))
        )
      })

    const read = (operation: string, taskId: string) =>
      sql`SELECT state, version FROM ${sql(tableName)} WHERE task_id = ${taskId}`.pipe(
        Effect.mapError(sqlFailure(operation, taskId)),
        Effect.flatMap((rows) => {
          if (rows.length === 0) return Effect.succeed(undefined)
          const found = fromRow(rows[0], `the saved state of task ${JSON.stringify(taskId)} in ${tableName}`)
          return Result.isSuccess(found)
            ? Effect.succeed(found.success)
            : Effect.fail(new StateStoreError({ operation, taskId, message: found.failure }))
        })
      )

    const load = (taskId: string) =>
      Effect.andThen(checkTaskId("load", taskId), Effect.map(read("load", taskId), (found) => found?.state ?? empty))

    const save = (taskId: string, state: State) =>
      checkTaskId("save", taskId).pipe(
        Effect.andThen(Clock.currentTimeMillis),
        Effect.flatMap((now) =>
          sql`INSERT INTO ${sql(tableName)} (task_id, state, version, updated_at)
            VALUES (${taskId}, ${JSON.stringify(encodeState(state))}, 1, ${now})
            ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, version = ${sql(tableName)}.version + 1,
              updated_at = excluded.updated_at`.pipe(Effect.mapError(sqlFailure("save", taskId)))
        ),
        Effect.asVoid
      )

    const modify = (taskId: string, f: (state: State) => State) =>
      Effect.andThen(
        checkTaskId("modify", taskId),
        withLock(
          taskId,
          Effect.gen(function*() {
            for (let attempt = 1; attempt <= maxAttempts; attempt++) {
              const found = yield* read("modify", taskId)
              const next = f(found?.state ?? empty)
              const text = JSON.stringify(encodeState(next))
              const now = yield* Clock.currentTimeMillis
              // One statement each, conditioned on the version read: it writes only if nobody wrote in between.
              const written = yield* (found === undefined
                ? sql`INSERT INTO ${sql(tableName)} (task_id, state, version, updated_at)
                    VALUES (${taskId}, ${text}, 1, ${now}) ON CONFLICT (task_id) DO NOTHING RETURNING version`
                : sql`UPDATE ${sql(tableName)} SET state = ${text}, version = version + 1, updated_at = ${now}
                    WHERE task_id = ${taskId} AND version = ${found.version} RETURNING version`).pipe(
                  Effect.mapError(sqlFailure("modify", taskId))
                )
              if (written.length === 1) return next
              // Another writer succeeded in between (progress was made): read again at once.
              yield* Effect.yieldNow
            }
            return yield* new StateStoreError({
              operation: "modify",
              taskId,
              message: `the state of task ${JSON.stringify(taskId)} changed under ${maxAttempts} attempts in a row; giving up`
            })
          })
        )
      )

    return {
      caps: allCaps,
      load,
      save,
      modify,
      update: (taskId, stateUpdate) => modify(taskId, (state) => merge(state, stateUpdate, allCaps))
    } satisfies Service
  })

/**
 * A store on the `SqlClient` in context (SQLite, or PostgreSQL through `@effect/sql-pg`'s `PgClient`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSql = (caps?: Partial<Caps>): Layer.Layer<StateStore, StateStoreError, SqlClient.SqlClient> =>
  Layer.effect(StateStore, makeSql(caps))

/**
 * Options of `layerSqlite`.
 *
 * @since 0.1.0
 * @category options
 */
export interface SqliteOptions {
  /** The database file (its directory is created when missing), or `:memory:`. Default `data/state.sqlite3`. */
  readonly filename?: string | undefined
  readonly caps?: Partial<Caps> | undefined
}

/**
 * The default database file.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultFilename = "data/state.sqlite3"

/**
 * A store in a SQLite file (through valet's `SqliteClient` over `node:sqlite`): the embedded default.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (options: SqliteOptions = {}): Layer.Layer<StateStore, StateStoreError> => {
  const filename = options.filename ?? defaultFilename
  return layerSql(options.caps).pipe(
    Layer.provide(openSqliteFile(filename, (message) => new StateStoreError({ operation: "open", message })))
  )
}
