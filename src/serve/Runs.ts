/**
 * The runs of a server: each started in the background on an agent of `Agents`, its events kept for replay
 * and followed live by any number of readers, cancellable, and dropped some time after it ends.
 *
 * - `start` checks the request (the agent exists, the session id is usable, the budget within the agent's caps,
 *   fewer than `maxConcurrentRuns` running) and answers at once with the run's ids; the run goes on in the
 *   registry's scope, not the caller's.
 * - `events(runId, { after })` replays the run's events after the `after`-th (all of them by default), then
 *   follows it live, and ends after its `RunCompleted` — or fails with its error, when it failed.
 * - `startTurn(request, { id, owner })` starts a turn on a thread (`Agent.stream(…, { thread })`, with the `Threads`
 *   store in the context `Runs` was built in) under the same limits, and answers once the turn holds the thread: a
 *   missing thread, another owner's, or one in another turn is refused at once (`ThreadNotFound`, `ThreadForbidden`,
 *   `ThreadBusy`, also across processes on a shared store), and no run is kept for it.
 * - `cancel` stops a run at once (its model requests aborted, its processes killed): it ends completed,
 *   `interrupted` with reason `cancelled`, keeping the output it had.
 * - Memory is bounded: at most `keepFinishedRuns` finished runs are kept, each for at most `keepFinished`.
 * - Readers that follow a run the caller did not start (`GET /runs/:id/events`, a chat continued after approvals,
 *   A2A's `SubscribeToTask` and continuations) each hold one of `maxEventStreams` slots (`holdEventStream`) for as
 *   long as their response lasts; beyond it they are refused with `TooManyEventStreams` (429). Streams that start a
 *   run are bounded by `maxConcurrentRuns` instead.
 *
 * @example
 * ```ts
 * import { Effect, Layer, Stream } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as Runs from "valet/Runs"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["4"]) })
 *
 * const program = Effect.gen(function*() {
 *   const runs = yield* Runs.Runs
 *   // Answers at once with the run's ids; the run goes on in the registry, not in this fiber.
 *   const { runId } = yield* runs.start({ agent: "assistant", input: "2 + 2?", budget: { maxCalls: 3 } })
 *   // Replayed from the first event, then followed live until `RunCompleted`; any number of readers may follow.
 *   const kinds = yield* Stream.runCollect(Stream.map(yield* runs.events(runId), ({ event }) => event._tag))
 *   const run = yield* runs.get(runId)
 *   return { kinds, status: run.status, output: run.result?.output }
 * })
 *
 * const result = program.pipe(
 *   Effect.provide(Runs.layer({ maxConcurrentRuns: 4 }).pipe(Layer.provide(Agents.layer([assistant]))))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Cause, Clock, Context, Deferred, Duration, Effect, Exit, type Fiber, Layer, Option, Result, Schema, type Scope, Semaphore, Stream } from "effect"
import * as Agent from "../core/Agent.js"
import type * as Guardrail from "../core/Guardrail.js"
import type { AgentError } from "../core/AgentError.js"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Budget from "../core/Budget.js"
import * as HumanLoop from "../core/HumanLoop.js"
import * as Model from "../core/Model.js"
import * as Threads from "../core/Threads.js"
import * as Decode from "../core/internal/decode.js"
import { randomHex20 } from "../core/internal/ids.js"
import * as Agents from "./Agents.js"
import * as OutputSchema from "./internal/outputSchema.js"
import * as RunGuardrails from "./internal/runGuardrails.js"
import * as RedactStore from "./internal/redactStore.js"

// ---------------------------------------------------------------------------------------------------------
// Requests and views
// ---------------------------------------------------------------------------------------------------------

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))


/**
 * A run's budget as a client asks for it (each limit capped by the agent's own), in `Budget`'s words.
 *
 * @since 0.2.0
 * @category models
 */
export const RunBudget = Schema.Struct({
  /** Model calls, sub-agents included. */
  maxCalls: Schema.optional(Count),
  /** Total tokens, input and output. */
  maxTotalTokens: Schema.optional(Count),
  /** Output tokens over all the run's model calls (OpenAI's `max_tokens` for an agent). */
  maxOutputTokens: Schema.optional(Count),
  /** Wall-clock time: milliseconds, or `"30 seconds"`. */
  maxDuration: Schema.optional(Decode.WireDuration),
  /** @deprecated `maxTotalTokens` (valet 0.x reads both). */
  maxTokens: Schema.optional(Count),
  /** @deprecated `maxDuration` (valet 0.x reads both): milliseconds. */
  maxWallMs: Schema.optional(Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)))
})
/**
 * A run's budget as a client asks for it.
 *
 * @since 0.2.0
 * @category models
 */
export type RunBudget = typeof RunBudget.Type

/**
 * An earlier message of a conversation, as the model reads it: system, user, assistant (with the tool calls it
 * asked for, `toolCalls: [{id, name, arguments}]`) or a tool's result (`{role: "tool", toolCallId, name, content}`).
 *
 * @since 0.2.0
 * @category models
 */
export const HistoryMessage = Model.Message
/**
 * An earlier message of a conversation.
 *
 * @since 0.2.0
 * @category models
 */
export type HistoryMessage = typeof HistoryMessage.Type

/**
 * What starts a run.
 *
 * @since 0.2.0
 * @category models
 */
