/**
 * Durable runs (DESIGN §10): an agent run, an evaluation's problem and an actor-loop step or episode as
 * `effect/workflow` workflows keyed by the run id, the problem, the step or the episode, with every model call, tool
 * call, sandbox command (and, in the actor loop, every state read and write, reward evaluation and trajectory append)
 * an activity keyed by the call's session and
 * index (see `internal/durable/activities.ts`). A workflow that runs again — resumed after a failure, or taken over
 * by another runner after its process died — answers the calls stored by the earlier execution from storage and
 * sends only the rest: at most the calls that were in flight when the process died.
 *
 * - `layer(agents)` registers the agent-run and problem handlers on the runners, `layerActorLoop` the step handler;
 *   `layerSqlite(file)` is a one-process engine, `layerPostgresRunner` / `layerPostgresClient` a cluster of runner
 *   processes over PostgreSQL (`effect/cluster`) with clients that only start work and await it.
 * - `evaluate(dataset, options)` is `Evaluate.run` with each problem a workflow: the same resumable results file,
 *   progress and summary, and the same records as an evaluation in one process. `actorLoop(tasks, options)` is
 *   `ActorLoop.run` with each step a workflow — or, with `maxSteps` / `group`, each episode (a group's rollouts one
 *   workflow each, `ActorLoopEpisode`): what `ActorLoop.run` draws (episode and group ids, a group's seeds without a
 *   task seed, session ids) is derived from the workflow's key, so a resumed episode writes the records of an
 *   uninterrupted one. Under durability a group's first steps are separate requests (vLLM's `n` is not used).
 *
 * Agents cross processes by name: a runner resolves the name a workflow carries to an agent it has (a list, or a
 * function — the CLI encodes an architecture's settings in the name). The tools an architecture adds inside its
 * program (DeepAgent's file tools and `execute`, through `Architecture.addTools`) are activities too. Not durable: the
 * tools of separately defined sub-agents (a Supervisor's workers) run again when their run is taken over.
 *
 * Thread turns: an agent run with `thread` (a `ThreadTurn`) is a turn of that thread on the runner's `Threads` store,
 * keyed by its run id (the **turn key**). Its history page is read once, as an activity (a resumed turn runs on the
 * history it first read); its messages are appended exactly once at the end: the append is an activity and the store
 * also keeps the turn key with the messages, in the same write, so a runner killed between the last model call and
 * the append — or after the append and before its result was stored — leaves a turn that, resumed on another runner,
 * sends no model call again and appends its messages once. The lease is the turn's: a resumed turn takes back its own
 * lease at once, while any other turn of the thread waits for it, as a user expects of one conversation (the answer
 * to the question asked first comes first). A turn gone for longer than its lease (its run suspended after a
 * failure, the cluster down) does not hold the thread forever: after the lease another turn may run, and the resumed
 * one then appends after it, still once. A run that fails suspends (as every agent run) and appends nothing until it
 * is resumed and ends; one that ends early with a result (a spent budget) keeps its note, as in one process.
 *
 * Takeover: the workflows of a runner that dies (killed, its machine gone) resume on the others, usually within
 * about 3 s — its connections close, so PostgreSQL releases its shard locks at once, and the runner that checks the
 * others' health (one of them, every `healthCheckInterval`, 1 s) finds it gone. When the dead runner was that one,
 * nobody notices, and its work waits until its registration expires: `shardLockExpiration` after its last heartbeat.
 * effect/cluster's default is 35 s; valet's runner layer sets 10 s (`defaultShardLockExpiration`), so a dead
 * runner's work resumes within about 12 s in every case (the expiry, then an assignment refresh and a message poll,
 * 1 s each; 8 to 11 s measured, against 31 to 37 s with 35 s). A live runner refreshes every third of it; one whose
 * process stalls longer than `shardLockExpiration` loses its shards to the others, which is why it is not lower.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Durable from "valet/Durable"
 *
 * const solver = Agent.make({ name: "solver", instructions: "Answer briefly." })
 *
 * // The handlers for this process's agents, on a one-process engine whose state is a SQLite file.
 * const engine = Durable.layer([solver]).pipe(
 *   Layer.provideMerge(Durable.layerSqlite("data/durable.sqlite3")),
 *   Layer.provide(ScriptedModel.layer(["4"]))
 * )
 *
 * // A run keyed by its run id: started again with the same id after a crash, it answers the model calls that had
 * // finished from the file and sends only the rest.
 * const result = Durable.AgentRun.execute({ agent: "solver", prompt: "2 + 2?", runId: "run-1" }).pipe(
 *   Effect.provide(engine)
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, type Duration, Effect, Exit, type FileSystem, Layer, Option, Schema, Stream } from "effect"
import { Workflow, type WorkflowEngine } from "effect/workflow"
import { randomUUID } from "node:crypto"
import * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"
import { AgentError, ArchitectureFailed, InvalidAgent, type InvalidOptions } from "../core/AgentError.js"
import { WireDuration } from "../core/internal/decode.js"
import * as Turn from "../core/internal/threads/turn.js"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Budget from "../core/Budget.js"
import * as HumanLoop from "../core/HumanLoop.js"
import * as Opts from "../core/internal/options.js"
import * as Model from "../core/Model.js"
import * as Threads from "../core/Threads.js"
import type * as Tool from "../core/Tool.js"
import * as Sandbox from "../environment/Sandbox.js"
import * as StateStore from "../environment/StateStore.js"
import * as TrajectoryStore from "../environment/TrajectoryStore.js"
import * as ActorLoop from "./ActorLoop.js"
import * as Evaluate from "./Evaluate.js"
import * as Reward from "./Reward.js"
import * as EpisodeInternal from "./internal/episode.js"
import * as Activities from "./internal/durable/activities.js"
import * as Approvals_ from "./internal/durable/approvals.js"
import * as DurableHumanLoop from "./internal/durable/humanLoop.js"
import * as HumanLoopStore_ from "./internal/durable/humanLoopStore.js"
import * as Questions_ from "./internal/durable/questions.js"
import * as Engines from "./internal/durable/engines.js"
import * as Loop from "./internal/evaluate/loop.js"
import * as Solve from "./internal/evaluate/solve.js"

/**
 * A `Model` whose every call is an activity of the workflow in flight (`<session>/<step>`).
 *
 * @since 0.2.0
 * @category activities
 */
