/**
 * The working state of a task between the steps of an RL loop: goals, constraints, decisions, hypotheses,
 * history, open issues and the next focus. `merge` folds a model's `state_update` into it, `render` prints it
 * for the next prompt, and the store keeps it per task id.
 *
 * Layers: `layerMemory` (tests, one process), `layerSql` on any `@effect/sql` client (SQLite and Postgres
 * dialects; table `valet_state`, created when missing) and `layerSqlite({ filename })`, the embedded default
 * (`data/state.sqlite3`). Every write is one statement; `update` / `modify` are atomic read-modify-writes
 * (optimistic, on a version column), so concurrent writers of one task — fibers or processes — never lose an
 * update.
 *
 * @since 0.1.0
 */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Context, Effect, Either, Layer, ParseResult, Schema } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"

// ---------------------------------------------------------------------------------------------------------
// State, merge, render
// ---------------------------------------------------------------------------------------------------------

const Strings = Schema.Array(Schema.String)

/** The state of a task. Snake case when encoded (`open_issues`, `next_focus`), as the seed's readers expect. */
export const State = Schema.Struct({
  goals: Strings,
  constraints: Strings,
  decisions: Strings,
  hypotheses: Strings,
  history: Strings,
  openIssues: Schema.propertySignature(Strings).pipe(Schema.fromKey("open_issues")),
  nextFocus: Schema.propertySignature(Schema.String).pipe(Schema.fromKey("next_focus"))
})
/** The state of a task. */
export type State = typeof State.Type

/** What a step adds: lists to append, and a new next focus. */
export const StateUpdate = Schema.Struct({
  goals: Schema.optional(Strings),
  constraints: Schema.optional(Strings),
  decisions: Schema.optional(Strings),
  hypotheses: Schema.optional(Strings),
  history: Schema.optional(Strings),
  openIssues: Schema.optional(Strings).pipe(Schema.fromKey("open_issues")),
  nextFocus: Schema.optional(Schema.String).pipe(Schema.fromKey("next_focus"))
})
/** What a step adds. */
export type StateUpdate = typeof StateUpdate.Type

/** The state of a task nothing was saved for. */
export const empty: State = {
  goals: [],
  constraints: [],
  decisions: [],
  hypotheses: [],
  history: [],
  openIssues: [],
  nextFocus: ""
}

/** Caps that keep prompts short. */
export interface Caps {
  /** Each string at most this many characters (default 256). */
  readonly maxItemChars: number
  /** `history` keeps its last this many items (default 3). */
  readonly historyItems: number
}

/** The default caps. */
export const defaultCaps: Caps = { maxItemChars: 256, historyItems: 3 }

const listFields = ["goals", "constraints", "decisions", "hypotheses", "history", "openIssues"] as const

/**
 * Appends each list of the update to the state's (no dedup), takes `nextFocus` from the update when it is
 * non-empty, then applies the caps: every string cut to `maxItemChars`, `history` to its last `historyItems`.
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

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const decodeObject = Schema.decodeUnknownEither(JsonObject)

/**
 * A `state_update` as a model wrote it (already parsed JSON): an object whose lists are strings or arrays of
 * strings (numbers and booleans become strings, objects their JSON), in snake or camel case; `next_focus` a
 * string. Unknown keys are ignored. `Left` says what was wrong.
 */
export const decodeUpdate = (value: unknown): Either.Either<StateUpdate, string> => {
  const object = decodeObject(value)
  if (Either.isLeft(object) || Array.isArray(value)) {
    return Either.left(`state_update must be a JSON object, got ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value}`)
  }
  const update: { -readonly [K in keyof StateUpdate]: StateUpdate[K] } = {}
  for (const [key, raw] of Object.entries(object.right)) {
    const field = snakeNames[key]
    if (field === undefined || raw === null || raw === undefined) continue
    if (field === "nextFocus") {
      if (typeof raw === "string" || typeof raw === "number") update.nextFocus = String(raw)
      else return Either.left(`state_update.${key} must be a string, got ${typeof raw}`)
      continue
    }
    const items = typeof raw === "string" ? [raw] : Array.isArray(raw) ? raw : undefined
    if (items === undefined) return Either.left(`state_update.${key} must be a list of strings, got ${typeof raw}`)
    update[field] = [...(update[field] ?? []), ...items.filter((item) => item !== null && item !== undefined).map((item) =>
      typeof item === "string" ? item : typeof item === "object" ? JSON.stringify(item) : String(item)
    )]
  }
  return Either.right(update)
}

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/** A state store could not read or write; `operation` and `taskId` say what it was doing. */
export class StateStoreError extends Schema.TaggedError<StateStoreError>()("StateStoreError", {
  operation: Schema.String,
  taskId: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** What a state store does. */
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

/** The state store service. */
export class StateStore extends Context.Tag("valet/StateStore")<StateStore, Service>() {}

/** The saved state of a task. */
export const load = (taskId: string): Effect.Effect<State, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.load(taskId))

/** Replaces the state of a task. */
export const save = (taskId: string, state: State): Effect.Effect<void, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.save(taskId, state))