export const RunRequest = Schema.Struct({
  /** The agent's name. */
  agent: Schema.String,
  /**
   * The prompt: text, or parts (text, images, files, audio; checked as `Model.Part`), for a plain run or a thread
   * turn. Parts are the run's task (its last user message, after `history`); the run's `input` shows their text.
   */
  input: Schema.Union([Schema.String, Schema.Array(Model.Part)]),
  /** The run's session id (letters, digits, `-`, `.`, `:`, single `_`); a new one by default. */
  sessionId: Schema.optional(Agent.SessionId),
  budget: Schema.optional(RunBudget),
  /** Earlier messages of the conversation, placed between the agent's instructions and the input. */
  history: Schema.optional(Schema.Array(HistoryMessage)),
  /**
   * Structured output: a JSON Schema (draft 2020-12, or draft-07 with `definitions`) the answer must match. The
   * run's `result.value` is the answer decoded with it (asked natively, repaired when it does not decode; see
   * `Agent.run`'s `output`). `pattern` keywords are not enforced: a client's regular expression is not run here.
   */
  output: Schema.optional(Model.JsonObject),
  /**
   * The run's own guardrails, checked after the agent's: by name, those the server declares (`valet.yaml`'s
   * `guardrails:`, `Runs`' `guardrails` option), or the built-ins `maxLength`, `redact` (no patterns) and `schema`
   * with their options; never a model or code. A name the server does not declare is refused (400) naming it.
   */
  guardrails: Schema.optional(RunGuardrails.Request)
})
/**
 * What starts a run.
 *
 * @since 0.2.0
 * @category models
 */
export type RunRequest = typeof RunRequest.Type

/**
 * What starts a turn on a thread (`POST /threads/:threadId/runs`): a `RunRequest` without `history`, which is the
 * thread's.
 *
 * @since 0.2.0
 * @category models
 */
export const ThreadRunRequest = RunRequest.mapFields(({ history: _, ...fields }) => fields)
/**
 * What starts a turn on a thread.
 *
 * @since 0.2.0
 * @category models
 */
export type ThreadRunRequest = typeof ThreadRunRequest.Type

/**
 * The thread a run is a turn of, and whose it is: `owner` comes from the embedding app's auth (`RunsApi.Owner`),
 * never from a request body.
 *
 * @since 0.2.0
 * @category models
 */
export interface ThreadTurn {
  readonly id: string
  readonly owner: string
  /**
   * The conversation before the task, when the caller sends it whole (the Responses facade): given after the
   * thread's messages, checked by the input guardrails as the caller's, and appended with the turn's own messages in
   * its one write under the lease (but its system messages, which are the call's instructions).
   */
  readonly history?: ReadonlyArray<Model.Message> | undefined
  /**
   * The turn's key (`Threads.TurnOptions.turnKey`): its lease and its append carry it, so `Threads.Service.turnOf`
   * finds the turn by it (the Responses facade names a stored response by it).
   */
  readonly turnKey?: string | undefined
  /**
   * The thread's message count the turn was chosen on (`Threads.TurnOptions.expectedCount`): another count once the
   * turn holds the thread refuses it (`ThreadBusy`) before it runs.
   */
  readonly expectedCount?: number | undefined
}

/**
 * A turn's ids, and where its messages go: the thread's message count once the turn held the thread.
 *
 * @since 0.2.0
 * @category models
 */
export interface TurnStarted extends Started {
  readonly messageCount: number
}

/**
 * A run's ids.
 *
 * @since 0.2.0
 * @category models
 */
export const Started = Schema.Struct({ runId: Schema.String, sessionId: Schema.String })
/**
 * A run's ids.
 *
 * @since 0.2.0
 * @category models
 */
export type Started = typeof Started.Type

/**
 * Where a run is.
 *
 * @since 0.2.0
 * @category models
 */
export const Status = Schema.Literals(["running", "waiting", "completed", "failed"])
/**
 * Where a run is.
 *
 * @since 0.2.0
 * @category models
 */
export type Status = typeof Status.Type

/**
 * A tool call of a run waiting for a person's decision (`POST /runs/:id/decisions/:toolCallId`).
 *
 * @since 0.2.0
 * @category models
 */
export const PendingApproval = Schema.Struct({
  sessionId: Schema.String,
  toolCallId: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  requestedAt: Schema.Number
})

/**
 * A question of a run waiting for a person's answer (`POST /runs/:id/answers/:questionId`).
 *
 * @since 0.2.0
 * @category models
 */
export const PendingQuestion = Schema.Struct({
  sessionId: Schema.String,
  questionId: Schema.String,
  question: Schema.String,
  schema: Schema.Unknown,
  requestedAt: Schema.Number
})

/**
 * A run as a client sees it (`GET /runs/:id`): ids, agent, status (`waiting` while tool calls wait for a person's
 * decision, listed in `pending`), and once ended its result or error.
 *
 * @since 0.2.0
 * @category models
 */
export const RunView = Schema.Struct({
  runId: Schema.String,
  sessionId: Schema.String,
  agent: Schema.String,
  input: Schema.String,
  /**
   * The input's parts, when it was given as parts (images, files, audio, with their bytes): what the viewer shows as
   * thumbnails. `input` is their text.
   */
  inputParts: Schema.optional(Schema.Array(Model.Part)),
  /** The thread the run is a turn of, when it is one. */
  threadId: Schema.optional(Schema.String),
  status: Status,
  /** Events so far. */
  events: Schema.Int,
  createdAt: Schema.Number,
  endedAt: Schema.optional(Schema.Number),
  result: Schema.optional(AgentEvent.RunResult),
  /** The typed error of a failed run, as JSON (`_tag`, `message`, fields). */
  error: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
  /** The tool calls waiting for a person's decision (status `waiting`), oldest first. */
  pending: Schema.optional(Schema.Array(PendingApproval)),
  /** The questions waiting for a person's answer (status `waiting`), oldest first. */
  questions: Schema.optional(Schema.Array(PendingQuestion))
})
/**
 * A run as a client sees it.
 *
 * @since 0.2.0
 * @category models
 */
