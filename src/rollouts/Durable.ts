/**
 * Durable runs (first step of DESIGN §10): an agent run as an `effect/workflow` workflow whose execution id is the
 * run id, and every model call an activity keyed by the call's session and step (`<session>/<step>`, plus a count
 * when a step is called again), and every call of the agent's own tools an activity too. When the workflow runs again — resumed after a failure, or on another process with
 * a persistent engine — the calls whose results were stored are answered from storage and not sent again; only the
 * calls that had not finished are.
 *
 * What is here: the workflow (`AgentRun`), the durable `Model` (`durableModel`), `layer(agents)` registering the
 * handler, and `layerSqlite(file)`, a one-process engine whose state is a SQLite file (tested: a process killed with
 * SIGKILL mid-run and started again sends only the call that was in flight and runs no tool again). Not yet:
 * PostgreSQL and several runners, sandbox commands and separately defined sub-agents' tools as activities, ActorLoop
 * tasks and Evaluate problems as workflows, `--durable`.
 *
 * @since 0.2.0
 */
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { ClusterWorkflowEngine, SingleRunner } from "effect/cluster"
import { Activity, Workflow, type WorkflowEngine } from "effect/workflow"
import * as SqliteClient from "../environment/SqliteClient.js"
import * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"
import { AgentError } from "../core/AgentError.js"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Model from "../core/Model.js"
import * as ModelError from "../core/ModelError.js"
import type * as Tool from "../core/Tool.js"

/** The workflow of one agent run: payload the agent's name, the prompt and the run id (its execution id). */
export const AgentRun = Workflow.make("valet/AgentRun", {
  payload: { agent: Schema.String, prompt: Schema.String, runId: Agent.SessionId },
  idempotencyKey: (payload) => payload.runId,
  success: AgentEvent.RunResult,
  error: AgentError,
  // A failed call suspends the run instead of ending it: `AgentRun.resume(executionId)` runs it again, and only the
  // calls that had not finished are sent.
  annotations: Context.make(Workflow.SuspendOnFailure, true)
})

const ResponseSchema = Model.Response

/**
 * A `Model` whose every call is an activity of the current workflow, named after the call's session and step: a
 * call stored by an earlier execution is answered from storage. Outside a workflow, use the model itself.
 */
export const durableModel = (inner: Model.Service): Effect.Effect<Model.Service, never, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>()
    const seen = new Map<string, number>()
    const keyOf = (call: Model.CallContext | undefined): string => {
      const base = call === undefined ? "call" : `${call.sessionId}/${call.step}`
      const n = (seen.get(base) ?? 0) + 1
      seen.set(base, n)
      return n === 1 ? base : `${base}#${n}`
    }
    const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
      Effect.flatMap(Effect.service(Model.currentCallContext), (call) =>
        Activity.make({
          name: keyOf(call),
          success: ResponseSchema,
          error: ModelError.ModelError,
          // Built only when the activity runs: a replayed call must not reach the model (some services start the
          // call when `generate` is called, not when its effect runs).
          execute: Effect.suspend(() => inner.generate(request))
        }).pipe(Effect.provideContext(context))) as Effect.Effect<Model.Response, ModelError.ModelError>
    return Model.make({
      generate,
      // A durable call is stored whole: a streamed request is generated, then played back as chunks.
      stream: (request) => Stream.unwrap(Effect.map(generate(request), (response) => Stream.fromIterable(Model.toChunks(response))))
    })
  })

const OutcomeSchema = Schema.Struct({ content: Schema.String, isError: Schema.Boolean })

/**
 * The agent's tools with every call an activity of the current workflow, named after the run's session, the tool
 * and its count there (`<session>/tool/<name>/<n>`): a call stored by an earlier execution is not run again.
 * Calls are counted in the order they start, which a replayed model answer makes the same.
 */
export const durableTools = <R>(
  tools: ReadonlyArray<Tool.Tool<R>>
): Effect.Effect<ReadonlyArray<Tool.Tool<R>>, never, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine> =>
  Effect.map(Effect.context<WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>(), (context) => {
    const seen = new Map<string, number>()
    return tools.map((tool): Tool.Tool<R> => ({
      ...tool,
      call: (argumentsText) =>
        Effect.flatMap(Effect.service(Architecture.CurrentRun), (run) => {
          const base = `${run.sessionId}/tool/${tool.name}`
          const n = (seen.get(base) ?? 0) + 1
          seen.set(base, n)
          return Activity.make({
            name: `${base}/${n}`,
            success: OutcomeSchema,
            execute: Effect.suspend(() => tool.call(argumentsText))
          }).pipe(Effect.provideContext(context))
          // The run's context is where tools are called; a tool's own requirements are the caller's, as before.
        }) as unknown as Effect.Effect<Tool.Outcome, never, R>
    }))
  })

/**
 * Registers the `AgentRun` handler for these agents, on the `Model` and `WorkflowEngine` in context: the agent's
 * model calls and its own tools' calls are activities. (Tools of separately defined sub-agents — a Supervisor's
 * workers — are not wrapped yet.)
 */
export const layer = (agents: ReadonlyArray<Agent.Agent<Model.Model>>) =>
  AgentRun.toLayer((payload) =>
    Effect.gen(function*() {
      const agent = agents.find((candidate) => candidate.name === payload.agent)
      if (agent === undefined) return yield* Effect.die(new Error(`Durable: no agent named ${JSON.stringify(payload.agent)}`))
      const model = yield* durableModel(yield* Model.Model)
      const tools = yield* durableTools(agent.tools as ReadonlyArray<Tool.Tool>)
      return yield* Agent.run(Agent.with_(agent, { tools }), payload.prompt, { sessionId: payload.runId }).pipe(
        Effect.provideService(Model.Model, model)
      )
    })
  ) as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | Model.Model>

/**
 * A durable `WorkflowEngine` in one process, its state in a SQLite file (valet's `SqliteClient` on `node:sqlite`):
 * `effect/cluster`'s single runner and workflow engine. A run stored there survives the process.
 */
export const layerSqlite = (filename: string) =>
  ClusterWorkflowEngine.layer.pipe(
    // One process: shard locks need not outlive it (with "sql", a restarted process waits for the old locks to expire).
    Layer.provideMerge(SingleRunner.layer({ runnerStorage: "memory" })),
    Layer.provide(SqliteClient.layer({ filename })),
    Layer.provide(NodeCrypto.layerDigest)
  )

