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
 *   processes over PostgreSQL with clients that only start work and await it (both on valet's engine,
 *   `internal/durable/engine.ts`, built on `effect/workflow`'s `WorkflowEngine.makeUnsafe`).
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
 * Takeover: each workflow run has one owner among the runners. The workflows of a runner that dies (killed, its
 * machine gone) resume on the others within about a heartbeat (`RunnerOptions.heartbeat`, 1 s): its database
 * session ends with its process, and the next runner to beat finds it gone, frees its runs, and the live runners
 * take them in even shares. A runner that stops beating while its session lives (a frozen process, a cut network)
 * is dead after `RunnerOptions.expiration` (10 s); if it wakes, it finds its runs moved and drops them without
 * storing anything.
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
import { Context, Effect, type FileSystem, Layer, Option, Schema, Stream } from "effect"
import { Workflow, type WorkflowEngine } from "effect/workflow"
import * as Agent from "../core/Agent.js"
import { InvalidAgent, type InvalidOptions } from "../core/AgentError.js"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Budget from "../core/Budget.js"
import * as HumanLoop from "../core/HumanLoop.js"
import * as Opts from "../core/internal/options.js"
import * as Model from "../core/Model.js"
import * as ActorLoop from "./ActorLoop.js"
import * as Evaluate from "./Evaluate.js"
import * as Activities from "./internal/durable/activities.js"
import * as DurableActorLoop from "./internal/durable/actorLoop.js"
import * as Approvals_ from "./internal/durable/approvals.js"
import * as HumanLoopStore_ from "./internal/durable/humanLoopStore.js"
import * as Questions_ from "./internal/durable/questions.js"
import * as Engines from "./internal/durable/engines.js"
import * as Runs from "./internal/durable/runs.js"
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
 * A one-process durable engine whose state is a SQLite file: effect/workflow's engine logic with what a run must not
 * lose written through to the file — an execution when it starts and its result when it ends, one row per activity
 * result, the deferreds completed (decisions, answers, clocks' wake-ups) and clocks not yet fired. When the process
 * starts again, a workflow's executions without a result run again as soon as its handler is registered, their
 * ended activities answered from the file (those suspended on failure wait for `resume`, as on effect/cluster). A file
 * an earlier valet wrote on effect/cluster's engine is refused with a `DurableStoreError`. With `{ clientOnly: true }`,
 * an engine for a process beside the one that runs the workflows — one that decides or answers what they wait on
 * (`decide`, `answer`), lists it, interrupts or resumes a run: it runs no workflow, and what it sends is stored in the
 * file for the process that does (found within a quarter of a second). One process runs a file's workflows: it
 * claims the file, and a second one is refused with a `DurableStoreError` naming the first (a killed process's claim
 * is taken over at once).
 *
 * Commits are `synchronous = NORMAL` (WAL): what a killed process committed is kept, and the disk is synced at
 * checkpoints rather than at each commit. `{ synchronous: "full" }` waits for the disk at every commit, for a store
 * that must also keep its last commits through a power loss.
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
 * A runner of a durable cluster over PostgreSQL: runs its share of the workflows and takes over a dead runner's. It
 * listens on no port: runners and clients meet in the database.
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
export const ThreadTurn = Runs.ThreadTurn
/**
 * A thread turn as a durable agent run carries it.
 *
 * @since 0.2.0
 * @category models
 */
export type ThreadTurn = Runs.ThreadTurn

/**
 * What a durable agent run fails with: the agent's errors, and a thread turn's (`Threads.ThreadError`).
 *
 * @since 0.2.0
 * @category errors
 */
export const AgentRunError = Runs.AgentRunError
/**
 * What a durable agent run fails with.
 *
 * @since 0.2.0
 * @category errors
 */
export type AgentRunError = Runs.AgentRunError

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
export type Agents<R> = Runs.Agents<R>

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
  const resolve = Runs.resolver(agents)
  const runs = AgentRun.toLayer((payload) =>
    Effect.flatMap(resolve(payload.agent), (found) =>
      Option.isNone(found)
        ? Effect.fail(new InvalidAgent({ agent: payload.agent, message: "no agent of this name on this runner" }))
        : Runs.durably(found.value, (agent): Effect.Effect<AgentEvent.RunResult, AgentRunError, R | Activities.WorkflowContext> =>
          payload.thread === undefined
            ? Agent.run(agent, payload.prompt, { sessionId: payload.runId })
            : Runs.threadTurn(agent, payload.prompt, payload.runId, payload.thread), { runId: payload.runId, agent: payload.agent }))
  ) as unknown as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | R | Model.Model>
  const problems = EvaluateProblem.toLayer((payload) =>
    Effect.flatMap(resolve(payload.agent), (found): Effect.Effect<Solve.Outcome, never, R | Model.Model | Activities.WorkflowContext> =>
      Option.isNone(found)
        ? Effect.succeed({ _tag: "Failed", error: `InvalidAgent: no agent named ${JSON.stringify(payload.agent)} on this runner`, calls: 0, tokens: 0, latencyMs: 0 })
        : Runs.durably(found.value, (agent) =>
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
    const resolve = agents === undefined ? undefined : Runs.resolver(agents)
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
// Actor loop (the workflows and their handlers: `internal/durable/actorLoop.ts`)
// ---------------------------------------------------------------------------------------------------------

/**
 * How an actor-loop step ended (the workflow's result): the record it appended, or why it failed.
 *
 * @since 0.2.0
 * @category models
 */
export const StepOutcome = DurableActorLoop.StepOutcome
/**
 * How an actor-loop step ended.
 *
 * @since 0.2.0
 * @category models
 */
export type StepOutcome = DurableActorLoop.StepOutcome

/**
 * The workflow of one actor-loop step: the task at `index` of loop `loop` (its key with the task's id). Its model
 * call, sandbox command, state load and update and trajectory append are activities, so a step taken over after a
 * kill neither sends its stored call again nor appends its record twice. Never fails: a failed step is a `Failed`
 * outcome with its error.
 *
 * @since 0.2.0
 * @category workflows
 */
export const ActorLoopStep = DurableActorLoop.ActorLoopStep

/**
 * How an actor-loop episode ended (the `ActorLoopEpisode` workflow's result): the episode as run, or why it failed
 * (with the ids its lines carry: a failed episode's lines have no `episode_end`).
 *
 * @since 0.2.0
 * @category models
 */
export const EpisodeOutcome = DurableActorLoop.EpisodeOutcome
/**
 * How an actor-loop episode ended.
 *
 * @since 0.2.0
 * @category models
 */
export type EpisodeOutcome = DurableActorLoop.EpisodeOutcome

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
export const ActorLoopEpisode = DurableActorLoop.ActorLoopEpisode

/**
 * Registers the `ActorLoopStep` and `ActorLoopEpisode` handlers on the actor loop's services in context (`Model`,
 * `Sandbox`, `StateStore`, `TrajectoryStore`, and a `Reward.CurrentReward` if there is one), each made durable.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerActorLoop: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | ActorLoop.Requirements> =
  DurableActorLoop.layerActorLoop

/**
 * Options of a durable actor loop: `ActorLoop.run`'s but `sliceMs` (the workflow engine runs the episodes, not a
 * paced scheduler of the loop's), and the loop's key.
 *
 * @since 0.2.0
 * @category options
 */
export interface ActorLoopOptions extends Omit<ActorLoop.RunOptions, "sliceMs"> {
  /**
   * The loop's key: step `i` of the tasks is the workflow `<loop>/<i>/<task id>` (with `maxSteps` or `group`, its
   * episode, and rollout `m` of its group `<loop>/<i>/<task id>/<m>`). Run the same tasks with the same key again and
   * the steps and episodes already done answer their stored outcome (nothing is sent or appended again); use a new
   * key to run the tasks again.
   */
  readonly loop: string
}

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
export const actorLoop: <E, R>(
  tasks: Stream.Stream<ActorLoop.Task, E, R>,
  options: ActorLoopOptions
) => Stream.Stream<ActorLoop.Outcome, E | InvalidOptions, R | WorkflowEngine.WorkflowEngine> = DurableActorLoop.actorLoop