export type RunView = typeof RunView.Type

/**
 * A run in a listing: what tells runs apart, without the input, result or error (`GET /runs/:id` has those).
 *
 * @since 0.2.0
 * @category models
 */
export const RunSummary = Schema.Struct({
  runId: Schema.String,
  sessionId: Schema.String,
  agent: Schema.String,
  status: Status,
  /** The input's first 100 characters. */
  inputPreview: Schema.String,
  events: Schema.Int,
  createdAt: Schema.Number,
  endedAt: Schema.optional(Schema.Number),
  interrupted: Schema.optional(Schema.Boolean),
  interruptionReason: Schema.optional(Schema.String)
})
/**
 * A run in a listing.
 *
 * @since 0.2.0
 * @category models
 */
export type RunSummary = typeof RunSummary.Type

/**
 * One page of a listing, newest first; `nextCursor` fetches the next (older) page.
 *
 * @since 0.2.0
 * @category models
 */
export interface RunPage<A> {
  readonly runs: ReadonlyArray<A>
  readonly nextCursor?: string | undefined
}

/**
 * Which page to list.
 *
 * @since 0.2.0
 * @category options
 */
export interface ListOptions {
  /** Runs per page (default 50, at most 500). */
  readonly limit?: number | undefined
  /** A page's `nextCursor`: the runs listed after it. */
  readonly cursor?: string | undefined
}

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

/**
 * No agent has that name.
 *
 * @since 0.2.0
 * @category errors
 */
export class UnknownAgent extends Schema.TaggedError<UnknownAgent>()("UnknownAgent", {
  agent: Schema.String,
  message: Schema.String
}, { httpApiStatus: 404 }) {}

/**
 * No run has that id (or it ended long enough ago to be dropped).
 *
 * @since 0.2.0
 * @category errors
 */
export class RunNotFound extends Schema.TaggedError<RunNotFound>()("RunNotFound", {
  runId: Schema.String,
  message: Schema.String
}, { httpApiStatus: 404 }) {}

/**
 * `maxConcurrentRuns` runs are going on; try again after `retryAfterSeconds`.
 *
 * @since 0.2.0
 * @category errors
 */
export class TooManyRuns extends Schema.TaggedError<TooManyRuns>()("TooManyRuns", {
  limit: Schema.Int,
  retryAfterSeconds: Schema.Int,
  message: Schema.String
}, { httpApiStatus: 429 }) {}

/**
 * `maxEventStreams` streams already follow runs (`GET /runs/:id/events`, a chat continued, A2A's subscriptions): a
 * reader more is refused; try again after `retryAfterSeconds`.
 *
 * @since 0.2.0
 * @category errors
 */
export class TooManyEventStreams extends Schema.TaggedError<TooManyEventStreams>()("TooManyEventStreams", {
  limit: Schema.Int,
  retryAfterSeconds: Schema.Int,
  message: Schema.String
}, { httpApiStatus: 429 }) {}

/**
 * The request cannot start a run (a session id in use, a budget the agent refuses…).
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidRunRequest extends Schema.TaggedError<InvalidRunRequest>()("InvalidRunRequest", {
  message: Schema.String
}, { httpApiStatus: 400 }) {}

/**
 * The server keeps no threads (no `Threads` store in context): the thread routes answer 501 with this.
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadsUnavailable extends Schema.TaggedError<ThreadsUnavailable>()("ThreadsUnavailable", {
  message: Schema.String
}, { httpApiStatus: 501 }) {}

/**
 * The `ThreadsUnavailable` of a server without a thread store, saying how to give it one.
 *
 * @since 0.2.0
 * @category errors
 */
export const threadsUnavailable = (): ThreadsUnavailable =>
  new ThreadsUnavailable({
    message: "this server keeps no threads: give it a thread store (valet.yaml `threads: { store: sqlite }`, or provide Threads to the server's layer)"
  })

/**
 * A followed run failed: its typed error as JSON.
 *
 * @since 0.2.0
 * @category errors
 */
