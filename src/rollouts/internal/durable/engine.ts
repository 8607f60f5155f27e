/**
 * valet's durable engine: effect/workflow's in-memory engine (`WorkflowEngine.layerMemory`, whose logic of
 * runs, replays, suspensions, interrupts and wake-ups this follows step for step) with what a run must not lose
 * written through to SQL tables beside it:
 *
 * - an execution when it starts (its workflow, its encoded payload, its parent) and its result when it completes;
 * - an activity's result when it ends (one `INSERT` per activity: replayed, the activity answers it instead of running);
 * - a deferred's result (a decision, an answer, a clock's wake-up) when it is completed, by this process or another;
 * - a durable clock's wake-up time, until it fires.
 *
 * Why not effect/cluster's engine (which valet used here before): on one process it routes each activity through the
 * sharding's message storage — a request saved, read back and claimed, and a reply saved: three transactions and
 * about four statements an activity, plus the mailbox and entity machinery — which made a durable evaluation run at
 * 0.67–0.69× of the same evaluation not durable (bench/durable.ts, quiet machine). Here an activity costs one
 * statement, and the writes of fibers ready at once share one commit: 0.87–0.91×.
 *
 * On start, once a workflow's handler is registered, its executions that have no result are run again: they replay
 * from what was stored (activities answer their stored results), as effect/cluster resumed them when its runner
 * started — except those that failed and suspended (`Workflow.SuspendOnFailure`), which wait for a resume there too.
 * A run that ends because the file failed (an activity's result could not be stored) is not stored as ended: the next
 * process runs it. Another process on the same file (a client: `clientOnly`) runs no workflow; the deferreds it
 * completes (a decision, an answer), the interrupts it marks and the resumes it asks for are rows this process finds
 * when SQLite says another connection committed (`PRAGMA data_version`, looked at four times a second); a deferred
 * completed twice is the first one stored, in the run as in the file. One process only runs a file's workflows (a
 * second would resume the first one's runs too): a running engine claims the file (`engineClaim.ts`).
 *
 * A run that waits is dropped from memory and loaded again when what it waits for comes; a call on it meanwhile
 * answers its stored suspension without running it.
 *
 * Shared (`sharing`: PostgreSQL, `engineRunners.ts`), the same engine runs in many processes on one database: an
 * execution's `owner` runs it (a runner loads and runs only what it owns, taken through `Hooks.adopt`); a call, a
 * deferred, an interrupt or a resume on another's execution is written for its owner and said on a channel
 * (`Message`); a client stores what it starts for a runner to take. Writes are not grouped in a transaction there.
 */
