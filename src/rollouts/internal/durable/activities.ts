/**
 * The services of a durable run, each call an `effect/workflow` activity of the workflow in flight: the model, the
 * agent's tools, the sandbox and the actor loop's stores. An activity is named after where the call happens — the
 * run's session, then the model call's step, or the tool / the kind of call and its count in that session — so an
 * execution that runs again finds the calls an earlier one stored, answers them from storage, and sends or runs only
 * the rest. Counts are kept per execution, in the order calls start, which replayed answers make the same.
 *
 * Every activity's effect is built only when the activity runs: a replayed call must not reach the service (some
 * services start the call when it is made, not when its effect runs — `ScriptedModel` consumes a turn).
 *
 * A thread turn's store (`durableThreads`) is the one service whose writes are not only activities: its append is
 * also keyed in the store itself, because an activity alone runs again when its process dies after the write and
 * before the activity's result is stored.
 */
import { type Context, Effect, Option, Schema, Stream } from "effect"
import { Activity, type WorkflowEngine } from "effect/workflow"
import * as Architecture from "../../../core/Architecture.js"
import * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import type * as Tool from "../../../core/Tool.js"
import * as Question from "../../../core/internal/question.js"
import * as ToolCalls from "../../../core/internal/toolCalls.js"
import * as Threads from "../../../core/Threads.js"
import * as Sandbox from "../../../environment/Sandbox.js"
import * as StateStore from "../../../environment/StateStore.js"
import * as TrajectoryStore from "../../../environment/TrajectoryStore.js"
import * as Reward from "../reward/core.js"

/** What a workflow's activities need: the instance in flight and its engine. */
export type WorkflowContext = WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine

/** Names calls by a base and their count under it: `base`, then `base#2`, `base#3`… */
const counter = () => {
  const seen = new Map<string, number>()
  return (base: string): number => {
    const n = (seen.get(base) ?? 0) + 1
    seen.set(base, n)
    return n
  }
}

/** The session of the run in flight, or `fallback` outside one. */
const sessionOf = (fallback: string): Effect.Effect<string> =>
  Effect.map(Effect.serviceOption(Architecture.CurrentRun), (run) => Option.isSome(run) ? run.value.sessionId : fallback)

/**
 * Makes the activities of one kind of call, numbered per session: `<session>/<kind>/<n>` (the session of the run in
 * flight, or `fallbackSession` outside one). Each call's effect is built only when its activity runs.
 */
const numberedActivities = (context: Context.Context<WorkflowContext>, fallbackSession: string) => {
  const count = counter()
  return <Success extends Schema.Constraint, Error extends Schema.Constraint = Schema.Never>(
    kind: string,
    options: {
      readonly success: Success
      readonly error?: Error | undefined
      readonly execute: () => Effect.Effect<Success["Type"], Error["Type"]>
      /** `"repeats"`: `kind` names the call already; a count (`#n`) only from its second time on. */
      readonly counted?: "repeats" | undefined
      /** Told the session when the activity has ended, however it ended. */
      readonly onEnd?: ((session: string) => void) | undefined
    }
  ): Effect.Effect<Success["Type"], Error["Type"]> =>
    Effect.flatMap(sessionOf(fallbackSession), (session) => {
      const base = `${session}/${kind}`
      const n = count(base)
      const activity = Activity.make({
        name: options.counted === "repeats" ? (n === 1 ? base : `${base}#${n}`) : `${base}/${n}`,
        success: options.success,
        ...(options.error !== undefined ? { error: options.error } : {}),
        execute: Effect.suspend(options.execute)
      }).pipe(Effect.provideContext(context))
      const onEnd = options.onEnd
      // Told at the end, not the start: from decision to result, the call holds off a suspension of the run.
      return onEnd === undefined ? activity : Effect.ensuring(activity, Effect.sync(() => onEnd(session)))
    }) as Effect.Effect<Success["Type"], Error["Type"]>
}

/**
 * A `Model` whose every call is an activity named `<session>/<step>` (`#n` when a step is called again). A streamed
 * request is generated and played back as chunks: a durable call is stored whole.
 */
export const durableModel = (inner: Model.Service): Effect.Effect<Model.Service, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const count = counter()
    const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
      Effect.flatMap(Effect.service(Model.currentCallContext), (call) => {
        const base = call === undefined ? "call" : `${call.sessionId}/${call.step}`
        const n = count(base)
        return Activity.make({
          name: n === 1 ? base : `${base}#${n}`,
          success: Model.Response,
          error: ModelError.ModelError,
          execute: Effect.suspend(() => inner.generate(request))
        }).pipe(Effect.provideContext(context))
      }) as Effect.Effect<Model.Response, ModelError.ModelError>
    return Model.make({
      ...(inner.contextWindow !== undefined ? { contextWindow: inner.contextWindow } : {}),
      generate,
      stream: (request) => Stream.unwrap(Effect.map(generate(request), (response) => Stream.fromIterable(Model.toChunks(response))))
    })
  })