export class RunFailed extends Schema.TaggedError<RunFailed>()("RunFailed", {
  runId: Schema.String,
  error: Schema.Record(Schema.String, Schema.Unknown),
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------------------

/**
 * An event of a run with its position (0-based): its SSE id.
 *
 * @since 0.2.0
 * @category models
 */
export interface Indexed {
  readonly seq: number
  readonly event: AgentEvent.AgentEvent
}

/**
 * The limits of a registry.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** Runs going on at once, at most (default 16); more are refused with `TooManyRuns`. */
  readonly maxConcurrentRuns?: number | undefined
  /**
   * Streams following a run at once, at most (default 256; `holdEventStream`): readers of a run they did not start —
   * `GET /runs/:id/events`, a chat continued after approvals, A2A's `SubscribeToTask` and continuations. More are
   * refused with `TooManyEventStreams` (429). Each holds a socket, a fiber and a subscription for as long as the run
   * goes on, and any token holder can open them; streams that start a run are bounded by `maxConcurrentRuns`.
   */
  readonly maxEventStreams?: number | undefined
  /** Finished runs kept, at most (default 100). */
  readonly keepFinishedRuns?: number | undefined
  /** How long a finished run is kept, in ms (default one hour). */
  readonly keepFinished?: Duration.Input | undefined
  /** @deprecated `keepFinished` (valet 0.x reads both): milliseconds. */
  readonly keepFinishedMs?: number | undefined
  /**
   * How every turn on a thread is held, read and kept (`Threads.TurnOptions` without the thread and its owner,
   * which are the request's): `historyLimit`, `onBusy`, a working memory, … (valet.yaml's `threads:` sets them).
   */
  readonly turns?: TurnDefaults | undefined
  /**
   * Guardrails by name that a run's request may name (`guardrails: { input: ["no_pii"] }`), beside those of the
   * `Agents` catalog (`valet.yaml`'s `guardrails:`); these win on a name both have.
   */
  readonly guardrails?: Readonly<Record<string, Guardrail.Guardrail>> | undefined
}

/**
 * The options of every turn a server runs on a thread: `Threads.TurnOptions` but what is each turn's own — the
 * thread and the owner, the turn's key and expected count, whether it keeps its caller's history (the Responses
 * facade's turns do), and `onBegun` (the registry's).
 *
 * @since 0.2.0
 * @category options
 */
export type TurnDefaults = Omit<Threads.TurnOptions, "id" | "owner" | "turnKey" | "expectedCount" | "keepHistory" | "onBegun">

/**
 * Whose the caller is (`RunsApi.CurrentOwner`): runs started with an owner are seen by that owner only.
 *
 * @since 0.2.0
 * @category options
 */
export interface OwnerOption {
  readonly owner?: string | undefined
}

/**
 * How a run is started: its owner, and whether it is `ephemeral` — dropped from the registry once it ended and its
 * starter read its events (a response not stored, `store: false` on `/v1/responses`: no later request finds it).
 *
 * @since 0.2.0
 * @category models
 */
export interface StartOptions extends OwnerOption {
  readonly ephemeral?: boolean | undefined
}

/**
 * The registry.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /**
   * Starts a run. With `owner` (the request's, from the app's auth), the run is that owner's: `get`, `events`,
   * `cancel` and `list` given another owner do not see it.
   */
  readonly start: (
    request: RunRequest,
    options?: StartOptions
  ) => Effect.Effect<Started, UnknownAgent | TooManyRuns | InvalidRunRequest>
  /**
   * Starts a turn on a thread (`Agent.stream(…, { thread })`, through the same limits, budgets, cancel and replay as
   * `start`), and answers once the turn holds the thread and has read its history: a thread that does not exist,
   * belongs to another owner, or is in another turn is refused here (`ThreadNotFound`, `ThreadForbidden`,
   * `ThreadBusy`), not reported later as a failed run. `ThreadsUnavailable` without a `Threads` store.
   */
  readonly startTurn: (
    request: ThreadRunRequest,
    thread: ThreadTurn
  ) => Effect.Effect<TurnStarted, UnknownAgent | TooManyRuns | InvalidRunRequest | ThreadsUnavailable | Threads.ThreadError>
  /** The thread store the runs' turns use, when the server has one. */
  readonly threads: Option.Option<Threads.Service>
  /** A run; given an `owner`, another owner's run is `RunNotFound` (its id is not confirmed). */
  readonly get: (runId: string, options?: OwnerOption) => Effect.Effect<RunView, RunNotFound>
  /** The runs kept, newest first, a page at a time; given an `owner`, without other owners' runs. */
  readonly list: (options?: ListOptions & OwnerOption) => Effect.Effect<RunPage<RunSummary>>
  /**
   * The run's events after the `after`-th (from the first by default), then live; ends after the run's
   * `RunCompleted`, or fails with `RunFailed`.
   */
  readonly events: (
    runId: string,
    options?: { readonly after?: number | undefined } & OwnerOption
  ) => Effect.Effect<Stream.Stream<Indexed, RunFailed>, RunNotFound>
  /** Stops the run at once; it ends `interrupted` with reason `cancelled`. A run already ended is left as it is. */
  readonly cancel: (runId: string, options?: OwnerOption) => Effect.Effect<void, RunNotFound>
  /**
   * Decides a tool call of the run (or of its sub-agents) that waits for a person (`HumanLoop`): `NotWaiting` when
   * none with that id waits, `AlreadyDecided` for a second decision, `InvalidDecision` for edited arguments the
   * tool's schema refuses (the call still waits). `sessionId` names the session the call is of (the run's own or one
   * of its sub-agents'), for call ids that several of them share.
   */
  readonly decide: (
    runId: string,
    toolCallId: string,
    decision: HumanLoop.Decision,
    options?: OwnerOption & { readonly sessionId?: string | undefined }
  ) => Effect.Effect<Decided, RunNotFound | HumanLoop.DecideError>
  /**
   * Answers a question of the run (or of its sub-agents) that waits for a person: the answer is decoded by the
   * question's schema (`InvalidDecision` when it does not fit; the question still waits).
   */
  readonly answer: (
    runId: string,
    questionId: string,
    answer: unknown,
    options?: OwnerOption
  ) => Effect.Effect<Answered, RunNotFound | HumanLoop.DecideError>
  /** Runs going on now. */
  readonly running: Effect.Effect<number>
  /**
   * Holds one of the `maxEventStreams` slots of streams that follow a run until the current scope closes (a request's
   * scope closes once its response has been sent, or its client went away), or fails at once with
   * `TooManyEventStreams` when every slot is held.
   */
  readonly holdEventStream: Effect.Effect<void, TooManyEventStreams, Scope.Scope>
  /** How many `holdEventStream` slots are held. */
  readonly eventStreams: Effect.Effect<number>
}

/**
 * What `decide` answers: the call decided (with its session) and how.
 *
 * @since 0.2.0
 * @category models
 */
export const Decided = Schema.Struct({ runId: Schema.String, toolCallId: Schema.String, sessionId: Schema.String, approved: Schema.Boolean })
/**
 * @since 0.2.0
 * @category models
 */
export type Decided = typeof Decided.Type