export const durableModel = Activities.durableModel
/**
 * Tools whose every call is an activity of the workflow in flight (`<session>/tool/<name>/<call id>`).
 *
 * @since 0.2.0
 * @category activities
 */
export const durableTools = Activities.durableTools
/**
 * A `Sandbox` whose every command is an activity of the workflow in flight (`<session>/sandbox/<n>`).
 *
 * @since 0.2.0
 * @category activities
 */
export const durableSandbox = Activities.durableSandbox
/**
 * A thread store for one durable thread turn, keyed by its turn key (the run id): its reads and its append activities
 * (`<run>/thread/<op>/<n>`), the append carrying the turn key into the store (appended once), the lease taken under
 * the turn key (a resumed turn takes back its own). What `AgentRun` uses for a run with `thread`.
 *
 * @since 0.2.0
 * @category activities
 */
export const durableThreads = Activities.durableThreads

/**
 * The store of a durable engine could not be opened (a PostgreSQL server that does not answer…).
 *
 * @since 0.2.0
 * @category errors
 */
export const DurableStoreError = Engines.DurableStoreError
/**
 * The store of a durable engine could not be opened.
 *
 * @since 0.2.0
 * @category errors
 */
export type DurableStoreError = Engines.DurableStoreError

/**
 * A one-process durable engine whose state is a SQLite file (`effect/cluster`'s single runner). With
 * `{ clientOnly: true }`, an engine for a process beside the one that runs the workflows — one that decides or
 * answers what they wait on (`decide`, `answer`), or lists it: it runs no workflow, and what it sends is stored in
 * the file for the process that does (read within about a second).
 *
 * Commits are `synchronous = NORMAL` (WAL): what a killed process committed is kept, and the disk is synced at
 * checkpoints rather than at each of the two commits per activity. `{ synchronous: "full" }` waits for the disk at
 * every commit, for a store that must also keep its last commits through a power loss (3 to 4 ms more per activity
 * in `bench/durable.ts` on a busy disk: 6.5–6.7 ms against 2.3–3.5 ms).
 *
 * @since 0.2.0
 * @category engines
 */
export const layerSqlite = Engines.layerSqlite
/**
 * How `layerSqlite`'s file commits: `"normal"` (the default) syncs the disk at checkpoints, `"full"` at every commit.
 *
 * @since 0.2.0
 * @category engines
 */
export type SqliteSynchronous = Engines.SqliteSynchronous
/**
 * A runner of a durable cluster over PostgreSQL, serving its share of the workflows on `host:port`.
 *
 * @since 0.2.0
 * @category engines
 */
export const layerPostgresRunner = Engines.layerPostgresRunner
/**
 * A client of a durable cluster over PostgreSQL: starts workflows and awaits them; runners do the work.
 *
 * @since 0.2.0
 * @category engines
 */
export const layerPostgresClient = Engines.layerPostgresClient
/**
 * How a runner is set up.
 *
 * @since 0.2.0
 * @category runners
 */
export type RunnerOptions = Engines.RunnerOptions
/**
 * The server of a PostgreSQL URL, without its credentials (`postgres host:port/database`), for messages.
 *
 * @since 0.2.0
 * @category utils
 */
export const describePostgres: (url: string) => string = Engines.serverOf
/**
 * The default port of a runner.
 *
 * @since 0.2.0
 * @category runners
 */
export const defaultRunnerPort = Engines.defaultRunnerPort
/**
 * How long a runner that stopped keeps its workflows at most before the others take them over, unless
 * `RunnerOptions.shardLockExpiration` says otherwise: 10 s (effect/cluster's own default is 35 s).
 *
 * @since 0.2.0
 * @category runners
 */
export const defaultShardLockExpiration = Engines.defaultShardLockExpiration

// ---------------------------------------------------------------------------------------------------------
// Workflows
// ---------------------------------------------------------------------------------------------------------

/**
 * A thread turn as a durable agent run carries it across processes: `Threads.TurnOptions` without what cannot cross
 * (functions, a working memory). `busyTimeout` and `leaseDuration` are milliseconds or a duration's text
 * (`"30 seconds"`). `onBusy` is `"wait"` by default here, not `"fail"`: a failure suspends a durable run rather than
 * ending it, so a turn that found its thread busy would otherwise wait suspended until someone resumes it.
 *
 * @since 0.2.0
 * @category models
 */
export const ThreadTurn = Schema.Struct({
  id: Threads.ThreadId,
  owner: Schema.optional(Schema.String),
  onBusy: Schema.optional(Schema.Literals(["fail", "wait"])),
  busyTimeout: Schema.optional(WireDuration),
  historyLimit: Schema.optional(Opts.IntAtLeast(1)),
  incomplete: Schema.optional(Schema.Literals(["note", "drop"])),
  leaseDuration: Schema.optional(WireDuration),
  /** Semantic recall with the runner's `EmbeddingModel` (what it found is read once, an activity). */
  recall: Schema.optional(Schema.Struct({
    topK: Schema.optional(Opts.IntAtLeast(1)),
    minScore: Schema.optional(Schema.Number),
    scope: Schema.optional(Schema.Literals(["owner", "thread"])),
    onError: Schema.optional(Schema.Literals(["skip", "fail"]))
  }))
})
/**
 * A thread turn as a durable agent run carries it.
 *
 * @since 0.2.0
 * @category models
 */
export type ThreadTurn = typeof ThreadTurn.Type

/**
 * What a durable agent run fails with: the agent's errors, and a thread turn's (`Threads.ThreadError`).
 *
 * @since 0.2.0
 * @category errors
 */
export const AgentRunError = Schema.Union([AgentError, Threads.ThreadNotFound, Threads.ThreadForbidden, Threads.ThreadBusy, Threads.ThreadStoreError])
/**
 * What a durable agent run fails with.
 *
 * @since 0.2.0
 * @category errors
 */
export type AgentRunError = typeof AgentRunError.Type