// `parts`: a tool's images are part of its stored result, so a resumed run's model sees them again.
const OutcomeSchema = Schema.Struct({ content: Schema.String, isError: Schema.Boolean, parts: Schema.optional(Schema.Array(Model.Part)) })

/**
 * The tools with every call an activity named by the model's call id, `<session>/tool/<name>/<call id>` (`#n` when a
 * session repeats an id, counted in the order such calls start: ids repeat only across steps, one after another), or
 * `<session>/tool/<name>/<n>` when the tool is called directly (no id). Not by a count of all calls: when calls of a
 * turn wait for decisions, the order they start in differs between executions, and a count would answer one call
 * with another's stored result (and run that other one again under the next number).
 */
export const durableTools = <R>(
  tools: ReadonlyArray<Tool.Tool<R>>,
  handoffs?: { readonly tools: Set<string>; readonly started: (sessionId: string, toolCallId: string) => void }
): Effect.Effect<ReadonlyArray<Tool.Tool<R>>, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const activity = numberedActivities(context, "tools")
    for (const tool of tools) handoffs?.tools.add(tool.name)
    return tools.map((tool): Tool.Tool<R> => {
      // A question's own wait is durable; as an activity it could not suspend the run.
      if (Question.asksPeople.has(tool.call)) return tool
      // A tool's own requirements are the caller's, as without durability.
      const call = (argumentsText: string) =>
        activity(`tool/${tool.name}`, {
          success: OutcomeSchema,
          execute: () => tool.call(argumentsText) as Effect.Effect<Tool.Outcome>
        }) as Effect.Effect<Tool.Outcome, never, R>
      ToolCalls.withCallId.set(call as (argumentsText: string) => Effect.Effect<Tool.Outcome>, (toolCallId, argumentsText) =>
        // The id escaped: a model's id holding `#` or `/` cannot name another call's activity (`c1#2`).
        activity(`tool/${tool.name}/${encodeURIComponent(toolCallId)}`, {
          success: OutcomeSchema,
          execute: () => tool.call(argumentsText) as Effect.Effect<Tool.Outcome>,
          counted: "repeats",
          onEnd: handoffs === undefined ? undefined : (session) => handoffs.started(session, toolCallId)
        }))
      return { ...tool, call }
    })
  })

/**
 * A `Sandbox` whose commands are activities named `<session>/sandbox/<n>`: a command whose result was stored is not
 * run again. Workspaces are made as usual (they are this process's files); a replayed command leaves its workspace
 * as it was made, which only matters to a later command of the same run that reads its files — and that command,
 * stored too, is not run either.
 */
export const durableSandbox = (inner: Sandbox.Service): Effect.Effect<Sandbox.Service, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const activity = numberedActivities(context, "sandbox")
    return {
      ...inner,
      run: (workspace, request) =>
        activity("sandbox", {
          success: Sandbox.SandboxResult,
          error: Sandbox.SandboxError,
          execute: () => inner.run(workspace, request)
        })
    }
  })

/**
 * A `StateStore` whose reads and writes are activities (`<session>/state/<op>/<n>`): a replayed step sees the state
 * it saw, not the one it wrote before the process died, and writes it once.
 */
export const durableStateStore = (inner: StateStore.Service): Effect.Effect<StateStore.Service, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const numbered = numberedActivities(context, "state")
    const activity = <A>(op: string, success: Schema.Codec<A, unknown>, execute: () => Effect.Effect<A, StateStore.StateStoreError>) =>
      numbered(`state/${op}`, { success, error: StateStore.StateStoreError, execute })
    return {
      caps: inner.caps,
      load: (taskId) => activity("load", StateStore.State, () => inner.load(taskId)),
      save: (taskId, state) => activity("save", Schema.Void, () => inner.save(taskId, state)),
      modify: (taskId, f) => activity("modify", StateStore.State, () => inner.modify(taskId, f)),
      update: (taskId, update) => activity("update", StateStore.State, () => inner.update(taskId, update))
    }
  })

/**
 * A group member's state store over `memory` (its own, empty when the execution starts): its operations are
 * activities as in `durableStateStore`, and what each answers — stored or live — is written back into `memory`.
 * An execution that replays the member's earlier steps so ends them with the state they ended with, and its first
 * live operation reads it, not an empty store (a replayed update does not run, so without the write-back the state
 * would be lost).
 */