/**
 * What `answer` answers: the question answered, with its session.
 *
 * @since 0.2.0
 * @category models
 */
export const Answered = Schema.Struct({ runId: Schema.String, questionId: Schema.String, sessionId: Schema.String })
/**
 * @since 0.2.0
 * @category models
 */
export type Answered = typeof Answered.Type

/**
 * The runs in context.
 *
 * @since 0.2.0
 * @category services
 */
export class Runs extends Context.Service<Runs, Service>()("valet/Runs") {}

interface Record_ {
  /** The order of creation: the listing's cursor. */
  readonly seq: number
  readonly runId: string
  readonly sessionId: string
  readonly agent: string
  readonly input: string
  /** The input as given, when it was parts. */
  readonly inputParts: ReadonlyArray<Model.Part> | undefined
  readonly thread: ThreadTurn | undefined
  /** A turn's thread's message count once the turn held it (where its messages go). */
  threadCount: number | undefined
  /** Dropped once it ended and its events were asked for (`StartOptions.ephemeral`). */
  readonly ephemeral: boolean
  /** Whether its events were asked for. */
  followed: boolean
  /** Whose the run is (the request's owner); undefined for runs started without one (seen by every caller). */
  readonly owner: string | undefined
  readonly createdAt: number
  readonly events: Array<AgentEvent.AgentEvent>
  status: Status
  endedAt: number | undefined
  result: AgentEvent.RunResult | undefined
  /** The typed error of a failed run, or what stopped it otherwise (a defect, the server shutting down). */
  error: unknown
  /** Completed (and replaced) whenever the record changes: followers wait on it. */
  changed: Deferred.Deferred<void>
  readonly cancel: Deferred.Deferred<void>
  fiber: Fiber.Fiber<void> | undefined
  /** The tool calls waiting for a decision, by session and call id (kept from the run's approval events). */
  readonly pending: Map<string, typeof PendingApproval.Type>
  /** The questions waiting for an answer, by session and question id. */
  readonly questions: Map<string, typeof PendingQuestion.Type>
}

const threadErrorTags = new Set(["ThreadNotFound", "ThreadForbidden", "ThreadBusy", "ThreadStoreError"])

const isThreadError = (error: unknown): error is Threads.ThreadError =>
  typeof error === "object" && error !== null && "_tag" in error && threadErrorTags.has(String(error._tag))

const newId = (prefix: string): string => `${prefix}_${randomHex20()}`

const budgetLimits = (budget: RunBudget | undefined): Budget.Limits | undefined => {
  if (budget === undefined) return undefined
  // The current names win over the deprecated ones when a client sends both.
  const total = budget.maxTotalTokens ?? budget.maxTokens
  const duration = budget.maxDuration ?? budget.maxWallMs
  return {
    ...(budget.maxCalls !== undefined ? { maxCalls: budget.maxCalls } : {}),
    ...(total !== undefined ? { maxTotalTokens: total } : {}),
    ...(budget.maxOutputTokens !== undefined ? { maxOutputTokens: budget.maxOutputTokens } : {}),
    ...(duration !== undefined ? { maxDuration: duration } : {})
  }
}

let saidBudgetNames = false
let saidKeepFinishedMs = false

/** Says once per process that a client used a deprecated budget name. */
const noteDeprecatedBudget = (budget: RunBudget | undefined): Effect.Effect<void> =>
  budget === undefined || saidBudgetNames || (budget.maxTokens === undefined && budget.maxWallMs === undefined)
    ? Effect.void
    : Effect.suspend(() => {
      saidBudgetNames = true
      return Effect.logWarning("Runs: the budget names maxTokens and maxWallMs are deprecated, use maxTotalTokens and maxDuration (valet 0.x reads both)")
    })

const view = (record: Record_): RunView => ({
  runId: record.runId,
  sessionId: record.sessionId,
  agent: record.agent,
  input: record.input,
  ...(record.inputParts !== undefined ? { inputParts: record.inputParts } : {}),
  ...(record.thread !== undefined ? { threadId: record.thread.id } : {}),
  status: statusOf(record),
  events: record.events.length,
  createdAt: record.createdAt,
  ...(record.endedAt !== undefined ? { endedAt: record.endedAt } : {}),
  ...(record.result !== undefined ? { result: record.result } : {}),
  ...(record.error !== undefined ? { error: AgentEvent.errorJson(record.error) } : {}),
  ...(record.pending.size > 0 ? { pending: [...record.pending.values()] } : {}),
  ...(record.questions.size > 0 ? { questions: [...record.questions.values()] } : {})
})

/** `waiting` while a running run's tool calls wait for a person. */
const statusOf = (record: Record_): Status =>
  record.status === "running" && (record.pending.size > 0 || record.questions.size > 0) ? "waiting" : record.status

/** Keeps the run's waiting calls from its events. */
const trackApprovals = (record: Record_, event: AgentEvent.AgentEvent): void => {
  if (event._tag === "ApprovalRequested") {
    record.pending.set(`${event.sessionId}\u0000${event.toolCallId}`, {
      sessionId: event.sessionId,
      toolCallId: event.toolCallId,
      name: event.name,
      arguments: event.arguments,
      requestedAt: event.timestamp
    })
  } else if (event._tag === "ApprovalDecided") {
    record.pending.delete(`${event.sessionId}\u0000${event.toolCallId}`)
  } else if (event._tag === "QuestionAsked") {
    record.questions.set(`${event.sessionId}\u0000${event.questionId}`, {
      sessionId: event.sessionId,
      questionId: event.questionId,
      question: event.question,
      schema: event.schema,
      requestedAt: event.timestamp
    })
  } else if (event._tag === "QuestionAnswered") {
    record.questions.delete(`${event.sessionId}\u0000${event.questionId}`)
  }
}