/**
 * The workflow of one agent run: payload the agent's name, the prompt (text or parts), the run id (its execution key) and, for a turn
 * of a thread, the `ThreadTurn` (the run id is then the turn's key: its messages are appended once).
 *
 * @since 0.2.0
 * @category workflows
 */
export const AgentRun = Workflow.make("valet/AgentRun", {
  // The prompt is text or parts (an image, a file…), stored with the workflow's payload: checked by Schema on the way in
  // (media types, URL schemes, base64, the part cap), as every entry point checks them.
  payload: {
    agent: Schema.String,
    prompt: Schema.Union([Schema.String, Schema.Array(Model.Part)]),
    runId: Agent.SessionId,
    thread: Schema.optional(ThreadTurn)
  },
  idempotencyKey: (payload) => payload.runId,
  success: AgentEvent.RunResult,
  error: AgentRunError,
  // A failed call suspends the run instead of ending it: `AgentRun.resume(executionId)` runs it again, and only the
  // calls that had not finished are sent.
  annotations: Context.make(Workflow.SuspendOnFailure, true)
})

/**
 * What one problem's run produced (the workflow's result): its output and counts, or why it failed.
 *
 * @since 0.2.0
 * @category models
 */
export const ProblemOutcome = Solve.Outcome
/**
 * What one problem's run produced.
 *
 * @since 0.2.0
 * @category models
 */
export type ProblemOutcome = Solve.Outcome

/**
 * The workflow of one problem of an evaluation, keyed by the evaluation, the problem's id and the attempt (a
 * problem recorded as failed runs again as the next attempt). Never fails: a run that fails for good is a `Failed`
 * outcome with its reason, recorded like any other.
 *
 * @since 0.2.0
 * @category workflows
 */
export const EvaluateProblem = Workflow.make("valet/EvaluateProblem", {
  payload: {
    agent: Schema.String,
    evaluation: Schema.String,
    attempt: Schema.Int,
    problem: Evaluate.Problem,
    shareReference: Schema.Boolean,
    budget: Schema.optional(Budget.Limits)
  },
  idempotencyKey: (payload) => `${payload.evaluation}/${payload.problem.id}/${payload.attempt}`,
  success: Solve.Outcome
})

// ---------------------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------------------

/**
 * The agents a runner can run: a list (found by name) or a function from a name to an agent.
 *
 * @since 0.2.0
 * @category models
 */
export type Agents<R> =
  | ReadonlyArray<Agent.Agent<R>>
  | ((name: string) => Effect.Effect<Option.Option<Agent.Agent<R>>>)

const resolver = <R>(agents: Agents<R>) => (name: string): Effect.Effect<Option.Option<Agent.Agent<R>>> =>
  typeof agents === "function"
    ? agents(name)
    : Effect.succeed(Option.fromNullishOr(agents.find((candidate) => candidate.name === name)))

/**
 * `effect` with the model, the agent's tools and (when there is one) the sandbox made durable: each call an
 * activity of the workflow in flight.
 */
const durably = <R, A, E>(
  agent: Agent.Agent<R>,
  body: (agent: Agent.Agent<R>) => Effect.Effect<A, E, R>,
  run?: { readonly runId: string; readonly agent: string }
): Effect.Effect<A, E, R | Model.Model | Activities.WorkflowContext> =>
  Effect.gen(function*() {
    const model = yield* Activities.durableModel(yield* Model.Model)
    // Calls that need approval and questions wait durably where the engine keeps them (every engine of this module does).
    const store = yield* Effect.serviceOption(HumanLoopStore_.HumanLoopStore)
    const humans = run !== undefined && Option.isSome(store)
      ? yield* DurableHumanLoop.durableHumanLoop(store.value, run.runId, run.agent)
      : undefined
    const tools = yield* Activities.durableTools(agent.tools as ReadonlyArray<Tool.Tool<R>>, humans?.handoffs)
    // The tools an architecture adds inside its program (DeepAgent's file tools and `execute`) become activities the
    // same way, each time it adds them: in its run, and in each of its sub-runs (named by their own sessions).
    const context = yield* Effect.context<Activities.WorkflowContext>()
    const added: Architecture.PrepareTools = (more) => Activities.durableTools(more, humans?.handoffs).pipe(Effect.provideContext(context))
    const sandbox = yield* Effect.serviceOption(Sandbox.Sandbox)
    let effect = body(Agent.clone(agent, { tools }) as Agent.Agent<R>).pipe(
      Effect.provideService(Model.Model, model),
      Effect.provideService(Architecture.AddedTools, added)
    )
    if (Option.isSome(sandbox)) effect = effect.pipe(Effect.provideService(Sandbox.Sandbox, yield* Activities.durableSandbox(sandbox.value)))
    if (humans !== undefined) effect = effect.pipe(Effect.provideService(HumanLoop.HumanLoop, humans.loop))
    return yield* effect
  })

/**
 * A durable thread turn: `Agent.run` on the thread, on the runner's `Threads` made durable for this turn (its reads
 * and its append activities, the append keyed by the run id). A run that did not end with a result (it failed, or
 * its fiber was interrupted) appends nothing: its workflow suspends or moves, runs again, and keeps the turn then.
 */
const threadTurn = <R>(
  agent: Agent.Agent<R>,
  prompt: Agent.Task,
  runId: string,
  turn: ThreadTurn
): Effect.Effect<AgentEvent.RunResult, AgentRunError, R | Activities.WorkflowContext> =>
  Effect.gen(function*() {
    const store = yield* Effect.serviceOption(Threads.Threads)
    if (Option.isNone(store)) {
      return yield* new Threads.ThreadStoreError({
        operation: "turn",
        threadId: turn.id,
        message: `Durable: run ${JSON.stringify(runId)} is a turn of thread ${JSON.stringify(turn.id)}, but this runner has no thread store (provide Threads.layerSql to the runners)`
      })
    }
    const threads = yield* Activities.durableThreads(store.value, runId)
    const keep = turn.incomplete ?? "note"
    const recall: Threads.TurnOptions["recall"] = turn.recall
    return yield* Agent.run(agent, prompt, {
      sessionId: runId,
      thread: {
        id: turn.id,
        owner: turn.owner,
        onBusy: turn.onBusy ?? "wait",
        // Checked by the payload's schema (`WireDuration`): a duration's text that Duration reads.
        busyTimeout: turn.busyTimeout as Duration.Input | undefined,
        historyLimit: turn.historyLimit,
        leaseDuration: turn.leaseDuration as Duration.Input | undefined,
        recall,
        incomplete: (ending) => ending.result === undefined ? [] : Turn.turnMessages(ending.task, [], Exit.succeed(ending.result), keep)
      }
    }).pipe(Effect.provideService(Threads.Threads, threads))
  })