export const durableMemberStore = (memory: StateStore.Service): Effect.Effect<StateStore.Service, never, WorkflowContext> =>
  Effect.map(durableStateStore(memory), (durable) => {
    const keep = (taskId: string) => (state: StateStore.State) => Effect.as(memory.save(taskId, state), state)
    return {
      caps: memory.caps,
      load: (taskId) => Effect.flatMap(durable.load(taskId), keep(taskId)),
      save: (taskId, state) => Effect.andThen(durable.save(taskId, state), memory.save(taskId, state)),
      modify: (taskId, f) => Effect.flatMap(durable.modify(taskId, f), keep(taskId)),
      update: (taskId, update) => Effect.flatMap(durable.update(taskId, update), keep(taskId))
    }
  })

/**
 * A reward whose every evaluation is an activity (`<session>/reward/<n>`): a replayed step's score is the stored one,
 * its judge not asked again nor its commands run again.
 */
export const durableReward = (inner: Reward.Reward): Effect.Effect<Reward.Reward, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const activity = numberedActivities(context, "reward")
    return { ...inner, evaluate: (step) => activity("reward", { success: Reward.Scored, execute: () => inner.evaluate(step) }) }
  })

/** A `TrajectoryStore` whose appends are activities (`<session>/trajectory/<n>`): a replayed step appends nothing. */
export const durableTrajectoryStore = (
  inner: TrajectoryStore.Service
): Effect.Effect<TrajectoryStore.Service, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const activity = numberedActivities(context, "trajectory")
    return {
      ...inner,
      append: (record) =>
        activity("trajectory", {
          success: TrajectoryStore.TrajectoryRecord,
          error: TrajectoryStore.TrajectoryStoreError,
          execute: () => inner.append(record)
        })
    }
  })

const ThreadSchema = Schema.Struct({
  id: Schema.String,
  owner: Schema.String,
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  messageCount: Schema.Number
})
const PageSchema = Schema.Struct({ threadId: Schema.String, start: Schema.Number, messages: Schema.Array(Model.Message), total: Schema.Number })
const SummarySchema = Schema.UndefinedOr(Schema.Struct({ content: Schema.String, through: Schema.Number }))
const RecalledSchema = Schema.Array(Schema.Struct({
  threadId: Schema.String,
  index: Schema.Number,
  score: Schema.Number,
  message: Model.Message
}))
const ThreadError = Schema.Union([Threads.ThreadNotFound, Threads.ThreadForbidden, Threads.ThreadBusy, Threads.ThreadStoreError])

/**
 * The thread store of a durable thread turn, the turn keyed by `turnKey` (its run id). Its reads (the history page,
 * the thread, its summary, what recall found, the working memory) are activities (`<run>/thread/<op>/<n>`), so a resumed turn runs on the history it
 * read first — the same requests as before, the model calls answered from storage. Its writes are activities too,
 * and its append also carries the turn key into the store, which appends a key once: a process that dies after the
 * append and before the activity's result is stored leaves a turn that appends again on resume, and is answered.
 * The lease is no activity: each execution takes it under the turn key, so a resumed turn takes back its own lease at
 * once (see `Threads.Service.acquire`), renews it while it runs and gives it back at the end.
 */
export const durableThreads = (inner: Threads.Service, turnKey: string): Effect.Effect<Threads.Service, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const activity = numberedActivities(context, turnKey)
    return {
      ...inner,
      acquire: (threadId, options) => inner.acquire(threadId, { ...options, turnKey }),
      get: (threadId, options) =>
        activity("thread/get", { success: ThreadSchema, error: ThreadError, execute: () => inner.get(threadId, options) }),
      messages: (threadId, options) =>
        activity("thread/messages", { success: PageSchema, error: ThreadError, execute: () => inner.messages(threadId, options) }),
      // The summary the turn starts from is read once: a resumed turn is given the history it was given first, and
      // sends the requests it sent then (a summary written meanwhile by another turn would change them).
      summary: (threadId, options) =>
        activity("thread/summary", { success: SummarySchema, error: ThreadError, execute: () => inner.summary(threadId, options) }),
      writeSummary: (threadId, summary, options) =>
        activity("thread/summary/write", { success: Schema.Void, error: ThreadError, execute: () => inner.writeSummary(threadId, summary, options) }),
      // What recall showed the turn is read once too; the vectors stored after the append replace what they were.
      recall: (query) =>
        activity("thread/recall", { success: RecalledSchema, error: Threads.ThreadStoreError, execute: () => inner.recall(query) }),
      readMemory: (key) =>
        activity("thread/memory/read", { success: Schema.Unknown, error: Threads.ThreadStoreError, execute: () => inner.readMemory(key) }),
      writeMemory: (key, document) =>
        activity("thread/memory/write", { success: Schema.Void, error: Threads.ThreadStoreError, execute: () => inner.writeMemory(key, document) }),
      append: (threadId, messages, options) =>
        activity("thread/append", {
          success: ThreadSchema,
          error: ThreadError,
          execute: () => inner.append(threadId, messages, { ...options, turnKey })
        })
    }
  })