/** Atomically merges an update into the saved state of a task. */
export const update = (taskId: string, stateUpdate: StateUpdate): Effect.Effect<State, StateStoreError, StateStore> =>
  Effect.flatMap(StateStore, (store) => store.update(taskId, stateUpdate))

/** Atomically transforms the saved state of a task. */
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

/** A store in this process's memory. */
export const makeMemory = (caps?: Partial<Caps>): Effect.Effect<Service> =>
  Effect.sync(() => {
    const states = new Map<string, State>()
    const allCaps = withCaps(caps)
    // Each operation is one synchronous step: JavaScript runs one fiber at a time, so it is atomic.
    const modify = (taskId: string, f: (state: State) => State) =>
      Effect.zipRight(
        checkTaskId("modify", taskId),
        Effect.sync(() => {
          const next = f(states.get(taskId) ?? empty)
          states.set(taskId, next)
          return next
        })
      )
    return {
      caps: allCaps,
      load: (taskId) => Effect.zipRight(checkTaskId("load", taskId), Effect.sync(() => states.get(taskId) ?? empty)),
      save: (taskId, state) => Effect.zipRight(checkTaskId("save", taskId), Effect.sync(() => void states.set(taskId, state))),
      modify,
      update: (taskId, stateUpdate) => modify(taskId, (state) => merge(state, stateUpdate, allCaps))
    }
  })

/** A store in this process's memory: states last as long as the layer. */
export const layerMemory = (caps?: Partial<Caps>): Layer.Layer<StateStore> => Layer.effect(StateStore, makeMemory(caps))

// ---------------------------------------------------------------------------------------------------------
// SQL
// ---------------------------------------------------------------------------------------------------------

/** The table the SQL store keeps states in. */
export const tableName = "valet_state"

const StateJson = Schema.parseJson(State)
const decodeStateJson = Schema.decodeUnknownEither(StateJson)
const encodeStateJson = Schema.encodeSync(StateJson)
// SQLite answers numbers; Postgres answers BIGINT columns as strings.
const Row = Schema.Struct({ state: Schema.String, version: Schema.Union(Schema.Number, Schema.NumberFromString) })
const decodeRow = Schema.decodeUnknownEither(Row)

const sqlFailure = (operation: string, taskId?: string) => (error: { readonly message: string; readonly cause?: unknown }) =>
  new StateStoreError({
    operation,
    ...(taskId !== undefined ? { taskId } : {}),
    message: `${tableName}: ${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}`
  })

/** How many times an optimistic write is retried when another writer got in between. */
const maxAttempts = 100