/**
 * Registers the handlers of `AgentRun` and `EvaluateProblem` for these agents, on the `Model` (and, for agents that
 * run commands, the `Sandbox`) in context. Every model call, tool call of the agent's own tools (and of the tools its
 * architecture adds: `Architecture.addTools`) and sandbox command is an activity. An agent run naming an agent the
 * runner does not have fails with `InvalidAgent`, which suspends it like any failure (resume it where the agent is
 * registered); such a problem is recorded failed. (Tools of separately defined sub-agents — a Supervisor's workers —
 * are not wrapped: their calls run again when the run is taken over.) A thread turn (`AgentRun`'s `thread`) runs on
 * the `Threads` store in context, read optionally: on a runner without one it fails with `ThreadStoreError` saying
 * so (and suspends).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = <R = Model.Model>(agents: Agents<R>): Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | R | Model.Model> => {
  const resolve = resolver(agents)
  const runs = AgentRun.toLayer((payload) =>
    Effect.flatMap(resolve(payload.agent), (found) =>
      Option.isNone(found)
        ? Effect.fail(new InvalidAgent({ agent: payload.agent, message: "no agent of this name on this runner" }))
        : durably(found.value, (agent): Effect.Effect<AgentEvent.RunResult, AgentRunError, R | Activities.WorkflowContext> =>
          payload.thread === undefined
            ? Agent.run(agent, payload.prompt, { sessionId: payload.runId })
            : threadTurn(agent, payload.prompt, payload.runId, payload.thread), { runId: payload.runId, agent: payload.agent }))
  ) as unknown as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | R | Model.Model>
  const problems = EvaluateProblem.toLayer((payload) =>
    Effect.flatMap(resolve(payload.agent), (found): Effect.Effect<Solve.Outcome, never, R | Model.Model | Activities.WorkflowContext> =>
      Option.isNone(found)
        ? Effect.succeed({ _tag: "Failed", error: `InvalidAgent: no agent named ${JSON.stringify(payload.agent)} on this runner`, calls: 0, tokens: 0, latencyMs: 0 })
        : durably(found.value, (agent) =>
          Solve.solve(agent, payload.problem, { budget: payload.budget, shareReference: payload.shareReference }).pipe(
            // The budget was checked where the evaluation started; one that cannot be used here fails the problem.
            Effect.catch((error) => Effect.succeed<Solve.Outcome>({ _tag: "Failed", error: `${error._tag}: ${error.message}`, calls: 0, tokens: 0, latencyMs: 0 }))
          )))
  ) as unknown as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | R | Model.Model>
  return Layer.mergeAll(runs, problems)
}

// ---------------------------------------------------------------------------------------------------------
// People in the loop
// ---------------------------------------------------------------------------------------------------------

/**
 * Where a durable engine keeps what its runs wait on — calls waiting for a decision, questions waiting for an
 * answer — beside the engine's own tables (the engine itself cannot list what a run waits on): valet's table
 * `valet_durable_human_loop`. `layerSqlite` and the PostgreSQL layers provide it; with `WorkflowEngine.layerMemory`,
 * provide `layerHumanLoopMemory`.
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const HumanLoopStore = HumanLoopStore_.HumanLoopStore
/**
 * The service's identifier, as a type (what `decide`, `answer`… require).
 *
 * @since 0.2.0
 * @category people in the loop
 */
export type HumanLoopStore = HumanLoopStore_.HumanLoopStore

/**
 * The waits of runs that live in this process only (for `WorkflowEngine.layerMemory`).
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const layerHumanLoopMemory: Layer.Layer<HumanLoopStore> = HumanLoopStore_.layerMemory

/**
 * Options of `decide`.
 *
 * @since 0.2.0
 * @category people in the loop
 */
export interface DecideOptions<R> {
  /** Narrows the call to this session (and its sub-agents') when a run's sessions repeat a call id. */
  readonly sessionId?: string | undefined
  /**
   * The agents the runners run (as `layer` takes them): edited arguments are checked by the tool's schema, found
   * by the run's agent and the tool's name, before the decision is taken. Without them an edit is refused.
   */
  readonly agents?: Agents<R> | undefined
}

/** The execution id of durable run `runId` (`AgentRun`'s idempotency key is the run id alone). */
const executionOf = (runId: string) => AgentRun.executionId({ agent: "", prompt: "", runId })

