/**
 * What the handlers of `Durable.AgentRun` and `Durable.EvaluateProblem` run: the agent a workflow names, found on
 * this runner, with its model, tools and sandbox made durable (each call an activity), and a thread turn on the
 * runner's `Threads` made durable for the turn. `Durable` re-exports the public names (`ThreadTurn`,
 * `AgentRunError`, `Agents`) with their documentation and registers the handlers.
 */
import { type Duration, Effect, Exit, Option, Schema } from "effect"
import * as Agent from "../../../core/Agent.js"
import { AgentError } from "../../../core/AgentError.js"
import type * as AgentEvent from "../../../core/AgentEvent.js"
import * as Architecture from "../../../core/Architecture.js"
import * as HumanLoop from "../../../core/HumanLoop.js"
import { WireDuration } from "../../../core/internal/decode.js"
import * as Opts from "../../../core/internal/options.js"
import * as Turn from "../../../core/internal/threads/turn.js"
import * as Model from "../../../core/Model.js"
import * as Threads from "../../../core/Threads.js"
import type * as Tool from "../../../core/Tool.js"
import * as Sandbox from "../../../environment/Sandbox.js"
import * as Activities from "./activities.js"
import * as DurableHumanLoop from "./humanLoop.js"
import * as HumanLoopStore_ from "./humanLoopStore.js"

/** A thread turn as a durable agent run carries it across processes (`Durable.ThreadTurn`, documented there). */
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
/** A thread turn as a durable agent run carries it. */
export type ThreadTurn = typeof ThreadTurn.Type

/** What a durable agent run fails with (`Durable.AgentRunError`). */
export const AgentRunError = Schema.Union([AgentError, Threads.ThreadNotFound, Threads.ThreadForbidden, Threads.ThreadBusy, Threads.ThreadStoreError])
/** What a durable agent run fails with. */
export type AgentRunError = typeof AgentRunError.Type

/** The agents a runner can run (`Durable.Agents`): a list (found by name) or a function from a name to an agent. */
export type Agents<R> =
  | ReadonlyArray<Agent.Agent<R>>
  | ((name: string) => Effect.Effect<Option.Option<Agent.Agent<R>>>)

/** Finds an agent by name among `agents`. */
export const resolver = <R>(agents: Agents<R>) => (name: string): Effect.Effect<Option.Option<Agent.Agent<R>>> =>
  typeof agents === "function"
    ? agents(name)
    : Effect.succeed(Option.fromNullishOr(agents.find((candidate) => candidate.name === name)))

/**
 * `effect` with the model, the agent's tools and (when there is one) the sandbox made durable: each call an
 * activity of the workflow in flight.
 */
export const durably = <R, A, E>(
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
export const threadTurn = <R>(
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