const summary = (record: Record_): RunSummary => ({
  runId: record.runId,
  sessionId: record.sessionId,
  agent: record.agent,
  status: statusOf(record),
  inputPreview: record.input.slice(0, 100),
  events: record.events.length,
  createdAt: record.createdAt,
  ...(record.endedAt !== undefined ? { endedAt: record.endedAt } : {}),
  ...(record.result !== undefined ? { interrupted: record.result.interrupted } : {}),
  ...(record.result?.interruptionReason !== undefined ? { interruptionReason: record.result.interruptionReason } : {})
})

/**
 * A registry running the agents of `Agents`, its runs living in the current `Scope`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Service, never, Agents.Agents | Scope.Scope> =>
  Effect.gen(function*() {
    const agents = yield* Agents.Agents
    // The guardrails a request may name: the catalog's (the file's), then the options' (winning on a name).
    const namedGuardrails = new Map<string, Guardrail.Guardrail>([...(agents.guardrails ?? []), ...Object.entries(options.guardrails ?? {})])
    // A store when the server has one: turns on threads need it; plain runs do not. Its failures reach clients
    // without the driver's text (the log has it).
    const threads = Option.map(yield* Effect.serviceOption(Threads.Threads), RedactStore.redacted)
    // Where the runs' tool calls that need a person wait: the app's, or one of the registry's own.
    const humanLoop = Option.getOrUndefined(yield* Effect.serviceOption(HumanLoop.HumanLoop)) ?? (yield* HumanLoop.make)
    const scope = yield* Effect.scope
    const maxConcurrentRuns = options.maxConcurrentRuns ?? 16
    // 256 followers: far more than the viewers, chat continuations and A2A subscriptions one server's users keep open
    // at once (16 runs by default, each watched by a few), yet a bound on what a token holder looping on
    // `GET /runs/:id/events` can pin (a socket, a fiber and a subscription each: a few hundred KiB in all, and well
    // under the default 1024 open files of a process).
    const maxEventStreams = options.maxEventStreams ?? 256
    const followers = yield* Semaphore.make(maxEventStreams)
    let following = 0
    const turns = options.turns ?? {}
    const keepFinishedRuns = options.keepFinishedRuns ?? 100
    const keepFinishedMs = options.keepFinished !== undefined ? Duration.toMillis(options.keepFinished) : options.keepFinishedMs ?? 3_600_000
    if (options.keepFinished === undefined && options.keepFinishedMs !== undefined && !saidKeepFinishedMs) {
      saidKeepFinishedMs = true
      yield* Effect.logWarning("Runs: the option keepFinishedMs is deprecated, use keepFinished (valet 0.x reads both)")
    }
    const records = new Map<string, Record_>()
    const sessions = new Set<string>()
    let running = 0
    let created = 0

    const touch = (record: Record_) => {
      const changed = record.changed
      record.changed = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(changed, Effect.void)
    }

    /** Drops finished runs beyond the count or the age limit (oldest first). */
    const prune = (now: number) => {
      const finished = [...records.values()].filter((record) => record.status !== "running")
      const excess = finished.length - keepFinishedRuns
      finished.forEach((record, i) => {
        if (i < excess || now - (record.endedAt ?? now) > keepFinishedMs) {
          records.delete(record.runId)
          sessions.delete(record.sessionId)
        }
      })
    }

    /** Whether a caller with `owner` may see the record: its own runs, and runs that belong to no one. */
    const visible = (record: Record_, owner: string | undefined) =>
      owner === undefined || record.owner === undefined || record.owner === owner

    const find = (runId: string, owner?: string | undefined) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        prune(now)
        const record = records.get(runId)
        // Another owner's run answers as an unknown one: its id is not confirmed.
        return record !== undefined && visible(record, owner)
          ? Effect.succeed(record)
          : Effect.fail(new RunNotFound({ runId, message: `no run ${JSON.stringify(runId)} (unknown, or ended and dropped)` }))
      })

    /** The run's events: a plain run, or a turn on its thread (the thread's history, its messages appended). */
    const eventsOf = (
      record: Record_,
      entry: Agents.Entry,
      prompt: Agent.Task,
      options: Agent.StreamOptions & { readonly output?: Schema.Codec<unknown, unknown> }
    ): Stream.Stream<AgentEvent.AgentEvent, AgentError | Threads.ThreadError> => {
      const thread = record.thread
      const run = thread === undefined || Option.isNone(threads)
        ? Agent.stream(entry.agent, prompt, options)
        : Agent.stream(entry.agent, prompt, {
          ...options,
          thread: {
            ...turns,
            id: thread.id,
            owner: thread.owner,
            ...(thread.history !== undefined ? { keepHistory: true } : {}),
            ...(thread.turnKey !== undefined ? { turnKey: thread.turnKey } : {}),
            ...(thread.expectedCount !== undefined ? { expectedCount: thread.expectedCount } : {}),
            onBegun: ({ messageCount }) => {
              record.threadCount = messageCount
            }
          }
        }).pipe(
          Stream.provideService(Threads.Threads, threads.value)
        )
      return Stream.provideService(run, HumanLoop.HumanLoop, humanLoop)
    }

    const execute = (
      record: Record_,
      entry: Agents.Entry,
      budget: Budget.Limits | undefined,
      history: ReadonlyArray<Model.Message>,
      prompt: Agent.Task,
      output: Schema.Codec<unknown, unknown> | undefined,
      guardrails: Guardrail.Guardrails | undefined,
      begun: Deferred.Deferred<void, Threads.ThreadError>
    ) =>
      eventsOf(record, entry, prompt, {
        sessionId: record.sessionId,
        history,
        ...(output !== undefined ? { output } : {}),
        ...(guardrails !== undefined ? { guardrails } : {}),
        cancel: Deferred.await(record.cancel),
        ...(budget !== undefined ? { budget } : {})
      }).pipe(
        Stream.runForEach((event) =>
          Effect.sync(() => {
            // The first event: a turn holds its thread and has read its history.
            if (record.events.length === 0) Deferred.doneUnsafe(begun, Exit.void)
            record.events.push(event)
            trackApprovals(record, event)
            if (event._tag === "RunCompleted" && event.sessionId === record.sessionId) record.result = event.result
            touch(record)
          })
        ),
        Effect.catch((error: AgentError | Threads.ThreadError) =>
          Effect.sync(() => {
            // A turn refused before it began (the thread missing, another owner's, busy): `startTurn` answers it.
            if (record.events.length === 0 && isThreadError(error)) Deferred.doneUnsafe(begun, Exit.fail(error))
            record.error = error
          })),
        Effect.onExit((exit) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              Deferred.doneUnsafe(begun, Exit.void)
              running--
              // A run that neither completed nor failed with a typed error (a defect, the server going down) is a
              // failed run too: its readers must learn how it ended.
              if (record.result === undefined && record.error === undefined) {
                record.error = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
                  ? { _tag: "Defect", message: String(Cause.squash(exit.cause)) }
                  : { _tag: "Interrupted", message: "the run was stopped before it ended (the server is shutting down)" }
              }
              record.status = record.error !== undefined ? "failed" : "completed"
              record.endedAt = now
              // A run that ended (cancelled, failed) while calls or questions waited: none of them waits any more.
              record.pending.clear()
              record.questions.clear()
              touch(record)
              prune(now)
              dropIfDone(record)
            }))
        )
      )

    /** Checks the request, registers the run and forks it; `begun` is done when it began (or could not). */
    const launch = (
      request: RunRequest,
      thread: ThreadTurn | undefined,
      owner: string | undefined,
      begun: Deferred.Deferred<void, Threads.ThreadError>,
      ephemeral?: boolean
    ): Effect.Effect<Record_, UnknownAgent | TooManyRuns | InvalidRunRequest> =>
      Effect.gen(function*() {
        const entry = agents.get(request.agent)
        if (entry === undefined) {
          return yield* new UnknownAgent({
            agent: request.agent,
            message: `no agent named ${JSON.stringify(request.agent)}; agents: ${agents.list.map((e) => e.name).join(", ")}`
          })
        }
        if (running >= maxConcurrentRuns) {
          return yield* new TooManyRuns({
            limit: maxConcurrentRuns,
            retryAfterSeconds: 1,
            message: `${maxConcurrentRuns} runs are going on, the most this server runs at once: retry later`
          })
        }
        // Parts are the run's task as given (its last user message; a thread turn keeps them).
        const parts = typeof request.input === "string" ? undefined : request.input
        const sessionId = request.sessionId ?? newId("sess")
        const problem = Agent.sessionIdProblem(sessionId)
        if (problem !== undefined) return yield* new InvalidRunRequest({ message: `sessionId: ${problem}` })
        if (sessions.has(sessionId)) {
          return yield* new InvalidRunRequest({ message: `sessionId: ${JSON.stringify(sessionId)} is the session of another run` })
        }
        const guardrails = request.guardrails !== undefined ? RunGuardrails.resolve(request.guardrails, namedGuardrails) : undefined
        if (guardrails !== undefined && Result.isFailure(guardrails)) return yield* new InvalidRunRequest({ message: guardrails.failure })
        const output = request.output !== undefined ? OutputSchema.fromJsonSchema(request.output) : undefined
        if (output !== undefined && Result.isFailure(output)) {
          return yield* new InvalidRunRequest({ message: `output: not a JSON Schema valet can check answers with: ${output.failure}` })
        }
        yield* noteDeprecatedBudget(request.budget)
        const budget = Agents.budgetOf(entry, budgetLimits(request.budget))
        if (budget !== undefined) {
          yield* Budget.make(budget).pipe(Effect.mapError((error) => new InvalidRunRequest({ message: `budget: ${error.message}` })))
        }
        const now = yield* Clock.currentTimeMillis
        prune(now)
        const record: Record_ = {
          seq: created++,
          runId: newId("run"),
          sessionId,
          agent: entry.name,
          input: Model.textOf(request.input),
          inputParts: parts,
          thread,
          threadCount: undefined,
          ephemeral: ephemeral === true,
          followed: false,
          owner,
          createdAt: now,
          events: [],
          status: "running",
          endedAt: undefined,
          result: undefined,
          error: undefined,
          changed: Deferred.makeUnsafe<void>(),
          cancel: Deferred.makeUnsafe<void>(),
          fiber: undefined,
          pending: new Map(),
          questions: new Map()
        }
        records.set(record.runId, record)
        sessions.add(sessionId)
        running++
        record.fiber = yield* Effect.forkIn(execute(
          record,
          entry,
          budget,
          thread?.history ?? request.history ?? [],
          parts ?? record.input,
          output?.success,
          guardrails?.success,
          begun
        ), scope)
        return record
      })

    const start = (request: RunRequest, options?: StartOptions): Effect.Effect<Started, UnknownAgent | TooManyRuns | InvalidRunRequest> =>
      Effect.map(
        launch(request, undefined, options?.owner, Deferred.makeUnsafe(), options?.ephemeral),
        (record) => ({ runId: record.runId, sessionId: record.sessionId })
      )

    /** An ephemeral run that ended and was followed: no later request finds it (its readers keep the record). */
    const dropIfDone = (record: Record_) => {
      if (record.ephemeral && record.followed && record.endedAt !== undefined) {
        records.delete(record.runId)
        sessions.delete(record.sessionId)
      }
    }

    const startTurn = (
      request: ThreadRunRequest,
      thread: ThreadTurn
    ): Effect.Effect<TurnStarted, UnknownAgent | TooManyRuns | InvalidRunRequest | ThreadsUnavailable | Threads.ThreadError> =>
      Effect.gen(function*() {
        if (Option.isNone(threads)) return yield* threadsUnavailable()
        const begun = Deferred.makeUnsafe<void, Threads.ThreadError>()
        // A turn is its thread owner's run.
        const record = yield* launch(request, thread, thread.owner, begun)
        // Answered once the turn holds the thread: a refused turn is the caller's error, and no run is kept.
        yield* Deferred.await(begun).pipe(
          Effect.tapError(() =>
            Effect.sync(() => {
              records.delete(record.runId)
              sessions.delete(record.sessionId)
            })
          )
        )
        return { runId: record.runId, sessionId: record.sessionId, messageCount: record.threadCount ?? 0 }
      })

    type Page = readonly [ReadonlyArray<Indexed>, Option.Option<number>]
    const events = (runId: string, options?: { readonly after?: number | undefined } & OwnerOption) =>
      Effect.map(find(runId, options?.owner), (record) => {
        // Asked for before it ended, or after (its starter was slower than the run): dropped once both are so.
        record.followed = true
        dropIfDone(record)
        return Stream.paginate(options?.after === undefined ? 0 : options.after + 1, (next: number) =>
          Effect.suspend((): Effect.Effect<Page, RunFailed> => {
            if (next < record.events.length) {
              const items = record.events.slice(next).map((event, i) => ({ seq: next + i, event }))
              return Effect.succeed([items, Option.some(record.events.length)])
            }
            if (record.status === "failed") {
              const error = AgentEvent.errorJson(record.error)
              return Effect.fail(new RunFailed({ runId, error, message: String(error.message ?? error._tag) }))
            }
            if (record.status === "completed") return Effect.succeed([[], Option.none()])
            // Nothing new yet: wait for the next change, then look again.
            return Effect.as(Deferred.await(record.changed), [[], Option.some(next)] as Page)
          }))
      })

    return Runs.of({
      start,
      startTurn,
      threads,
      get: (runId, options) => Effect.map(find(runId, options?.owner), view),
      list: (options) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.sync((): RunPage<RunSummary> => {
            prune(now)
            const limit = Math.min(Math.max(options?.limit ?? 50, 1), 500)
            // Records are kept in creation order; a page walks them newest first from below the cursor.
            const before = options?.cursor === undefined ? Infinity : Number(options.cursor)
            const page: Array<RunSummary> = []
            const all = [...records.values()].filter((record) => visible(record, options?.owner))
            let i = all.length - 1
            while (i >= 0 && all[i]!.seq >= before) i--
            for (; i >= 0 && page.length < limit; i--) page.push(summary(all[i]!))
            return i >= 0 ? { runs: page, nextCursor: String(all[i + 1]!.seq) } : { runs: page }
          })),
      events,
      cancel: (runId, options) =>
        Effect.flatMap(find(runId, options?.owner), (record) => Effect.sync(() => void Deferred.doneUnsafe(record.cancel, Effect.void))),
      decide: (runId, toolCallId, decision, options) =>
        Effect.flatMap(find(runId, options?.owner), (record) =>
          record.status !== "running"
            ? Effect.fail(new HumanLoop.NotWaiting({ toolCallId, message: `run ${JSON.stringify(runId)} has ended: no call of it waits` }))
            : options?.sessionId !== undefined && !AgentEvent.isWithinSession(options.sessionId, record.sessionId)
            ? Effect.fail(new HumanLoop.NotWaiting({ toolCallId, message: `the session ${JSON.stringify(options.sessionId)} is not of run ${JSON.stringify(runId)}` }))
            : Effect.map(humanLoop.decide(toolCallId, decision, { sessionId: options?.sessionId ?? record.sessionId }), (request) => ({
              runId,
              toolCallId: request.toolCallId,
              sessionId: request.sessionId,
              approved: decision.approved
            }))),
      answer: (runId, questionId, value, options) =>
        Effect.flatMap(find(runId, options?.owner), (record) =>
          record.status !== "running"
            ? Effect.fail(new HumanLoop.NotWaiting({ toolCallId: questionId, message: `run ${JSON.stringify(runId)} has ended: no question of it waits` }))
            : Effect.map(humanLoop.answer(questionId, value, { sessionId: record.sessionId }), (request) => ({
              runId,
              questionId: request.questionId,
              sessionId: request.sessionId
            }))),
      running: Effect.sync(() => running),
      holdEventStream: Effect.acquireRelease(
        Effect.tap(Semaphore.takeIfAvailable(followers, 1), (taken) => Effect.sync(() => void (taken && following++))),
        (taken) => taken ? Effect.andThen(Effect.sync(() => void following--), Semaphore.release(followers, 1)) : Effect.void
      ).pipe(Effect.flatMap((taken) =>
        taken
          ? Effect.void
          : Effect.fail(new TooManyEventStreams({
            limit: maxEventStreams,
            retryAfterSeconds: 1,
            message: `${maxEventStreams} streams are following runs, the most this server keeps open at once: retry later`
          }))
      )),
      eventStreams: Effect.sync(() => following)
    })
  })

/**
 * `make` as a layer: the runs live as long as the layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Runs, never, Agents.Agents> => Layer.effect(Runs, make(options))