/**
 * Decides a call of durable run `runId` that waits for a person, from any process on the engine's store (a runner,
 * a client, the CLI): approved (with `arguments` edited, checked by the tool's schema first) or rejected. The run
 * wakes on whichever runner serves it, runs the call (once) or answers the rejection, and goes on; its model calls
 * before the wait are not sent again. `NotWaiting` for a call that never waited, `AlreadyDecided` for one decided
 * (or expired) before — the first decision is the one that counts — and `InvalidDecision` for edited arguments the
 * tool refuses: then nothing changed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Durable } from "valet"
 *
 * // From any process on the runners' store (here a SQLite file): approve call "c1" of run "run-7".
 * const approve = Durable.decide("run-7", "c1", { approved: true }).pipe(
 *   Effect.provide(Durable.layerSqlite("runs.db", { clientOnly: true }))
 * )
 * ```
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const decide = <R = never>(
  runId: string,
  toolCallId: string,
  decision: HumanLoop.Decision,
  options?: DecideOptions<R>
): Effect.Effect<HumanLoop.ApprovalRequest, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const executionId = yield* executionOf(runId)
    const agents = options?.agents
    const resolve = agents === undefined ? undefined : resolver(agents)
    return yield* Approvals_.decide(AgentRun, executionId, runId, toolCallId, decision, {
      sessionId: options?.sessionId,
      checkOf: (agentName, toolName) =>
        resolve === undefined
          ? Effect.succeedNone
          : Effect.map(resolve(agentName), (agent) =>
            Option.flatMap(agent, (found) =>
              // The agent's own tools, then those its architecture adds (DeepAgent's `execute`).
              Option.fromNullishOr(
                (found.tools.find((tool) => tool.name === toolName) ??
                  found.architecture?.addedTools?.find((tool) => tool.name === toolName))?.approval?.check
              )))
    })
  })

/**
 * The calls of durable run `runId` that wait for a decision now, oldest first.
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const pending = (runId: string): Effect.Effect<ReadonlyArray<HumanLoop.ApprovalRequest>, never, HumanLoopStore> =>
  Effect.flatMap(HumanLoopStore_.HumanLoopStore, (store) => Effect.map(store.waiting(runId, "approval"), (rows) => rows.map(Approvals_.requestOf)))

/**
 * The questions of durable run `runId` that wait for an answer now, oldest first (each with its answer's JSON schema).
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const questions = (runId: string): Effect.Effect<ReadonlyArray<HumanLoop.QuestionRequest>, never, HumanLoopStore> =>
  Effect.flatMap(HumanLoopStore_.HumanLoopStore, (store) => Effect.map(store.waiting(runId, "question"), (rows) => rows.map(Questions_.requestOf)))

/**
 * Answers a question of durable run `runId` (`Architecture.ask`, the `ask_human` tool) from any process on the
 * engine's store. The answer is checked here against the question's JSON schema (stored with it): one that does not
 * fit is `InvalidDecision` naming why, and the question still waits. The run wakes wherever it is served and decodes
 * the answer with the question's own schema — asking again if that refuses what the JSON schema let through.
 * `NotWaiting` / `AlreadyDecided` as for `decide`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Durable } from "valet"
 *
 * const answer = Durable.answer("run-7", "q1", { city: "Lyon" }).pipe(
 *   Effect.provide(Durable.layerSqlite("runs.db", { clientOnly: true }))
 * )
 * ```
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const answer = (
  runId: string,
  questionId: string,
  value: unknown,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<HumanLoop.QuestionRequest, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.flatMap(executionOf(runId), (executionId) =>
    Questions_.settle(AgentRun, executionId, runId, questionId, { answer: value }, options?.sessionId))

/**
 * Ends a question of durable run `runId` without an answer: the run gets `Unanswered` with `reason` (the `ask_human`
 * tool's model reads it). `NotWaiting` / `AlreadyDecided` as for `decide`.
 *
 * @since 0.2.0
 * @category people in the loop
 */
export const dismiss = (
  runId: string,
  questionId: string,
  reason: string,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<HumanLoop.QuestionRequest, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.flatMap(executionOf(runId), (executionId) =>
    Questions_.settle(AgentRun, executionId, runId, questionId, { dismissed: reason }, options?.sessionId))

// ---------------------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------------------

/**
 * The options of a durable evaluation: `Evaluate`'s, with the agent given by name (or as the agent, by its name).
 *
 * @since 0.2.0
 * @category options
 */
export interface EvaluateOptions extends Omit<Evaluate.Options<never>, "agent"> {
  /** The agent the runners solve each problem with, registered there under this name. */
  readonly agent: string | { readonly name: string }
  /**
   * The evaluation's key: a problem's workflow is keyed by it, the problem's id and the attempt. Default: the
   * results file's path (else the dataset's) and the agent's name. Two evaluations with one key share their results.
   */
  readonly evaluation?: string | undefined
}

const EvaluateOptionsSchema = Schema.Struct({
  agent: Schema.Unknown,
  evaluation: Schema.optional(Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty key" }))),
  ...Loop.optionFields
})

/**
 * `Evaluate.run` with every problem an `EvaluateProblem` workflow on the engine in context: the runners solve the
 * problems (this process may be only a client), this process writes the results file, reports progress and answers
 * the summary. Killed and started again, it skips the problems recorded, and the workflows of the others answer
 * what their runs had stored; a problem whose record is a failure runs again as a new attempt.
 *
 * @since 0.2.0
 * @category running
 */
export const evaluate = (
  dataset: string,
  options: EvaluateOptions
): Effect.Effect<Evaluate.Report, Evaluate.EvaluateError | InvalidOptions, WorkflowEngine.WorkflowEngine | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const config = yield* Opts.decode("Durable.evaluate", EvaluateOptionsSchema, options)
    const agent = typeof options.agent === "string" ? options.agent : options.agent.name
    const evaluation = config.evaluation ?? `${config.out ?? dataset}#${agent}`
    const parsed = yield* Loop.readDataset(dataset)
    return yield* Loop.evaluate(parsed.problems, parsed.issues, {
      concurrency: config.concurrency,
      out: config.out,
      normalize: config.normalize,
      extract: config.extractAnswer ?? Evaluate.defaultExtractAnswer,
      onStart: config.onStart,
      onResult: config.onResult
    }, (problem, failedBefore) =>
      // A problem recorded as failed N times runs as attempt N: a new workflow, not the stored failure.
      EvaluateProblem.execute({
        agent,
        evaluation,
        attempt: failedBefore,
        problem,
        shareReference: config.shareReference,
        ...(config.budget !== undefined ? { budget: config.budget } : {})
      }))
  }).pipe(Effect.withSpan("valet/Durable.evaluate", { attributes: { dataset } }, { captureStackTrace: false }))

// ---------------------------------------------------------------------------------------------------------
// Actor loop
// ---------------------------------------------------------------------------------------------------------

/**
 * How an actor-loop step ended (the workflow's result): the record it appended, or why it failed.
 *
 * @since 0.2.0
 * @category models
 */
export const StepOutcome = Schema.Union([
  Schema.TaggedStruct("Recorded", { record: TrajectoryStore.TrajectoryRecord }),
  Schema.TaggedStruct("Failed", { error: AgentError })
])
/**
 * How an actor-loop step ended.
 *
 * @since 0.2.0
 * @category models
 */
export type StepOutcome = typeof StepOutcome.Type

const StepOptions = Schema.Struct({
  keepWorkspaces: Schema.optional(Schema.Boolean),
  sandboxTimeoutMs: Schema.optional(Opts.IntAtLeast(1)),
  chat: Schema.optional(Schema.Boolean),
  system: Schema.optional(Schema.String),
  budget: Schema.optional(Budget.Limits)
})