/** A store on the `SqlClient` in context; creates its table when missing. */
export const makeSql = (caps?: Partial<Caps>): Effect.Effect<Service, StateStoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`CREATE TABLE IF NOT EXISTS ${sql(tableName)} (
      task_id TEXT PRIMARY KEY, state TEXT NOT NULL, version BIGINT NOT NULL, updated_at BIGINT NOT NULL)`.pipe(
      Effect.mapError(sqlFailure("create table"))
    )
    const allCaps = withCaps(caps)
    // Writers of one task in this process take turns, so the optimistic check only races other processes.
    const locks = new Map<string, { semaphore: Effect.Semaphore; users: number }>()
    const withLock = <A, E>(taskId: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        let lock = locks.get(taskId)
        if (lock === undefined) {
          lock = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
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
          const row = decodeRow(rows[0])
          const state = Either.flatMap(row, (row) => decodeStateJson(row.state))
          if (Either.isLeft(state) || Either.isLeft(row)) {
            const error = Either.isLeft(row) ? row.left : (state as Either.Left<ParseResult.ParseError, State>).left
            return Effect.fail(
              new StateStoreError({
                operation,
                taskId,
                message: `the saved state of task ${JSON.stringify(taskId)} in ${tableName} is not a state: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
              })
            )
          }
          return Effect.succeed({ state: state.right, version: Number(row.right.version) })
        })
      )

    const load = (taskId: string) =>
      Effect.zipRight(checkTaskId("load", taskId), Effect.map(read("load", taskId), (found) => found?.state ?? empty))

    const save = (taskId: string, state: State) =>
      checkTaskId("save", taskId).pipe(
        Effect.zipRight(Clock.currentTimeMillis),
        Effect.flatMap((now) =>
          sql`INSERT INTO ${sql(tableName)} (task_id, state, version, updated_at)
            VALUES (${taskId}, ${encodeStateJson(state)}, 1, ${now})
            ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, version = ${sql(tableName)}.version + 1,
              updated_at = excluded.updated_at`
        ),
        Effect.mapError((error) => (error._tag === "StateStoreError" ? error : sqlFailure("save", taskId)(error))),
        Effect.asVoid
      )

    const modify = (taskId: string, f: (state: State) => State) =>
      Effect.zipRight(
        checkTaskId("modify", taskId),
        withLock(
          taskId,
          Effect.gen(function*() {
            for (let attempt = 1; attempt <= maxAttempts; attempt++) {
              const found = yield* read("modify", taskId)
              const next = f(found?.state ?? empty)
              const text = encodeStateJson(next)
              const now = yield* Clock.currentTimeMillis
              // One statement each, conditioned on the version read: it writes only if nobody wrote in between.
              const written = found === undefined
                ? yield* sql`INSERT INTO ${sql(tableName)} (task_id, state, version, updated_at)
                    VALUES (${taskId}, ${text}, 1, ${now}) ON CONFLICT (task_id) DO NOTHING RETURNING version`
                : yield* sql`UPDATE ${sql(tableName)} SET state = ${text}, version = version + 1, updated_at = ${now}
                    WHERE task_id = ${taskId} AND version = ${found.version} RETURNING version`
              if (written.length === 1) return next
              // Another writer succeeded in between (progress was made): read again at once.
              yield* Effect.yieldNow()
            }
            return yield* new StateStoreError({
              operation: "modify",
              taskId,
              message: `the state of task ${JSON.stringify(taskId)} changed under ${maxAttempts} attempts in a row; giving up`
            })
          }).pipe(Effect.mapError((error) => (error._tag === "StateStoreError" ? error : sqlFailure("modify", taskId)(error))))
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

/** A store on the `SqlClient` in context (SQLite or Postgres). */
export const layerSql = (caps?: Partial<Caps>): Layer.Layer<StateStore, StateStoreError, SqlClient.SqlClient> =>
  Layer.effect(StateStore, makeSql(caps))

/** Options of `layerSqlite`. */
export interface SqliteOptions {
  /** The database file (its directory is created when missing), or `:memory:`. Default `data/state.sqlite3`. */
  readonly filename?: string
  readonly caps?: Partial<Caps>
}

/** The default database file. */
export const defaultFilename = "data/state.sqlite3"

/** A store in a SQLite file: the embedded default. */
export const layerSqlite = (options: SqliteOptions = {}): Layer.Layer<StateStore, StateStoreError> => {
  const filename = options.filename ?? defaultFilename
  return layerSql(options.caps).pipe(
    Layer.provide(
      Layer.unwrapEffect(
        Effect.try({
          try: () => {
            // better-sqlite3 cannot create a directory, and fails in a way SqliteClient reports as a defect.
            if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
            return SqliteClient.layer({ filename })
          },
          catch: (error) =>
            new StateStoreError({
              operation: "open",
              message: `cannot create the directory of ${filename}: ${error instanceof Error ? error.message : String(error)}`
            })
        })
      ).pipe(
        Layer.mapError((error) =>
          error._tag === "StateStoreError" ? error : new StateStoreError({ operation: "open", message: `${filename}: ${String(error)}` })
        )
      )
    )
  )
}