import { Cause, Clock, Context, Deferred, Duration, Effect, Exit, Fiber, FiberMap, Layer, Option, Schema, Scope } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { type Activity, type DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import * as Claim from "./engineClaim.js"
import { decodeSuspended, encodeSuspended, exitOf, exitText, parseJson, payloadCodec, type Result, resultCodec } from "./engineCodecs.js"
import {
  activitiesTable,
  clocksTable,
  deferredsTable,
  type ExecutionRow,
  type ExecutionState,
  executionsTable,
  isUnwakeable,
  type Message,
  type Options,
  type Registered,
  type ResumeMode,
  resumesTable,
  runnerTable,
  type Taken
} from "./engineModel.js"
import * as Store from "./engineStore.js"

export { deferredsTable, executionsTable } from "./engineModel.js"
export type { ExecutionRow, Message, OnStoreFailure, Options, Sharing, Taken } from "./engineModel.js"

// How many waits on executions an engine holds, by engine: what the tests of their cleanup read (`pendingWaits`).
const waitCounts = new WeakMap<object, () => number>()

/** How many executions an engine built here keeps a wait for (callers woken when they complete): 0 for another engine. */
export const pendingWaits = (engine: WorkflowEngine.WorkflowEngine["Service"]): number => waitCounts.get(engine)?.() ?? 0

/** What the runners of a shared database (`engineRunners.ts`) do with a runner's engine. */
export interface Hooks {
  /** Runs an execution this runner took (as `register` runs those an earlier process left on SQLite). */
  readonly adopt: (executionId: string) => Effect.Effect<void>
  /** Marks executions this runner took as its own, with their rows as taken, before they are adopted. */
  readonly own: (rows: ReadonlyArray<Taken>) => Effect.Effect<void>
  /** Acts on what another process said (a `Message`). */
  readonly heard: (message: string) => Effect.Effect<void>
  /** Takes the deferreds, interrupts and resumes other processes stored for this runner's executions. */
  readonly requests: Effect.Effect<void>
  /** Drops every run without storing anything: the others took this runner's executions. */
  readonly abandon: Effect.Effect<void>
  /** The workflows whose handlers are registered here. */
  readonly workflows: () => ReadonlyArray<string>
}

/**
 * The engine on the `SqlClient` in context: a SQLite file, one process running the workflows; or, with `sharing`, a
 * database shared by runners (whose loops `engineRunners.ts` drives through the hooks). Its tables are made when it
 * starts.
 */
export const build = (options: Options = {}): Effect.Effect<{ readonly engine: WorkflowEngine.WorkflowEngine["Service"]; readonly hooks: Hooks }, Claim.FileClaimed, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const onStoreFailure = options.onStoreFailure ?? ((error: SqlError.SqlError) => error)
    const scope = yield* Effect.scope
    const sharing = options.sharing
    const { storeFailureIn, stored, written } = Store.make(sql, { onStoreFailure, shared: sharing !== undefined, scope })
    const [executionsT, activitiesT, deferredsT, clocksT, resumesT, runnerT] = [executionsTable, activitiesTable, deferredsTable, clocksTable, resumesTable, runnerTable].map((name) => sql(name))
    yield* stored(Store.createEngineTables(sql, sharing !== undefined))

    // One process runs a file's workflows: the others are clients.
    if (options.clientOnly !== true && sharing === undefined) yield* Claim.claim(sql, { runnerTable: runnerT, written, scope, onStoreFailure })
    // Whether this process runs workflows: on a shared database, those it owns (`owned`).
    const runner = sharing === undefined ? options.clientOnly !== true : sharing.runner !== undefined
    if (runner) {
      // Rows of ended executions (see `sweep`) that a process which ended before its sweep left, and deferreds
      // completed after their execution ended.
      const over = sql`SELECT execution_id FROM ${executionsT} WHERE result IS NOT NULL`
      yield* stored(sql`DELETE FROM ${activitiesT} WHERE execution_id IN (${over})`)
      yield* stored(sql`DELETE FROM ${deferredsT} WHERE execution_id IN (${over})`)
    }

    // The rows of executions this runner took and has not loaded yet (a shared database): their first load reads them.
    const takenRows = new Map<string, Taken>()
    // The executions this process runs on a shared database (their ids: kept while they wait out of memory too).
    const owned = new Set<string>()
    /** Whether an execution is this process's to run. */
    const runsHere = (executionId: string): boolean => sharing === undefined ? runner : owned.has(executionId)
    // On a shared database, what only an execution's owner writes: a runner taken for dead and moved on from (its
    // executions now another's) writes nothing over the new owner's.
    const mine = sharing === undefined ? sql.literal("") : sql`AND owner = ${sharing.runner ?? null}`
    /** The database server's time in milliseconds (PostgreSQL): what processes on several hosts compare. */
    const serverMillis = sql.literal("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint")
    /** `AND` the execution is this runner's, on a shared database (nothing on SQLite). */
    const ownedBy = (executionId: string) =>
      sharing === undefined ? sql.literal("") : sql`AND EXISTS (SELECT 1 FROM ${executionsT} WHERE execution_id = ${executionId} ${mine})`
    /** Tells the other processes, when `sharing`: with the writes of this moment, delivered when they commit. */
    const tell = (message: Message): Effect.Effect<void> =>
      sharing === undefined ? Effect.void : written(sql`SELECT pg_notify(${sharing.channel}, ${message})`)

    const workflows = new Map<string, Registered>()
    // The executions running here, or suspended on a failure (kept, so that only an explicit resume runs them again).
    // One that completes is dropped (its result is in the file); one that suspends waiting (a decision, an answer, a
    // clock, a child) too: memory is not held per waiting run. It is loaded again when what it waits for comes.
    const executions = new Map<string, ExecutionState>()
    // What callers that wait on an execution's result are woken by; kept apart, since the state may be dropped
    // and loaded again while they wait.
    const completions = new Map<string, Deferred.Deferred<void>>()
    // Loads in progress: two callers asking for one stored execution at once get the one state.
    const loading = new Map<string, Deferred.Deferred<ExecutionState | undefined>>()
    const deferredState = WorkflowEngine.makeDeferredState()
    const clocks = yield* FiberMap.make<string>()
    // The clocks this process waits on, by execution: stopped when it completes, not left to fire for a run over.
    const clockNames = new Map<string, Set<string>>()

    const newState = (workflow: Workflow.Any, executionId: string, payload: object, parent: string | undefined): ExecutionState => ({
      workflow,
      payload,
      instance: WorkflowEngine.WorkflowInstance.initial(workflow, executionId),
      interrupted: false,
      interruptedUnsafe: false,
      resumeRequested: undefined,
      fiber: undefined,
      scope: Scope.makeUnsafe(),
      parent,
      stored: undefined,
      suspension: undefined,
      activities: new Map(),
      deferreds: new Map(),
      clocks: false,
      failed: undefined,
      moved: false
    })

    /**
     * An execution an earlier process stored, with its activities and deferreds; `undefined` when none is. A runner
     * that took it has its row already (`takenRows`, for the first load only: a run since may have stored activities):
     * one never run before has no activities to read.
     */
    const loadStored = (executionId: string, workflow: Workflow.Any | undefined): Effect.Effect<ExecutionState | undefined> =>
      Effect.gen(function*() {
        const taken = takenRows.get(executionId)
        takenRows.delete(executionId)
        const row = taken ?? (yield* stored(sql<ExecutionRow>`SELECT workflow, payload, parent, interrupted, suspended, result FROM ${executionsT} WHERE execution_id = ${executionId}`))[0]
        if (row === undefined) return undefined
        const known = workflow ?? workflows.get(row.workflow)?.workflow
        if (known === undefined) return undefined
        const payload = yield* Effect.orDie(Effect.flatMap(parseJson(row.payload), Schema.decodeUnknownEffect(payloadCodec(known))))
        const state = newState(known, executionId, payload, row.parent ?? undefined)
        // 1: interrupted; 2: interrupted unsafely (the interrupt survives a replay that would complete).
        state.interrupted = Number(row.interrupted) >= 1
        state.interruptedUnsafe = Number(row.interrupted) === 2
        if (row.result !== null) {
          state.stored = yield* Effect.orDie(Effect.flatMap(parseJson(row.result), Schema.decodeUnknownEffect(resultCodec(known))))
          return state
        }
        // Never run before (taken for the first time, this its first load): no activities, no clocks.
        const fresh = taken !== undefined && Number(taken.takes) === 1
        // Its clocks, if any, are set again by `register`; their rows go when it completes.
        state.clocks = !fresh
        if (row.suspended !== null) {
          const suspended = yield* Effect.orDie(Effect.flatMap(parseJson(row.suspended), decodeSuspended))
          state.suspension = suspended
          if (suspended.failed === true) state.failed = suspended
        }
        if (!fresh) {
          for (const activity of yield* stored(sql<{ readonly activity: string; readonly exit: string }>`SELECT activity, exit FROM ${activitiesT} WHERE execution_id = ${executionId}`)) {
            state.activities.set(activity.activity, { exit: Exit.succeed(new Workflow.Complete({ exit: yield* exitOf(activity.exit) })) })
          }
        }
        // Read also for one never run: a decision may be stored for it before it runs (the runner marks it its own
        // before this read, so one stored after is told to it).
        for (const deferred of yield* stored(sql<{ readonly name: string; readonly exit: string }>`SELECT name, exit FROM ${deferredsT} WHERE execution_id = ${executionId}`)) {
          state.deferreds.set(deferred.name, yield* exitOf(deferred.exit))
        }
        return state
      })

    /** The state of an execution: in memory, or loaded once from what an earlier process stored. */
    const stateOf = (executionId: string, workflow?: Workflow.Any): Effect.Effect<ExecutionState | undefined> =>
      Effect.suspend(() => {
        const known = executions.get(executionId)
        if (known !== undefined) return Effect.succeed(known)
        // On a shared database, another runner's execution is not loaded here (see `execute` for a call on one).
        if (sharing !== undefined && !owned.has(executionId)) return Effect.succeed(undefined)
        const pending = loading.get(executionId)
        if (pending !== undefined) return Deferred.await(pending)
        const latch = Deferred.makeUnsafe<ExecutionState | undefined>()
        loading.set(executionId, latch)
        return loadStored(executionId, workflow).pipe(
          Effect.map((state) => {
            // One that ended is answered from what was stored and not kept: memory holds the runs that live.
            if (state === undefined || state.stored !== undefined) return state
            // On a shared database, one this runner stopped owning while it loaded (it started over meanwhile) is not
            // kept: it would stand for the execution here while another runner runs it.
            if (sharing !== undefined && !owned.has(executionId)) return undefined
            if (!executions.has(executionId)) executions.set(executionId, state)
            return executions.get(executionId)
          }),
          Effect.onExit((exit) => {
            loading.delete(executionId)
            return Deferred.done(latch, Exit.isSuccess(exit) ? exit : Exit.succeed(undefined))
          })
        )
      })

    const storeResult = (state: ExecutionState, result: Result): Effect.Effect<void> =>
      Effect.gen(function*() {
        // Not stored: the run stays open in the file, and the next process runs it again (not ended, or suspended as
        // failed, for good by a full disk or a file gone for a moment). Its callers here get the failure.
        const failure = storeFailureIn(result)
        if (failure !== undefined) return yield* Effect.die(failure)
        if (result._tag === "Suspended") {
          // What a client's poll answers while it stays so (with why, when the run failed and suspended).
          const encoded = yield* Effect.orDie(encodeSuspended(result))
          yield* written(sql`UPDATE ${executionsT} SET suspended = ${JSON.stringify(encoded)} WHERE execution_id = ${state.instance.executionId} ${mine}`)
          return
        }
        const encoded = yield* Effect.orDie(Schema.encodeUnknownEffect(resultCodec(state.workflow))(result))
        const executionId = state.instance.executionId
        if (sharing === undefined) {
          yield* written(sql`UPDATE ${executionsT} SET result = ${JSON.stringify(encoded)} WHERE execution_id = ${executionId}`)
        } else {
          // Stored by its owner only: a runner that lost the execution to another (it was thought dead) stores nothing.
          // Said (`done`) in the same statement, when stored.
          const kept = yield* stored(sql<{ readonly execution_id: string }>`WITH stored AS (UPDATE ${executionsT} SET result = ${JSON.stringify(encoded)}
            WHERE execution_id = ${executionId} AND owner = ${sharing.runner ?? null} AND result IS NULL RETURNING execution_id)
            SELECT execution_id, pg_notify(${sharing.channel}, ${"done "} || execution_id) FROM stored`)
          owned.delete(executionId)
          if (kept.length === 0) {
            // Another runner has it now: this run's result is not the execution's. Its callers wait for the stored
            // one (`awaitRun`), and nothing of it is swept.
            state.moved = true
            return
          }
        }
        // Over: its activities and deferreds are never asked again (a later call answers the result); their rows go
        // with the next sweep.
        state.activities.clear()
        state.deferreds.clear()
        ended.push(executionId)
        if (ended.length >= sweepEvery) yield* Effect.forkIn(sweep, scope)
        if (state.clocks) yield* written(sql`DELETE FROM ${clocksT} WHERE execution_id = ${state.instance.executionId} ${ownedBy(state.instance.executionId)}`)
        // A timeout that lost its race (a decision came first) would otherwise sleep on until its time, then store a
        // wake-up nobody reads.
        // Kept by execution, not in its state: a run that waited was dropped from memory and loaded again since.
        const names = [...(clockNames.get(state.instance.executionId) ?? [])]
        clockNames.delete(state.instance.executionId)
        yield* Effect.forEach(names, (name) => FiberMap.remove(clocks, `${state.instance.executionId}/${name}`), { discard: true })
      })

    // The executions that ended here since the last sweep. Their activity and deferred rows are deleted in batches:
    // a call on an ended execution answers its stored result, so they are never read again, and a long evaluation
    // would otherwise keep every model answer it made in the store for good.
    const ended: Array<string> = []
    const sweepEvery = 100
    const sweep = Effect.suspend(() => {
      const ids = ended.splice(0)
      if (ids.length === 0) return Effect.void
      // Only those whose result is stored (on a shared database, a run whose result was not its own to store is not
      // among them; this is a guard besides).
      const over = sql`SELECT execution_id FROM ${executionsT} WHERE ${sql.in("execution_id", ids)} AND result IS NOT NULL`
      return Effect.andThen(
        written(sql`DELETE FROM ${activitiesT} WHERE execution_id IN (${over})`),
        written(sql`DELETE FROM ${deferredsT} WHERE execution_id IN (${over})`)
      )
    })

    const resume = (executionId: string, mode: ResumeMode): Effect.Effect<void> =>
      Effect.gen(function*() {
        const state = executions.get(executionId)
        if (state === undefined || state.stored !== undefined) return
        // A run an earlier process left failed wakes only when resumed (as `isUnwakeable` says of one in memory).
        if (state.fiber === undefined && state.failed !== undefined && mode === "automatic") return
        const exit = state.fiber?.pollUnsafe()
        if (exit !== undefined && exit._tag === "Success" && isUnwakeable(exit.value, mode)) {
          return
        } else if (state.fiber !== undefined && exit === undefined) {
          // Queue wakes until the run finishes cleanup; explicit wakes take priority.
          const requested = state.resumeRequested
          state.resumeRequested = mode === "explicit" ? mode : requested ?? mode
          if (requested === undefined) {
            yield* Fiber.await(state.fiber).pipe(
              Effect.flatMap(() => {
                const next = state.resumeRequested ?? mode
                state.resumeRequested = undefined
                return resume(executionId, next)
              }),
              Effect.forkIn(scope)
            )
          }
          return
        }
        const entry = workflows.get(state.workflow._tag)
        if (entry === undefined) return
        // Resumed: no longer failed in the file either, so a process that ends during this run resumes it when the
        // next one starts (as effect/cluster resets the run's reply). Cleared by the run itself, before it can store
        // anything, and with no wait here between the check of `fiber` and its setting.
        const clearFailed = state.failed === undefined
          ? Effect.void
          : stored(sql`UPDATE ${executionsT} SET suspended = NULL WHERE execution_id = ${executionId} ${mine}`)
        state.failed = undefined
        // Like the memory and cluster engines, each run gets a fresh scope, so replays rebuild compensations instead
        // of registering them again.
        const instance = WorkflowEngine.WorkflowInstance.initial(state.workflow, executionId, { scope: Scope.forkUnsafe(state.scope) })
        state.instance = instance
        state.fiber = yield* Effect.andThen(clearFailed, entry.execute(state.payload, executionId)).pipe(
          Effect.onExit((exit) => {
            // Safe interrupts take effect only when the run would suspend; unsafe interrupts must also survive a
            // replay that completes normally.
            if (
              !state.interrupted ||
              (!state.interruptedUnsafe && !instance.suspended && !instance.abandoned &&
                !(Context.get(instance.workflow.annotations, Workflow.SuspendOnFailure) && Exit.isFailure(exit)))
            ) return Effect.void
            instance.interrupted = true
            instance.suspended = false
            return Effect.withFiber((fiber) => Effect.interruptible(Fiber.interrupt(fiber)))
          }),
          Workflow.intoResult,
          Effect.provideService(WorkflowEngine.WorkflowEngine, engine),
          (effect) => deferredState.trackRun(instance, effect),
          Effect.tap((result) => storeResult(state, result)),
          Effect.tap((result) =>
            state.parent === undefined || result._tag !== "Complete"
              ? Effect.void
              : Effect.forkIn(runsHere(state.parent) || sharing === undefined ? wake(state.parent, "automatic") : tell(`child ${state.parent}`), scope)
          ),
          Effect.onExit((exit) => {
            if (Exit.isSuccess(exit) && exit.value._tag === "Suspended") {
              // Waiting: dropped from memory until what it waits for comes (its state is in the file). Not when a
              // wake came during the run (it runs again at once), nor when it suspended on a failure.
              if (state.resumeRequested === undefined && exit.value.failed !== true && executions.get(executionId) === state) {
                executions.delete(executionId)
              }
              return Effect.void
            }
            // The final run's scope closes with the real exit; closing the parent then closes earlier scopes with
            // `Exit.void`, so their superseded compensations are skipped.
            if (!(Exit.isSuccess(exit) && exit.value._tag === "Complete")) return Scope.close(state.scope, Exit.void)
            return Scope.close(state.scope, Exit.void).pipe(
              Effect.andThen(Effect.sync(() => {
                // Stored: a later call or poll reads it from the file. Callers that wait hold this state themselves.
                if (executions.get(executionId) === state) executions.delete(executionId)
                const waiting = completions.get(executionId)
                completions.delete(executionId)
                if (waiting !== undefined) Deferred.doneUnsafe(waiting, Exit.void)
              }))
            )
          }),
          // A run is the engine's, not its caller's: it sees the services its handler was registered with (as
          // effect/cluster's entity does), never a caller's layer that happens to provide the same service.
          Effect.provideContext(entry.context),
          Effect.forkIn(entry.scope)
        )
      })

    /** Wakes an execution, loading it from the file when it waited out of memory. */
    const wake = (executionId: string, mode: ResumeMode): Effect.Effect<void> =>
      Effect.flatMap(stateOf(executionId), (state) => state === undefined ? Effect.void : resume(executionId, mode))

    /** Completes a deferred this process learnt of (stored already) and wakes the run that waits on it. */
    const deferredArrived = (executionId: string, name: string, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const state = executions.get(executionId)
        if (state !== undefined) {
          if (state.stored !== undefined || state.deferreds.has(name)) return Effect.void
          state.deferreds.set(name, exit)
          return Effect.andThen(deferredState.deferredDone(executionId, name), resume(executionId, "automatic"))
        }
        // Waiting out of memory: loaded again and run, with this deferred — also when the load began before it was
        // stored (a runner adopting the execution as it came).
        if (!runsHere(executionId)) return Effect.void
        return Effect.flatMap(stateOf(executionId), (loaded) => {
          if (loaded === undefined || loaded.stored !== undefined) return Effect.void
          if (!loaded.deferreds.has(name)) loaded.deferreds.set(name, exit)
          return resume(executionId, "automatic")
        })
      })

    const fireClock = (workflow: Workflow.Any, executionId: string, name: string, deferred: string, wakeAt: number): Effect.Effect<void> =>
      Effect.andThen(
        Effect.sync(() => {
          const names = clockNames.get(executionId) ?? new Set<string>()
          names.add(name)
          clockNames.set(executionId, names)
        }),
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          if (wakeAt > now) yield* Effect.sleep(Duration.millis(wakeAt - now))
          // A clock's deferred succeeds with nothing (DurableClock's `deferred` is a void DurableDeferred).
          yield* encoded.deferredDone({ workflowName: workflow._tag, executionId, deferredName: deferred, exit: Exit.void })
          yield* written(sql`DELETE FROM ${clocksT} WHERE execution_id = ${executionId} AND name = ${name} ${ownedBy(executionId)}`)
          const names = clockNames.get(executionId)
          names?.delete(name)
          if (names?.size === 0) clockNames.delete(executionId)
        }).pipe(FiberMap.run(clocks, `${executionId}/${name}`, { onlyIfMissing: true }))
      ).pipe(Effect.asVoid)

    /**
     * One execution's part of a loop over many (resuming them, taking a client's requests): a run that cannot be
     * loaded (its stored payload no longer decodes: its workflow's schema changed) is said and left, not the end of
     * the loop for all the others.
     */
    const alone = (executionId: string) => <A>(effect: Effect.Effect<A>): Effect.Effect<void> =>
      effect.pipe(
        Effect.asVoid,
        Effect.catchCause((cause) =>
          // The engine stopping (its scope closed) is no failure of this execution.
          Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning(`valet durable: execution ${executionId} cannot be resumed`, cause)
        )
      )

    /** Whether an execution is run by another process: asked of it through the database. */
    const elsewhere = (executionId: string): boolean => !runner || (sharing !== undefined && !owned.has(executionId) && !executions.has(executionId))

    /** A client's interrupt: marked in the file, where the running process's poll (or the next process) finds it. */
    const requestInterrupt = (executionId: string): Effect.Effect<void> =>
      Effect.andThen(
        stored(sql`UPDATE ${executionsT} SET interrupted = CASE WHEN interrupted >= 1 THEN interrupted ELSE 1 END WHERE execution_id = ${executionId} AND result IS NULL`),
        tell(`wake ${executionId}`)
      )

    /** What a call on an execution run here answers: its result once this run ends (nothing, discarded). */
    const awaitRun = (state: ExecutionState, discard: boolean): Effect.Effect<Result | undefined> =>
      Effect.gen(function*() {
        if (discard) return undefined
        if (state.stored !== undefined) return state.stored
        if (state.moved) return yield* answerStored(state.workflow, state.instance.executionId)
        // Capture together so a wake that swaps in a replay cannot desync them.
        const instance = state.instance
        const exit = yield* Fiber.await(state.fiber!)
        // Moved while it ran: answered as the execution stands (the other runner's result, once stored).
        if (state.moved) return yield* answerStored(state.workflow, state.instance.executionId)
        if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) && (instance.suspended || instance.abandoned)) {
          // A completion preempted the run, or the run moved to another runner (abandoned here): the caller waits
          // and asks again, into the replay or for the other runner's result.
          return new Workflow.Suspended({})
        }
        return yield* Effect.orDie(exit)
      })

    /**
     * What a call on another runner's execution answers (a shared database): its stored result, or `Suspended`, on
     * which `Workflow.execute` waits for `awaitComplete` (woken by the owner's `done`) and asks again. The wait is
     * set before the read, so a `done` that comes between them is not missed: it completes the wait and drops it, and
     * a caller that then finds no wait asks again at once (`awaitComplete`). A `done` always drops the wait, so a
     * process keeps none for executions that are over, whoever gave up on them.
     */
    // The executions a client stored or found stored, asked again until they complete.
    const asked = new Set<string>()
    /** Sets the wait a `done` ends (a fresh one, when an earlier `done` ended the last one). */
    const awaiting = (executionId: string): void => {
      const waiting = completions.get(executionId)
      if (waiting === undefined || Deferred.isDoneUnsafe(waiting)) completions.set(executionId, Deferred.makeUnsafe<void>())
    }
    const answerStored = (workflow: Workflow.Any, executionId: string): Effect.Effect<Result> =>
      Effect.gen(function*() {
        awaiting(executionId)
        const rows = yield* stored(sql<{ readonly result: string | null }>`SELECT result FROM ${executionsT} WHERE execution_id = ${executionId}`)
        const row = rows[0]
        if (row === undefined || row.result === null) return new Workflow.Suspended({})
        // Read before its `done` came: the callers parked on the wait are woken too (they ask again and read it).
        const waiting = completions.get(executionId)
        completions.delete(executionId)
        if (waiting !== undefined) Deferred.doneUnsafe(waiting, Exit.void)
        asked.delete(executionId)
        return yield* Effect.orDie(Effect.flatMap(parseJson(row.result), Schema.decodeUnknownEffect(resultCodec(workflow))))
      }).pipe(
        // A caller that gives up here (its deadline passed during the read) asks nothing more.
        Effect.onInterrupt(() => Effect.sync(() => void asked.delete(executionId)))
      )

    const encoded: WorkflowEngine.Encoded = {
      register: (workflow, execute) =>
        Effect.gen(function*() {
          // Its runs live in a scope of their own under the handler's. When the handler's scope closes (the process
          // stops), the finalizer added after it runs first: the runs still going are marked abandoned, so their
          // interruption runs no compensation — they are not over, and run on (here when it starts again, or on
          // another runner) from what was stored.
          const handlerScope = yield* Effect.scope
          const runs = yield* Scope.fork(handlerScope)
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              for (const state of executions.values()) {
                if (state.workflow._tag === workflow._tag && state.fiber !== undefined && state.fiber.pollUnsafe() === undefined) {
                  state.instance.abandoned = true
                }
              }
            })
          )
          workflows.set(workflow._tag, { workflow, execute, scope: runs, context: yield* Effect.context<never>() })
          // On a shared database a runner takes executions one by one (`adopt`), as `engineRunners.ts` claims them.
          if (!runner || sharing !== undefined) return
          // Its executions an earlier process left without a result run again, and its clocks are set again. Not
          // those that failed and suspended (as on effect/cluster, whose runner does not run them again when it starts:
          // a failed call is sent again when someone resumes the run), unless interrupted or resumed meanwhile.
          const open = yield* stored(sql<{ readonly execution_id: string }>`SELECT execution_id FROM ${executionsT} WHERE workflow = ${workflow._tag} AND result IS NULL
            AND (interrupted >= 1 OR suspended IS NULL OR json_extract(suspended, '$.failed') IS NOT 1 OR execution_id IN (SELECT execution_id FROM ${resumesT}))`)
          const resumed = new Set((yield* stored(sql<{ readonly execution_id: string }>`SELECT execution_id FROM ${resumesT}`)).map((row) => row.execution_id))
          const pendingClocks = yield* stored(sql<{ readonly execution_id: string; readonly name: string; readonly deferred: string; readonly wake_at: number | bigint }>`SELECT execution_id, name, deferred, wake_at FROM ${clocksT} WHERE workflow = ${workflow._tag}`)
          yield* Effect.forEach(open, (row) =>
            Effect.flatMap(stateOf(row.execution_id, workflow), (state) =>
              state === undefined ? Effect.void : Effect.andThen(
                resumed.has(row.execution_id) ? stored(sql`DELETE FROM ${resumesT} WHERE execution_id = ${row.execution_id}`) : Effect.void,
                resume(row.execution_id, "explicit")
              )).pipe(alone(row.execution_id)), { discard: true }).pipe(
            Effect.andThen(Effect.forEach(pendingClocks, (clock) => fireClock(workflow, clock.execution_id, clock.name, clock.deferred, Number(clock.wake_at)), { discard: true })),
            Effect.forkIn(scope)
          )
        }),
      execute: <const Discard extends boolean>(workflow: Workflow.Any, opts: {
        readonly executionId: string
        readonly payload: object
        readonly discard: Discard
        readonly parent?: WorkflowEngine.WorkflowInstance["Service"] | undefined
        readonly detached?: boolean | undefined
      }): Effect.Effect<Discard extends true ? void : Result> =>
        Effect.gen(function*() {
          type Answer = Discard extends true ? void : Result
          const parent = opts.detached === true ? undefined : opts.parent?.executionId
          const encodedPayload = Effect.suspend(() => Effect.orDie(Schema.encodeUnknownEffect(payloadCodec(workflow))(opts.payload)))
          if (sharing !== undefined && !runsHere(opts.executionId) && !executions.has(opts.executionId)) {
            // On a shared database, an execution this process does not run: a runner's new one of a workflow it has
            // a handler for is its own to run; otherwise it is stored for a runner to take (`start`), as a client's.
            // One that exists is answered as it stands.
            if (asked.has(opts.executionId)) {
              // Asked again (after `Suspended`): stored already, only its result is read.
              return (opts.discard ? undefined : yield* answerStored(workflow, opts.executionId)) as Answer
            }
            const here = sharing.runner !== undefined && workflows.has(workflow._tag)
            const payload = JSON.stringify(yield* encodedPayload)
            // Waited on from before it is stored: its `done` cannot come before the wait is set.
            if (!here && !opts.discard) awaiting(opts.executionId)
            // Its time is the server's (the grace before any runner takes it is measured on one clock).
            const insert = sql`INSERT INTO ${executionsT} (execution_id, workflow, payload, parent, owner, created_at, takes)
              VALUES (${opts.executionId}, ${workflow._tag}, ${payload}, ${parent ?? null}, ${here ? sharing.runner! : null}, ${serverMillis}, ${here ? 1 : 0})
              ON CONFLICT DO NOTHING RETURNING execution_id`
            // One for a runner to take is said (`start`) in the same statement, when stored.
            const inserted = yield* stored(here
              ? sql<{ readonly execution_id: string }>`${insert}`
              : sql<{ readonly execution_id: string }>`WITH started AS (${insert}) SELECT execution_id, pg_notify(${sharing.channel}, ${"start "} || execution_id) FROM started`)
            if (!here) {
              // Stored (by this call or an earlier one): answered below as it stands; just stored, it has no result.
              if (!opts.discard) asked.add(opts.executionId)
              if (inserted.length > 0 && !opts.discard) return new Workflow.Suspended({}) as Answer
            } else if (inserted.length > 0 || executions.has(opts.executionId)) {
              if (!executions.has(opts.executionId)) {
                owned.add(opts.executionId)
                executions.set(opts.executionId, newState(workflow, opts.executionId, opts.payload, parent))
                yield* resume(opts.executionId, "explicit")
              }
              return yield* awaitRun(executions.get(opts.executionId)!, opts.discard) as Effect.Effect<Answer>
            }
            if (opts.discard) return undefined as Answer
            return (yield* answerStored(workflow, opts.executionId)) as Answer
          }
          if (options.clientOnly === true) {
            // A client runs nothing: it answers what the file holds, and while the run is open it answers
            // `Suspended`, on which `Workflow.execute` waits and asks again (as a cluster client waits for the reply).
            const rows = yield* stored(sql<{ readonly result: string | null }>`SELECT result FROM ${executionsT} WHERE execution_id = ${opts.executionId}`)
            const row = rows[0]
            if (row === undefined) {
              return yield* Effect.die(
                `${workflow._tag} ${opts.executionId} was never started: a client (clientOnly) runs no workflow; start it in the process that runs this file's workflows`
              )
            }
            if (opts.discard) return undefined as Answer
            if (row.result === null) return new Workflow.Suspended({}) as Answer
            // Answered: no wait of its callers stays behind.
            completions.delete(opts.executionId)
            return (yield* Effect.orDie(Effect.flatMap(parseJson(row.result), Schema.decodeUnknownEffect(resultCodec(workflow))))) as Answer
          }
          const entry = workflows.get(workflow._tag)
          let state = yield* stateOf(opts.executionId, workflow)
          if (state === undefined) {
            if (entry === undefined) return yield* Effect.die(`Workflow ${workflow._tag} is not registered`)
            const payload = yield* encodedPayload
            // Stored before it runs: a process killed from here on runs it again when it starts.
            yield* written(sql`INSERT INTO ${executionsT} (execution_id, workflow, payload, parent) VALUES (${opts.executionId}, ${workflow._tag}, ${JSON.stringify(payload)}, ${parent ?? null}) ON CONFLICT DO NOTHING`)
            state = executions.get(opts.executionId)
            if (state === undefined) {
              state = newState(workflow, opts.executionId, opts.payload, parent)
              executions.set(opts.executionId, state)
              yield* resume(opts.executionId, "explicit")
            }
          } else if (state.stored === undefined && state.fiber === undefined) {
            // Failed and suspended by an earlier process: answered as it is (a call is no resume).
            if (state.failed !== undefined) return (opts.discard ? undefined : state.failed) as Discard extends true ? void : Result
            if (entry === undefined) return yield* Effect.die(`Workflow ${workflow._tag} is not registered`)
            if (state.suspension !== undefined) {
              // It waits (what it waits for wakes it when it comes): answered as it stands, not run again per call.
              if (executions.get(opts.executionId) === state) executions.delete(opts.executionId)
              return (opts.discard ? undefined : state.suspension) as Discard extends true ? void : Result
            }
            yield* resume(opts.executionId, "explicit")
          }
          return (yield* awaitRun(state, opts.discard)) as Answer
        }),
      awaitComplete: (_workflow, executionId) =>
        Effect.suspend(() => {
          let waiting = completions.get(executionId)
          if (waiting === undefined) {
            // Another process's execution (a shared database): its wait was set before the caller read it, so none
            // left means its `done` came since (or another caller read the result): the caller asks again at once.
            if (sharing !== undefined && elsewhere(executionId)) return Effect.void
            // A client of a SQLite file hears of no completion (it sees one only by asking): its caller asks again on
            // its retry schedule, and no wait is kept for it (one kept would never be completed, nor dropped).
            if (sharing === undefined && !runner) return Effect.never
            waiting = Deferred.makeUnsafe<void>()
            completions.set(executionId, waiting)
          }
          const mark = waiting
          // A caller that stops waiting (its retry schedule's sleep won, or it was interrupted) stores it again on its
          // next call (a no-op), so `asked` does not keep executions nobody asks for.
          // (Its entry stays: another caller may wait on the same one. The execution's `done` drops it, or
          // `answerStored` with the result.)
          return Deferred.await(mark).pipe(Effect.onInterrupt(() => Effect.sync(() => void asked.delete(executionId))))
        }),
      interrupt: (workflow, executionId) =>
        Effect.gen(function*() {
          if (elsewhere(executionId)) return yield* requestInterrupt(executionId)
          const state = yield* stateOf(executionId, workflow)
          if (state === undefined || state.stored !== undefined) return
          state.interrupted = true
          yield* written(sql`UPDATE ${executionsT} SET interrupted = CASE WHEN interrupted >= 1 THEN interrupted ELSE 1 END WHERE execution_id = ${executionId}`)
          yield* resume(executionId, "explicit")
        }),
      interruptUnsafe: (workflow, executionId) =>
        Effect.gen(function*() {
          // A client cannot cut another process's run short: the interrupt takes effect there when the run suspends.
          if (elsewhere(executionId)) return yield* requestInterrupt(executionId)
          const state = yield* stateOf(executionId, workflow)
          if (state === undefined || state.stored !== undefined) return
          state.interrupted = true
          state.interruptedUnsafe = true
          yield* written(sql`UPDATE ${executionsT} SET interrupted = 2 WHERE execution_id = ${executionId}`)
          if (state.fiber !== undefined) yield* Fiber.interrupt(state.fiber)
          // Replay after hard interruption to record a terminal workflow result.
          yield* resume(executionId, "explicit")
        }),
      resume: (workflow, executionId) =>
        elsewhere(executionId)
          // Taken by the running process (its poll), or by the next one when it registers the workflow.
          ? Effect.andThen(
            stored(sql`INSERT INTO ${resumesT} (execution_id) SELECT execution_id FROM ${executionsT} WHERE execution_id = ${executionId} AND result IS NULL ON CONFLICT DO NOTHING`),
            tell(`wake ${executionId}`)
          )
          : Effect.flatMap(stateOf(executionId, workflow), () => resume(executionId, "explicit")),
      activityExecute: (activity: Activity.Any, attempt: number) =>
        Effect.gen(function*() {
          const instance = yield* WorkflowEngine.WorkflowInstance
          const state = executions.get(instance.executionId)
          const key = `${activity.name}/${attempt}`
          let activityState = state?.activities.get(key)
          if (activityState !== undefined) {
            const exit = activityState.exit
            if (exit !== undefined && exit._tag === "Success" && exit.value._tag === "Suspended") {
              activityState.exit = undefined
            } else if (exit !== undefined) {
              return yield* exit
            }
          } else {
            activityState = { exit: undefined }
            state?.activities.set(key, activityState)
          }
          // A pending interrupt replays only to rebuild compensations, so it must not run new activities.
          if (state?.interrupted === true && !instance.interrupted) return new Workflow.Suspended({})
          const activityInstance = WorkflowEngine.WorkflowInstance.initial(instance.workflow, instance.executionId)
          activityInstance.interrupted = instance.interrupted
          const slot = activityState
          return yield* activity.executeEncoded.pipe(
            Workflow.intoResult,
            Effect.provideService(WorkflowEngine.WorkflowInstance, activityInstance),
            Effect.onExit((exit) => {
              // A preempted activity must run again on the next replay.
              const kept = Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? undefined : exit
              slot.exit = kept
              if (kept === undefined || kept._tag !== "Success" || kept.value._tag !== "Complete") return Effect.void
              return Effect.flatMap(exitText(kept.value.exit), (text) =>
                written(
                  sharing === undefined
                    ? sql`INSERT INTO ${activitiesT} (execution_id, activity, exit) VALUES (${instance.executionId}, ${key}, ${text}) ON CONFLICT DO NOTHING`
                    // Shared: stored only while the execution is this runner's (one taken for dead and moved on from
                    // must not put its late results in the journal the new owner replays from).
                    : sql`INSERT INTO ${activitiesT} (execution_id, activity, exit) SELECT ${instance.executionId}, ${key}, ${text}
                      WHERE TRUE ${ownedBy(instance.executionId)} ON CONFLICT DO NOTHING`
                ))
            })
          )
        }),
      poll: (workflow, executionId) =>
        Effect.gen(function*() {
          const state = executions.get(executionId)
          if (state?.stored !== undefined) return Option.some(state.stored)
          if (state?.fiber !== undefined) {
            const exit = state.fiber.pollUnsafe()
            if (exit === undefined) return Option.none()
            return exit._tag === "Success" ? Option.some(exit.value) : yield* Effect.die(exit.cause)
          }
          // Not running here (a client beside the process that runs it, or not started yet): as last stored, read
          // each time, since the process that runs it moves on.
          const rows = yield* stored(sql<{ readonly result: string | null; readonly suspended: string | null }>`SELECT result, suspended FROM ${executionsT} WHERE execution_id = ${executionId}`)
          const row = rows[0]
          if (row === undefined) return Option.none()
          if (row.result !== null) return Option.some(yield* Effect.orDie(Effect.flatMap(parseJson(row.result), Schema.decodeUnknownEffect(resultCodec(workflow)))))
          if (row.suspended !== null) return Option.some<Result>(yield* Effect.orDie(Effect.flatMap(parseJson(row.suspended), decodeSuspended)))
          return Option.none()
        }),
      deferredResult: (deferred: DurableDeferred.Any) =>
        Effect.gen(function*() {
          const instance = yield* WorkflowEngine.WorkflowInstance
          return Option.fromNullishOr(executions.get(instance.executionId)?.deferreds.get(deferred.name))
        }),
      deferredDone: (done) =>
        Effect.gen(function*() {
          const state = executions.get(done.executionId)
          if (state?.deferreds.has(done.deferredName) === true) return
          const text = yield* exitText(done.exit)
          // The first completion wins, here and across processes (UNIQUE (execution_id, name)).
          const inserted = yield* stored(sql<{ readonly seq: number | bigint }>`INSERT INTO ${deferredsT} (execution_id, name, exit) VALUES (${done.executionId}, ${done.deferredName}, ${text}) ON CONFLICT DO NOTHING RETURNING seq`)
          // Another process's run: its owner reads it when told.
          if (elsewhere(done.executionId)) return yield* tell(`wake ${done.executionId}`)
          // Another process completed it first (a row this process's poll has not read yet): the run sees that
          // one, as a replay from the file would, not this later one.
          const exit = inserted.length > 0 ? done.exit : yield* Effect.flatMap(
            stored(sql<{ readonly exit: string }>`SELECT exit FROM ${deferredsT} WHERE execution_id = ${done.executionId} AND name = ${done.deferredName}`),
            (rows) => rows[0] === undefined ? Effect.succeed(done.exit) : exitOf(rows[0].exit)
          )
          const wake = deferredArrived(done.executionId, done.deferredName, exit)
          const current = yield* Effect.serviceOption(WorkflowEngine.WorkflowInstance)
          // A workflow finalizer cannot wait for its own run's cleanup: the engine's scope owns that wake.
          if (Option.isSome(current) && current.value.executionId === done.executionId) {
            yield* Effect.forkIn(wake, scope)
          } else {
            yield* wake
          }
        }),
      scheduleClock: (workflow, opts) =>
        Effect.gen(function*() {
          if (!runner) return
          const deferred = opts.clock.deferred.name
          // A replay after the clock fired: its wake-up is stored, nothing to set again.
          if (executions.get(opts.executionId)?.deferreds.has(deferred) === true) return
          const state = executions.get(opts.executionId)
          if (state !== undefined) state.clocks = true
          const now = yield* Clock.currentTimeMillis
          // On a shared database the time is the server's: the runner that takes the execution over, on another
          // host, reads how long is left on the same clock.
          const clockNow = sharing === undefined ? sql`${now}` : serverMillis
          // The first schedule's time stays (a replay does not push the wake-up later).
          yield* written(sql`INSERT INTO ${clocksT} (execution_id, name, workflow, deferred, wake_at)
            SELECT ${opts.executionId}, ${opts.clock.name}, ${workflow._tag}, ${deferred}, ${clockNow} + ${Duration.toMillis(opts.clock.duration)}
            WHERE TRUE ${ownedBy(opts.executionId)} ON CONFLICT DO NOTHING`)
          const rows = yield* stored(sql<{ readonly remaining: number | bigint | string }>`SELECT wake_at - ${clockNow} AS remaining FROM ${clocksT} WHERE execution_id = ${opts.executionId} AND name = ${opts.clock.name}`)
          yield* fireClock(workflow, opts.executionId, opts.clock.name, deferred, now + Number(rows[0]?.remaining ?? 0))
        })
    }
    const engine = WorkflowEngine.makeUnsafe(encoded)
    waitCounts.set(engine, () => completions.size)

    // Deferreds another process completed (a decision or an answer given beside this one), read from the last one
    // seen; interrupts and resumes a client asked for. Looked for when another process says so (SQLite: its commit
    // changed `PRAGMA data_version`; PostgreSQL: a `wake`), and, on a shared database, every runner's tick.
    let lastSeq = Number((yield* stored(sql<{ readonly seq: number | bigint | null }>`SELECT MAX(seq) AS seq FROM ${deferredsT}`))[0]?.seq ?? 0)
    // On a shared database, numbers below the last seen that were missing when it was read, and since when: a deferred
    // is numbered when inserted and seen when committed, so a lower number may commit later. Looked for again for a
    // minute (a number also goes missing for good: an insert that conflicted used one).
    const gaps = new Map<number, number>()
    const requests = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      for (const [seq, since] of gaps) if (now - since > 60_000) gaps.delete(seq)
      const missing = [...gaps.keys()].slice(0, 1000)
      const rows = yield* stored(sql<{ readonly seq: number | bigint; readonly execution_id: string; readonly name: string; readonly exit: string }>`SELECT seq, execution_id, name, exit FROM ${deferredsT}
        WHERE seq > ${lastSeq}${missing.length === 0 ? sql.literal("") : sql` OR ${sql.in("seq", missing)}`} ORDER BY seq`)
      if (sharing !== undefined) {
        const seen = new Set(rows.map((row) => Number(row.seq)))
        for (const seq of missing) if (seen.has(seq)) gaps.delete(seq)
        const highest = rows.reduce((max, row) => Math.max(max, Number(row.seq)), lastSeq)
        for (let seq = lastSeq + 1; seq < highest && gaps.size < 10_000; seq++) if (!seen.has(seq)) gaps.set(seq, now)
      }
      for (const row of rows) {
        lastSeq = Math.max(lastSeq, Number(row.seq))
        if (!runsHere(row.execution_id) || executions.get(row.execution_id)?.deferreds.has(row.name) === true) continue
        yield* Effect.flatMap(exitOf(row.exit), (exit) => deferredArrived(row.execution_id, row.name, exit)).pipe(alone(row.execution_id))
      }
      for (const row of yield* stored(sql<{ readonly execution_id: string }>`SELECT execution_id FROM ${executionsT} WHERE interrupted >= 1 AND result IS NULL ${mine}`)) {
        const known = executions.get(row.execution_id)
        if (known?.interrupted === true) continue
        yield* Effect.gen(function*() {
          const state = known ?? (yield* stateOf(row.execution_id))
          if (state === undefined || state.stored !== undefined) return
          state.interrupted = true
          yield* resume(row.execution_id, "explicit")
        }).pipe(alone(row.execution_id))
      }
      for (const row of yield* stored(sql<{ readonly execution_id: string }>`SELECT execution_id FROM ${resumesT}`)) {
        yield* Effect.gen(function*() {
          // Left for the process that registers its workflow (or owns the execution), when this one does not.
          if ((yield* stateOf(row.execution_id)) === undefined) return
          yield* stored(sql`DELETE FROM ${resumesT} WHERE execution_id = ${row.execution_id}`)
          yield* resume(row.execution_id, "explicit")
        }).pipe(alone(row.execution_id))
      }
    })
    // The ended executions fewer than a batch are swept every 5 seconds.
    if (runner) {
      yield* Effect.andThen(Effect.sleep(Duration.seconds(5)), sweep).pipe(
        Effect.catchCause((cause) => Effect.logWarning("valet durable: sweeping ended runs failed", cause)),
        Effect.forever,
        Effect.forkIn(scope)
      )
    }
    if (runner && sharing === undefined) {
      let version = -1
      const look = Effect.gen(function*() {
        const now = Number((yield* stored(sql.unsafe<{ readonly data_version: number | bigint }>("PRAGMA data_version")))[0]?.data_version ?? 0)
        if (now === version) return
        version = now
        yield* requests
      })
      yield* look.pipe(
        Effect.andThen(Effect.sleep(options.pollInterval ?? Duration.millis(250))),
        Effect.forever,
        Effect.forkIn(scope)
      )
    }

    /** Runs an execution this runner took (a shared database): as `register` runs those an earlier process left. */
    const adopt = (executionId: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        // Dropped meanwhile (the runner started over), or already loaded (woken since it was taken).
        if (!owned.has(executionId) || executions.has(executionId)) return
        asked.delete(executionId)
        const taken = takenRows.get(executionId)
        const fresh = taken !== undefined && Number(taken.takes) === 1
        const state = yield* stateOf(executionId)
        if (!owned.has(executionId)) return
        if (state === undefined || state.stored !== undefined) return void owned.delete(executionId)
        // Never run before (and this load was its first): no clock, no resume to take; it runs.
        if (fresh) return yield* resume(executionId, "explicit")
        // How long each clock has left, on the server's clock (the one that set it may have run on another host).
        const now = yield* Clock.currentTimeMillis
        for (const clock of yield* stored(sql<{ readonly name: string; readonly deferred: string; readonly remaining: number | bigint | string }>`SELECT name, deferred, wake_at - ${serverMillis} AS remaining FROM ${clocksT} WHERE execution_id = ${executionId}`)) {
          yield* fireClock(state.workflow, executionId, clock.name, clock.deferred, now + Number(clock.remaining))
        }
        const resumed = (yield* stored(sql<{ readonly execution_id: string }>`DELETE FROM ${resumesT} WHERE execution_id = ${executionId} RETURNING execution_id`)).length > 0
        // Failed and suspended: kept for an explicit resume, as `register` leaves it.
        if (state.failed !== undefined && !state.interrupted && !resumed) return
        yield* resume(executionId, "explicit")
      }).pipe(alone(executionId))

    /** What another process said (a shared database). */
    const heard = (message: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const space = message.indexOf(" ")
        const kind = message.slice(0, space)
        const executionId = message.slice(space + 1)
        if (kind === "done") {
          const waiting = completions.get(executionId)
          // Completed and dropped: the callers parked on it wake and ask again; one between its read and its wait
          // finds none and asks again at once (`awaitComplete`). Dropped whoever gave up, so that no wait stays for
          // the life of the process.
          completions.delete(executionId)
          if (waiting !== undefined) Deferred.doneUnsafe(waiting, Exit.void)
          return Effect.void
        }
        if (!runsHere(executionId)) return Effect.void
        return kind === "child" ? wake(executionId, "automatic").pipe(alone(executionId)) : requestsFor(executionId)
      })

    /**
     * What another process stored for one execution of this runner (said with `wake`): its deferreds, an interrupt,
     * a resume. Read by the execution, not from the last deferred seen as `requests` does: PostgreSQL numbers a
     * deferred when it is inserted, so one committed after a higher number was read would be passed over.
     */
    const requestsFor = (executionId: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        for (const row of yield* stored(sql<{ readonly name: string; readonly exit: string }>`SELECT name, exit FROM ${deferredsT} WHERE execution_id = ${executionId}`)) {
          if (executions.get(executionId)?.deferreds.has(row.name) === true) continue
          yield* Effect.flatMap(exitOf(row.exit), (exit) => deferredArrived(executionId, row.name, exit))
        }
        const interrupted = yield* stored(sql<{ readonly execution_id: string }>`SELECT execution_id FROM ${executionsT} WHERE execution_id = ${executionId} AND interrupted >= 1 AND result IS NULL`)
        if (interrupted.length > 0 && executions.get(executionId)?.interrupted !== true) {
          const state = yield* stateOf(executionId)
          if (state !== undefined && state.stored === undefined) {
            state.interrupted = true
            yield* resume(executionId, "explicit")
          }
        }
        if ((yield* stored(sql<{ readonly execution_id: string }>`DELETE FROM ${resumesT} WHERE execution_id = ${executionId} RETURNING execution_id`)).length > 0) {
          if ((yield* stateOf(executionId)) !== undefined) yield* resume(executionId, "explicit")
        }
      }).pipe(alone(executionId))

    /**
     * Drops every run of this runner without storing anything (a shared database: the others took its executions,
     * thinking it dead): interrupted as abandoned, so no compensation runs; the new owners replay them.
     */
    const abandon = Effect.gen(function*() {
      const states = [...executions.values()]
      executions.clear()
      owned.clear()
      takenRows.clear()
      clockNames.clear()
      yield* FiberMap.clear(clocks)
      for (const state of states) {
        state.instance.abandoned = true
        if (state.fiber !== undefined) yield* Fiber.interrupt(state.fiber)
      }
    })
    /**
     * Marks executions this runner took as its own at once, before each is adopted (what is said of them counts), with
     * their rows as taken (for their first load).
     */
    const own = (rows: ReadonlyArray<Taken>) =>
      Effect.sync(() => {
        for (const row of rows) {
          owned.add(row.execution_id)
          takenRows.set(row.execution_id, row)
        }
      })
    return { engine, hooks: { adopt, abandon, heard, own, requests, workflows: () => [...workflows.keys()] } }
  })

/** The engine on the `SqlClient` in context (see `build`). */
export const make = (options: Options = {}): Effect.Effect<WorkflowEngine.WorkflowEngine["Service"], Claim.FileClaimed, SqlClient.SqlClient | Scope.Scope> =>
  Effect.map(build(options), (built) => built.engine)

/** The engine as a layer, on the `SqlClient` in context. */
export const layer = (options: Options = {}): Layer.Layer<WorkflowEngine.WorkflowEngine, Claim.FileClaimed, SqlClient.SqlClient> =>
  Layer.effect(WorkflowEngine.WorkflowEngine, make(options))