/**
 * The workflow of one actor-loop step: the task at `index` of loop `loop` (its key with the task's id). Its model
 * call, sandbox command, state load and update and trajectory append are activities, so a step taken over after a
 * kill neither sends its stored call again nor appends its record twice. Never fails: a failed step is a `Failed`
 * outcome with its error.
 *
 * @since 0.2.0
 * @category workflows
 */
export const ActorLoopStep = Workflow.make("valet/ActorLoopStep", {
  payload: { loop: Schema.String, index: Schema.Int, task: ActorLoop.Task, options: StepOptions },
  idempotencyKey: (payload) => `${payload.loop}/${payload.index}/${payload.task.taskId}`,
  success: StepOutcome
})

/**
 * How an actor-loop episode ended (the `ActorLoopEpisode` workflow's result): the episode as run, or why it failed
 * (with the ids its lines carry: a failed episode's lines have no `episode_end`).
 *
 * @since 0.2.0
 * @category models
 */
export const EpisodeOutcome = Schema.Union([
  Schema.TaggedStruct("Recorded", {
    episode: Schema.Struct({
      episodeId: Schema.String,
      groupId: Schema.optional(Schema.String),
      seed: Schema.optional(Schema.Int),
      records: Schema.Array(TrajectoryStore.TrajectoryRecord),
      end: Schema.Literals(["done", "reward", "max_steps"]),
      reward: Schema.optional(Reward.Scored)
    })
  }),
  Schema.TaggedStruct("Failed", {
    error: AgentError,
    episodeId: Schema.String,
    groupId: Schema.optional(Schema.String),
    /** The `run` of the payload whose execution failed: a later run of the loop takes the failure as stale. */
    run: Schema.optional(Schema.String)
  })
])
/**
 * How an actor-loop episode ended.
 *
 * @since 0.2.0
 * @category models
 */
export type EpisodeOutcome = typeof EpisodeOutcome.Type

const EpisodeOptions = Schema.Struct({
  ...StepOptions.fields,
  maxSteps: Schema.optional(Opts.IntAtLeast(1)),
  rewardThreshold: Schema.optional(Schema.Finite),
  aggregate: Schema.optional(Schema.Literals(["sum", "mean", "last"]))
})

/** The key of the task at `index` of loop `loop`: its step's workflow, and its episode's or group's. */
const taskKey = (loop: string, index: number, taskId: string): string => `${loop}/${index}/${taskId}`

/** A value's JSON with its objects' keys sorted: the same text for the same settings, whatever order they came in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v)

/**
 * The key of a task's episode or group: the task's key and its settings (`<group>x<maxSteps>` and a digest of the
 * other options). Run again with other settings (`--group 4` after `--group 2`, another `--max-steps`), the episodes
 * are new ones — new ids, new seeds — never the stored ones of other settings mixed into one group.
 */
const episodeKeyOf = (payload: {
  readonly loop: string
  readonly index: number
  readonly task: ActorLoop.Task
  readonly group?: number | undefined
  readonly options: typeof EpisodeOptions.Type
}): string =>
  `${taskKey(payload.loop, payload.index, payload.task.taskId)}/${payload.group ?? 1}x${payload.options.maxSteps ?? 1}-${
    EpisodeInternal.uuidOf(canonical({ group: payload.group ?? null, options: payload.options })).slice(0, 8)
  }`

/**
 * The workflow of one actor-loop episode: the task at `index` of loop `loop` — alone (`group` absent), or rollout
 * `member` of a group of `group` (its key ends with the member). The key holds the settings (`group`, `maxSteps`, a digest
 * of the other options): run again with other settings, the episodes are new ones, not the stored ones of the first. Its steps' model calls, sandbox commands, state reads
 * and writes, reward evaluations and trajectory appends are activities, so an episode taken over after a kill neither
 * sends a stored call again nor appends a record twice, and its records are an uninterrupted run's. Everything an
 * in-process episode draws is derived from the key instead: the episode id, the group id, a group's seeds when the
 * task has none (`base` in the range a drawn one has), each step's session id (`actor-<episode id>-<step>`).
 *
 * - A member's state lives in a store of its own whose operations are activities, and what they answer (stored or
 *   live) is written back: a resumed member's later steps see the state its replayed steps left.
 * - The workspace is kept, under `episode-<episode id>`, while the episode runs, and removed when it ends (recorded
 *   or failed; not when the process stops: a resumed execution finds what its replayed commands left there). A lone
 *   episode with `keepWorkspaces` uses the task's kept workspace, as in process. The workspace is this machine's
 *   files: an episode taken over by a runner on another machine finds a fresh one, seeded with the task's files.
 * - A group's first steps are separate requests (vLLM's `n` is not used): one request serving every member's first
 *   step would be stored by one member's workflow, not the others'.
 *
 * Never fails: a failed episode is a `Failed` outcome with its error. `actorLoop` runs an episode that an earlier run
 * of the loop recorded as failed again, as the next `attempt` (a failure names the `run` that sent it; a failure of an
 * execution resumed from an earlier run's payload names that run, so it too is tried again).
 *
 * @since 0.2.0
 * @category workflows
 */
export const ActorLoopEpisode = Workflow.make("valet/ActorLoopEpisode", {
  payload: {
    loop: Schema.String,
    index: Schema.Int,
    task: ActorLoop.Task,
    group: Schema.optional(Opts.IntAtLeast(1)),
    member: Schema.Int,
    options: EpisodeOptions,
    /**
     * The attempt (from 0): an episode recorded as failed by an earlier run of the loop runs again as the next
     * attempt, a workflow of its own (`#<attempt>` ends its key; its episode id is new, its group and seeds the same).
     */
    attempt: Schema.optional(Schema.Int),
    /** Which run of the loop sent it (not in the key): a failure names it, so a later run knows it as stale. */
    run: Schema.optional(Schema.String)
  },
  idempotencyKey: (payload) =>
    `${episodeKeyOf(payload)}${payload.group === undefined ? "" : `/${payload.member}`}${
      payload.attempt === undefined || payload.attempt === 0 ? "" : `#${payload.attempt}`
    }`,
  success: EpisodeOutcome
})

/** The ids an episode's lines carry, derived from its workflow's payload: the same in every execution. */
const episodeIdsOf = (payload: typeof ActorLoopEpisode.payloadSchema.Type) => {
  const key = episodeKeyOf(payload)
  const attempt = payload.attempt === undefined || payload.attempt === 0 ? "" : `#${payload.attempt}`
  return payload.group === undefined
    ? { groupKey: undefined, episodeId: EpisodeInternal.uuidOf(`episode:${key}${attempt}`) }
    : { groupKey: `group:${key}`, episodeId: EpisodeInternal.uuidOf(`episode:${key}/${payload.member}${attempt}`) }
}

const noSandbox = () => new ArchitectureFailed({ architecture: ActorLoop.name, message: "no sandbox on this runner" })

/** The reward in context, made durable (`Activities.durableReward`), when there is one. */
const withDurableReward = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const reward = yield* Effect.serviceOption(Reward.CurrentReward)
    if (Option.isNone(reward)) return yield* effect
    return yield* Effect.provideService(effect, Reward.CurrentReward, yield* Activities.durableReward(reward.value))
  })

const stepLayer = ActorLoopStep.toLayer(
  (payload) =>
    Effect.gen(function*() {
      const found = yield* Effect.serviceOption(Sandbox.Sandbox)
      if (Option.isNone(found)) {
        // A runner started without a usable sandbox: the step fails with the reason, the runner goes on.
        return { _tag: "Failed", error: noSandbox() } as const
      }
      const model = yield* Activities.durableModel(yield* Model.Model)
      const sandbox = yield* Activities.durableSandbox(found.value)
      const states = yield* Activities.durableStateStore(yield* StateStore.StateStore)
      const trajectories = yield* Activities.durableTrajectoryStore(yield* TrajectoryStore.TrajectoryStore)
      // The session names the step's activities and its record: the same in every execution of the step.
      const sessionId = `actor-${payload.index}-${payload.task.taskId}`
      return yield* ActorLoop.step(payload.task, { ...payload.options, sessionId }).pipe(
        Effect.map((record): StepOutcome => ({ _tag: "Recorded", record })),
        Effect.catch((error) => Effect.succeed<StepOutcome>({ _tag: "Failed", error })),
        withDurableReward,
        Effect.provideService(Model.Model, model),
        Effect.provideService(Sandbox.Sandbox, sandbox),
        Effect.provideService(StateStore.StateStore, states),
        Effect.provideService(TrajectoryStore.TrajectoryStore, trajectories)
      )
    })
)

const episodeLayer = ActorLoopEpisode.toLayer(
  (payload) =>
    Effect.gen(function*() {
      const { episodeId, groupKey } = episodeIdsOf(payload)
      const maxSteps = payload.options.maxSteps ?? 1
      const members = groupKey === undefined
        ? Exit.succeed([EpisodeInternal.loneMember(payload.task.taskId, payload.task.seed)])
        : yield* Effect.exit(EpisodeInternal.derivedMembers(groupKey, payload.task.seed, payload.group ?? 1, maxSteps))
      const groupId = groupKey === undefined ? undefined : EpisodeInternal.uuidOf(groupKey)
      const failed = (error: AgentError): EpisodeOutcome => ({
        _tag: "Failed",
        error,
        episodeId,
        ...(groupId !== undefined ? { groupId } : {}),
        ...(payload.run !== undefined ? { run: payload.run } : {})
      })
      const found = yield* Effect.serviceOption(Sandbox.Sandbox)
      if (Option.isNone(found)) return failed(noSandbox())
      if (Exit.isFailure(members)) {
        // A seed too large for the group (the client checks it first; a runner of an older client may not have).
        const error = Option.getOrUndefined(Exit.findErrorOption(members))
        return failed(error ?? new ArchitectureFailed({ architecture: ActorLoop.name, message: "the group's members could not be made" }))
      }
      const base = members.value[groupKey === undefined ? 0 : payload.member]
      if (base === undefined) {
        return failed(new ArchitectureFailed({ architecture: ActorLoop.name, message: `member ${payload.member} of a group of ${payload.group}` }))
      }
      const { aggregate, maxSteps: _m, rewardThreshold, ...stepOptions } = payload.options
      const lone = groupKey === undefined
      // The task's kept workspace (lone, `keepWorkspaces`) as in process; else one kept under the episode's key until
      // it ends, so that a resumed execution works in what its replayed commands left.
      const workspace = lone && stepOptions.keepWorkspaces === true
        ? { key: payload.task.taskId, keep: true }
        : { key: `episode-${episodeId}`, keep: true, seedOnce: true }
      const member: EpisodeInternal.Member = {
        ...base,
        sessionOf: (step) => `actor-${episodeId}-${step}`,
        workspace,
        ...(base.fresh
          ? { store: yield* Activities.durableMemberStore(yield* StateStore.makeMemory((yield* StateStore.StateStore).caps)) }
          : {})
      }
      const model = yield* Activities.durableModel(yield* Model.Model)
      const sandbox = yield* Activities.durableSandbox(found.value)
      const states = yield* Activities.durableStateStore(yield* StateStore.StateStore)
      const trajectories = yield* Activities.durableTrajectoryStore(yield* TrajectoryStore.TrajectoryStore)
      const removeWorkspace = workspace.key === payload.task.taskId ? Effect.void : Effect.ignore(found.value.discard(workspace.key))
      return yield* ActorLoop.episode(payload.task, {
        ...stepOptions,
        maxSteps,
        ...(rewardThreshold !== undefined ? { rewardThreshold } : {}),
        ...(aggregate !== undefined ? { aggregate } : {})
      }).pipe(
        Effect.map((episode): EpisodeOutcome => ({ _tag: "Recorded", episode })),
        Effect.catch((error) => Effect.succeed(failed(error))),
        // Removed once the episode ended, not when its fiber was stopped: a resumed execution needs it.
        Effect.onExit((exit) => Exit.hasInterrupts(exit) ? Effect.void : removeWorkspace),
        Effect.provideService(EpisodeInternal.Given, Option.some({ member, episodeId })),
        withDurableReward,
        Effect.provideService(Model.Model, model),
        Effect.provideService(Sandbox.Sandbox, sandbox),
        Effect.provideService(StateStore.StateStore, states),
        Effect.provideService(TrajectoryStore.TrajectoryStore, trajectories)
      )
    })
)

/**
 * Registers the `ActorLoopStep` and `ActorLoopEpisode` handlers on the actor loop's services in context (`Model`,
 * `Sandbox`, `StateStore`, `TrajectoryStore`, and a `Reward.CurrentReward` if there is one), each made durable.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerActorLoop: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | ActorLoop.Requirements> = Layer.merge(
  stepLayer,
  episodeLayer
) as unknown as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | ActorLoop.Requirements>

/**
 * Options of a durable actor loop: `ActorLoop.run`'s, and the loop's key.
 *
 * @since 0.2.0
 * @category options
 */
export interface ActorLoopOptions extends ActorLoop.RunOptions {
  /**
   * The loop's key: step `i` of the tasks is the workflow `<loop>/<i>/<task id>` (with `maxSteps` or `group`, its
   * episode, and rollout `m` of its group `<loop>/<i>/<task id>/<m>`). Run the same tasks with the same key again and
   * the steps and episodes already done answer their stored outcome (nothing is sent or appended again); use a new
   * key to run the tasks again.
   */
  readonly loop: string
}

const ActorLoopOptionsSchema = Schema.Struct({
  ...EpisodeOptions.fields,
  concurrency: Schema.optional(Opts.IntAtLeast(1)),
  group: Schema.optional(Opts.IntAtLeast(1)),
  loop: Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty key" }))
})

/**
 * `ActorLoop.run` with every step an `ActorLoopStep` workflow — or, with `maxSteps` or `group`, every episode an
 * `ActorLoopEpisode` workflow (a group's rollouts one each) — on the engine in context: the runners run them,
 * `concurrency` at a time, and the outcomes stream as they finish. The records are `ActorLoop.run`'s but for what
 * it draws (ids, a group's seeds without a task seed, session ids), derived here from the loop's key; a group's first
 * steps are separate requests (see `ActorLoopEpisode`). A task whose seed is too large for its group is a `Failed`
 * outcome (`InvalidOptions`) per episode, no workflow started, as in `ActorLoop.run`.
 *
 * @since 0.2.0
 * @category running
 */
export const actorLoop = <E, R>(
  tasks: Stream.Stream<ActorLoop.Task, E, R>,
  options: ActorLoopOptions
): Stream.Stream<ActorLoop.Outcome, E | InvalidOptions, R | WorkflowEngine.WorkflowEngine> =>
  Stream.unwrap(Effect.map(Opts.decode("Durable.actorLoop", ActorLoopOptionsSchema, options), ({ concurrency, group, loop, ...episodeOptions }) => {
    const { aggregate: _a, maxSteps, rewardThreshold: _r, ...stepOptions } = episodeOptions
    // Neither `maxSteps` nor `group`: one step per task, as `ActorLoop.run` (and this function before episodes) does.
    if (maxSteps === undefined && group === undefined) {
      return Stream.mapEffect(
        Stream.zipWithIndex(tasks),
        ([task, index]) =>
          Effect.map(ActorLoopStep.execute({ loop, index, task, options: stepOptions }), (outcome): ActorLoop.Outcome =>
            outcome._tag === "Recorded" ? { _tag: "Recorded", task, record: outcome.record } : { _tag: "Failed", task, error: outcome.error }),
        { concurrency: concurrency ?? 1, unordered: true }
      )
    }
    // This run of the loop: an episode whose stored failure names another run failed then, and runs again as the next
    // attempt (as `evaluate` runs a problem recorded as failed again); one that fails now is this run's outcome.
    const run = randomUUID()
    const executeFrom = (
      task: ActorLoop.Task,
      index: number,
      member: number,
      attempt: number
    ): Effect.Effect<EpisodeOutcome, never, WorkflowEngine.WorkflowEngine> =>
      Effect.flatMap(
        ActorLoopEpisode.execute({
          loop,
          index,
          task,
          ...(group !== undefined ? { group } : {}),
          member,
          options: episodeOptions,
          ...(attempt > 0 ? { attempt } : {}),
          run
        }),
        (outcome) =>
          outcome._tag === "Failed" && outcome.run !== run ? executeFrom(task, index, member, attempt + 1) : Effect.succeed(outcome)
      )
    const episodeOf = (task: ActorLoop.Task, index: number, member: number): Effect.Effect<ActorLoop.Outcome, never, WorkflowEngine.WorkflowEngine> =>
      Effect.map(
        executeFrom(task, index, member, 0),
        (outcome): ActorLoop.Outcome =>
          outcome._tag === "Recorded"
            ? {
              _tag: "Recorded",
              task,
              record: outcome.episode.records[outcome.episode.records.length - 1]!,
              episode: outcome.episode,
              ...(outcome.episode.reward !== undefined ? { reward: outcome.episode.reward } : {})
            }
            : { _tag: "Failed", task, error: outcome.error, episodeId: outcome.episodeId, ...(outcome.groupId !== undefined ? { groupId: outcome.groupId } : {}) }
      )
    // The seeds of a task's rollouts are checked before any of its workflows starts: a failed outcome per episode the
    // group would have run (outcomes count episodes), as in `ActorLoop.run`.
    const work = ([task, index]: readonly [ActorLoop.Task, number]) =>
      Effect.match(EpisodeInternal.checkSeed(task.seed, group ?? 1, maxSteps ?? 1), {
        onFailure: (error): ReadonlyArray<Effect.Effect<ActorLoop.Outcome, never, WorkflowEngine.WorkflowEngine>> =>
          Array.from({ length: group ?? 1 }, () => Effect.succeed({ _tag: "Failed", task, error })),
        onSuccess: () => Array.from({ length: group ?? 1 }, (_, member) => episodeOf(task, index, member))
      })
    return Stream.zipWithIndex(tasks).pipe(
      Stream.mapEffect(work),
      Stream.flatMap((episodes) => Stream.fromIterable(episodes)),
      Stream.mapEffect((episode) => episode, { concurrency: concurrency ?? 1, unordered: true })
    )
  }))
