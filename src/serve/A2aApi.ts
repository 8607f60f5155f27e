/**
 * A2A 1.0 (DESIGN §19): every served agent as an A2A agent, over the JSON-RPC binding, for any A2A client (the
 * official `@a2a-js/sdk` `ClientFactory`, other frameworks' clients). An `effect/http-api` group (`a2a`) mounted
 * beside `RunsApi` by `valet serve`, plus a one-route group (`a2aDiscovery`) for the root card.
 *
 * - `GET /a2a/:agent/.well-known/agent-card.json`: the agent's card; its one interface is `POST /a2a/:agent`,
 *   `JSONRPC`, protocol `1.0`. A client resolves it as a whole URL: `createFromUrl("<base>/a2a/<agent>/.well-known/agent-card.json", "")`
 *   (the SDK's resolver drops the path of a base URL given with a path of its own).
 * - `GET /.well-known/agent-card.json`: the card of the default agent (`defaultAgent`, else the first).
 * - `POST /a2a/:agent`: JSON-RPC 2.0. Methods: `SendMessage` (blocks until the task ends or waits for a person;
 *   `configuration.returnImmediately` answers at once), `SendStreamingMessage` (SSE: the task, then status and
 *   artifact updates, closing when it ends or waits), `GetTask`, `CancelTask` (idempotent on a canceled task),
 *   `SubscribeToTask` (the task as it is, then its updates: how a dropped stream is resumed; a dropped stream does
 *   not cancel the task), `ListTasks`. Push notifications (`-32003`) and the extended card (`-32004`) are not
 *   offered.
 *
 * A task is a run (taskId = runId: the run registry is the task store, with its owner scoping, its limits and its
 * retention; a task gone from it is `-32001`). Its context is the thread it is a turn of when the server has a
 * thread store, else the run's session, and a message naming a `contextId` is refused (`-32004`: the server keeps
 * no conversations). A `contextId` is the caller's own: the owner's thread of that id if it has one (a context this
 * server gave it), else the owner's thread kept for that contextId, made on first use; another owner's context is
 * a new conversation, never shared, refused or confirmed. A task's `history` is the messages the client sent
 * (as received, with their `messageId`s) and the agent's status messages, in order. A task waiting for
 * a person is `TASK_STATE_INPUT_REQUIRED`, its request in the status message as a data part (`kind: "approval"` or
 * `"question"`); the next message naming the `taskId` answers it: a data part `{approved, reason?, arguments?,
 * toolCallId?}` decides an approval, a data part `{answer, questionId?}` or text answers a question. A message
 * sent again (same `messageId`) answers nothing twice: it gets the task as it is.
 *
 * Every request needs `A2A-Version: 1.0` (header or query parameter): an A2A 0.3 client (no header, `message/send`)
 * gets `-32009`. Method errors come on HTTP 200 with a JSON-RPC error, as the SDK's own server sends them; the
 * server's own refusals keep their status (401 without the token, 413 over the body cap, 404 for an unknown agent,
 * 429 beyond `maxConcurrentRuns`, or beyond `maxEventStreams` for a `SubscribeToTask` or a continuation that follows a
 * task, with `Retry-After`), with a JSON-RPC error body the SDK client reads. Another owner's task, or another agent's
 * task asked at this agent, is `-32001`, as an unknown one. A request nesting more than 64 levels, or with a string id
 * over 128 characters, is `-32600`.
 *
 * @example
 * ```ts
 * import { Role } from "@a2a-js/sdk"
 * import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
 *
 * // Against `valet serve` with a token: the card and every call carry it.
 * const fetchImpl: typeof fetch = (url, init) =>
 *   fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: "Bearer secret" } })
 * const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
 *   transports: [new JsonRpcTransportFactory({ fetchImpl })],
 *   cardResolver: new DefaultAgentCardResolver({ fetchImpl })
 * }))
 * // The whole card URL, and "" as the path: the SDK's resolver drops a base URL's own path.
 * const client = await factory.createFromUrl("http://127.0.0.1:8787/a2a/assistant/.well-known/agent-card.json", "")
 * const task = await client.sendMessage({
 *   tenant: "",
 *   message: {
 *     messageId: crypto.randomUUID(),
 *     contextId: "", // a thread's id to continue it (with a thread store)
 *     taskId: "", // a waiting task's id to answer it
 *     role: Role.ROLE_USER,
 *     parts: [{ content: { $case: "text", value: "2 + 2?" }, metadata: undefined, filename: "", mediaType: "" }],
 *     metadata: undefined,
 *     extensions: [],
 *     referenceTaskIds: []
 *   },
 *   configuration: undefined,
 *   metadata: undefined
 * })
 * // task.status.state: TaskState.TASK_STATE_COMPLETED; the answer is the text of task.artifacts[0] ("output").
 * ```
 *
 * @since 0.2.0
 */
import { Clock, Effect, Layer, Option, Result, Schema, type Scope, Stream } from "effect"
import { type HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import type * as HumanLoop from "../core/HumanLoop.js"
import type * as Model from "../core/Model.js"
import * as Threads from "../core/Threads.js"
import * as Wire from "../providers/internal/a2a/wire.js"
import * as Agents from "./Agents.js"
import * as Card from "./internal/a2a/card.js"
import * as History from "./internal/a2a/history.js"
import * as Parts from "./internal/a2a/parts.js"
import * as Rpc from "./internal/a2a/rpc.js"
import * as Tasks from "./internal/a2a/task.js"
import { requireGroup } from "./internal/groupLayer.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"

// ---------------------------------------------------------------------------------------------------------
// Schemas and groups
// ---------------------------------------------------------------------------------------------------------

/**
 * A JSON-RPC 2.0 request to the endpoint (its params are decoded per method).
 *
 * @since 0.2.0
 * @category models
 */
export const JsonRpcRequest = Wire.JsonRpcRequest

/**
 * An agent card (the fields valet writes).
 *
 * @since 0.2.0
 * @category models
 */
export const AgentCard = Wire.AgentCard
/**
 * An agent card.
 *
 * @since 0.2.0
 * @category models
 */
export type AgentCard = Wire.AgentCard

/**
 * A task, as the methods answer it.
 *
 * @since 0.2.0
 * @category models
 */
export const Task = Wire.Task
/**
 * A task.
 *
 * @since 0.2.0
 * @category models
 */
export type Task = Wire.Task

const AgentParams = { agent: Schema.String }

/**
 * The group: each agent's card and JSON-RPC endpoint.
 *
 * @since 0.2.0
 * @category api
 */
export const group = HttpApiGroup.make("a2a").add(
  HttpApiEndpoint.get("agentCard", "/a2a/:agent/.well-known/agent-card.json", { params: AgentParams, success: Wire.AgentCard }),
  HttpApiEndpoint.post("rpc", "/a2a/:agent", {
    params: AgentParams,
    payload: Wire.JsonRpcRequest,
    // A JSON-RPC answer, or with SendStreamingMessage / SubscribeToTask an SSE stream of them.
    success: [Schema.Record(Schema.String, Schema.Unknown), HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })]
  })
)

/**
 * The root card (`/.well-known/agent-card.json`), the default agent's: a group of its own, so that an app mounting
 * `group` under a prefix can still serve discovery at its root.
 *
 * @since 0.2.0
 * @category api
 */
export const discoveryGroup = HttpApiGroup.make("a2aDiscovery").add(
  HttpApiEndpoint.get("rootCard", "/.well-known/agent-card.json", { success: Wire.AgentCard })
)

/**
 * An API of the two groups alone.
 *
 * @since 0.2.0
 * @category api
 */
export const Api = HttpApi.make("valet-a2a").add(group).add(discoveryGroup)

/**
 * How the groups serve.
 *
 * @since 0.2.0
 * @category options
 */
export interface LayerOptions {
  /** Finds the owner of a request (the app's auth): see `RunsApi.layerOwner`. Default: every request is `RunsApi.defaultOwner`'s. */
  readonly owner?: RunsApi.OwnerOf | undefined
  /** The URL clients reach the server at (behind a proxy): the cards' endpoint URLs start with it. Default: `http://<the Host's name>:<the port the request came in on>`. */
  readonly publicUrl?: string | undefined
  /** The agent of the root card. Default: the first agent. */
  readonly defaultAgent?: string | undefined
  /** The server needs a bearer token: the cards declare the scheme. */
  readonly bearer?: boolean | undefined
  /** The cards' `version`. Default `0.2.0`. */
  readonly version?: string | undefined
}

// ---------------------------------------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------------------------------------

type Response = HttpServerResponse.HttpServerResponse

const answer = (id: Wire.RequestId, result: unknown): Response => HttpServerResponse.jsonUnsafe(Rpc.resultBody(id, result))

/** A method's error: HTTP 200 with the JSON-RPC error, as the SDK's server sends it. */
const refuse = (id: Wire.RequestId, error: Rpc.RpcError, status = 200, headers?: Record<string, string>): Response =>
  HttpServerResponse.jsonUnsafe(Rpc.errorBody(id, error), { status, ...(headers !== undefined ? { headers } : {}) })

/** A method refused: its A2A error, and the HTTP status it goes with (200 but for the server's own limits). */
class Refused extends Schema.TaggedError<Refused>()("A2aRefused", {
  error: Rpc.RpcError,
  status: Schema.Int,
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String))
}) {}

const refused = (error: Rpc.RpcError, status = 200, headers?: Record<string, string>) =>
  Effect.fail(new Refused({ error, status, ...(headers !== undefined ? { headers } : {}) }))

const fromResult = <A>(result: Result.Result<A, Rpc.RpcError>): Effect.Effect<A, Refused> =>
  Result.isSuccess(result) ? Effect.succeed(result.success) : refused(result.failure)

const tooMany = (error: Runs.TooManyRuns | Runs.TooManyEventStreams) =>
  refused(
    new Rpc.RpcError({
      code: Wire.ErrorCode.internalError,
      message: `Internal error: too many ${error._tag === "TooManyRuns" ? "runs" : "event streams"}: ${error.message}`,
      data: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${error.retryAfterSeconds}s` }]
    }),
    429,
    { "retry-after": String(error.retryAfterSeconds) }
  )

/** An SSE answer (`Rpc.sseText`: the request's id on every frame, keep-alive comments). */
const sse = (id: Wire.RequestId, responses: Stream.Stream<Wire.StreamResponse>): Response =>
  HttpServerResponse.stream(Stream.encodeText(Rpc.sseText(id, responses)), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })

// ---------------------------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------------------------

/** The run of a task for this owner at this agent: another owner's, another agent's, or none is `-32001`. */
const viewOf = (runs: Runs.Service, id: string, owner: string, agent: string) =>
  runs.get(id, { owner }).pipe(
    Effect.filterOrFail((view) => view.agent === agent, () => new Runs.RunNotFound({ runId: id, message: "" })),
    Effect.catchTag("RunNotFound", () => refused(Rpc.taskNotFound(id)))
  )

interface Followed {
  /** The task as of the cut. */
  readonly snapshot: Wire.Task
  /** The responses after the cut, ending with the task's end or its wait for a person. */
  readonly live: Stream.Stream<Wire.StreamResponse>
}

/**
 * The task of a run folded from its first `cut` events, and the responses of the events after them. The mapping
 * is one for both, so the live part goes on from the state of the snapshot (no gap, no duplicate).
 */
const follow = (runs: Runs.Service, messages: History.Messages, view: Runs.RunView, owner: string, cut: number) =>
  Effect.gen(function*() {
    const ref = Tasks.refOf(view, owner)
    const mapper = new Tasks.Mapper(ref)
    const start = Tasks.started(ref, view, messages.first(ref.id))
    // The client's later messages go into the history where they came: before the events the run had not had yet.
    const later = messages.later(ref.id)
    let next = 0
    const received = (task: Wire.Task, events: number): Wire.Task => {
      while (next < later.length && later[next]!.at <= events) task = Tasks.withMessage(task, later[next++]!.message)
      return task
    }
    // The run is this owner's (`viewOf`): it may have left the registry since, which GetTask would answer as unknown.
    const before = yield* Effect.orDie(runs.events(ref.id, { owner }))
    let snapshot = yield* before.pipe(
      Stream.take(cut),
      Stream.runFold(() => start, (task, { event, seq }) => mapper.map(seq, event).responses.reduce(Tasks.apply, received(task, seq))),
      // A failed run's log ends with its failure, not an event.
      Effect.catchTag("RunFailed", (failure) => {
        next = 0
        return Effect.succeed(mapper.failed(failure, view.endedAt ?? view.createdAt).responses.reduce(Tasks.apply, received(start, cut)))
      })
    )
    snapshot = received(snapshot, cut)
    if (view.status === "failed" && cut >= view.events) {
      const failure = new Runs.RunFailed({ runId: ref.id, error: view.error ?? {}, message: String(view.error?.["message"] ?? "the run failed") })
      snapshot = mapper.failed(failure, view.endedAt ?? view.createdAt).responses.reduce(Tasks.apply, snapshot)
    }
    const after = yield* Effect.orDie(runs.events(ref.id, { owner, after: cut === 0 ? undefined : cut - 1 }))
    const live: Stream.Stream<Wire.StreamResponse> = after.pipe(
      Stream.map(({ event, seq }) => mapper.map(seq, event)),
      Stream.catchTag("RunFailed", (failure) => Stream.fromEffect(Effect.map(Clock.currentTimeMillis, (now) => mapper.failed(failure, now)))),
      Stream.takeUntil((mapped) => mapped.end),
      Stream.flatMap((mapped) => Stream.fromIterable(mapped.responses))
    )
    return { snapshot, live } satisfies Followed
  })

/** The task to its end (or its wait for a person): the live part folded into the snapshot. */
const settled = (followed: Followed) => Stream.runFold(followed.live, () => followed.snapshot, Tasks.apply)

const isTerminal = (task: Wire.Task) => Wire.terminalStates.has(task.status.state)

// ---------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------

const DataAnswer = Schema.Struct({ answer: Schema.Unknown, questionId: Schema.optional(Schema.String) })
const DataDecision = Schema.Struct({
  approved: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.Unknown),
  toolCallId: Schema.optional(Schema.String),
  sessionId: Schema.optional(Schema.String)
})

/** What a continuation message carries: its data part, else its text. */
const contentOf = (message: Wire.Message): { readonly data?: unknown; readonly text: string } => {
  const data = message.parts.find((part) => part.data !== undefined)
  return {
    ...(data !== undefined ? { data: data.data } : {}),
    text: message.parts.flatMap((part) => (part.text !== undefined ? [part.text] : [])).join("\n")
  }
}

const decideError = (error: HumanLoop.DecideError | Runs.RunNotFound, taskId: string) =>
  error._tag === "RunNotFound"
    ? refused(Rpc.taskNotFound(taskId))
    : error._tag === "InvalidDecision"
    ? refused(Rpc.invalidParams("message.parts", error.message))
    : refused(Rpc.unsupportedOperation(`the task takes input only in TASK_STATE_INPUT_REQUIRED: ${error.message}`))

/** The answer a continuation message gives to what the waiting run asked (one request, or the one it names). */
const answerWaiting = (runs: Runs.Service, view: Runs.RunView, owner: string, message: Wire.Message) =>
  Effect.gen(function*() {
    const waiting = Tasks.requestsOf(view)
    const content = contentOf(message)
    const decision = content.data === undefined ? undefined : Schema.decodeUnknownOption(DataDecision)(content.data)
    if (decision !== undefined && Option.isSome(decision)) {
      const approvals = waiting.filter((request) => request.kind === "approval")
      const named = decision.value.toolCallId
      const matching = named === undefined ? approvals : approvals.filter((request) => request.toolCallId === named && (decision.value.sessionId === undefined || request.sessionId === decision.value.sessionId))
      if (matching.length !== 1) {
        return yield* refused(Rpc.invalidParams("message.parts", matching.length === 0
          ? `no tool call${named !== undefined ? ` ${JSON.stringify(named)}` : ""} waits for approval (waiting: ${approvals.map((request) => request.toolCallId).join(", ") || "none"})`
          : `several tool calls wait for approval: name one with toolCallId (${matching.map((request) => request.toolCallId).join(", ")})`))
      }
      const call = matching[0]!
      const { approved, reason, arguments: args } = decision.value
      return yield* runs.decide(view.runId, call.toolCallId, {
        approved,
        ...(reason !== undefined ? { reason } : {}),
        ...(args !== undefined ? { arguments: args as HumanLoop.Decision["arguments"] } : {})
      }, { owner, sessionId: call.sessionId }).pipe(Effect.asVoid, Effect.catch((error) => decideError(error, view.runId)))
    }
    const questions = waiting.filter((request) => request.kind === "question")
    const given = content.data === undefined ? undefined : Schema.decodeUnknownOption(DataAnswer)(content.data)
    const named = given !== undefined && Option.isSome(given) ? given.value.questionId : undefined
    const matching = named === undefined ? questions : questions.filter((request) => request.questionId === named)
    if (matching.length !== 1) {
      return yield* refused(Rpc.invalidParams("message.parts", matching.length === 0
        ? `no question${named !== undefined ? ` ${JSON.stringify(named)}` : ""} waits for an answer, and the message is no decision {"approved": …} (waiting: ${waiting.map((request) => request.kind === "approval" ? `approval ${request.toolCallId}` : `question ${request.questionId}`).join(", ") || "none"})`
        : `several questions wait for an answer: name one with questionId (${matching.map((request) => request.questionId).join(", ")})`))
    }
    const question = matching[0]!
    let value: unknown
    if (given !== undefined && Option.isSome(given)) {
      value = given.value.answer
    } else if (content.data !== undefined) {
      value = content.data
    } else {
      const stringSchema = typeof question.schema === "object" && question.schema !== null && (question.schema as { readonly type?: unknown }).type === "string"
      if (stringSchema) {
        value = content.text
      } else {
        try {
          value = JSON.parse(content.text)
        } catch {
          value = content.text
        }
      }
    }
    return yield* runs.answer(view.runId, question.questionId, value, { owner }).pipe(Effect.asVoid, Effect.catch((error) => decideError(error, view.runId)))
  })

// ---------------------------------------------------------------------------------------------------------
// The endpoint
// ---------------------------------------------------------------------------------------------------------

interface Call {
  readonly id: Wire.RequestId
  readonly params: unknown
  readonly agent: Agents.Entry
  readonly owner: string
}

const make = (runs: Runs.Service) => {
  const messages = new History.Messages()
  /** One of `maxEventStreams` slots for a response that follows a task, held until the request's scope closes. */
  const holdEventStream = Effect.catchTag(runs.holdEventStream, "TooManyEventStreams", tooMany)
  /**
   * The snapshots of ended tasks, which no longer change: GetTask and ListTasks fold an ended run's log (50 000
   * events for a long answer) once, not at every poll. Bounded: the oldest forgotten first (then folded again).
   */
  const endedSnapshots = new Map<string, Wire.Task>()
  const maxEndedSnapshots = 200
  const snapshotOf = (view: Runs.RunView, owner: string) =>
    Effect.gen(function*() {
      const ended = view.status === "completed" || view.status === "failed"
      const key = `${owner}\u0000${view.runId}`
      const kept = ended ? endedSnapshots.get(key) : undefined
      if (kept !== undefined) return kept
      const { snapshot } = yield* follow(runs, messages, view, owner, view.events)
      if (ended) {
        endedSnapshots.set(key, snapshot)
        if (endedSnapshots.size > maxEndedSnapshots) endedSnapshots.delete(endedSnapshots.keys().next().value!)
      }
      return snapshot
    })
  /** A started (or continued) task answered as the method asks: streamed, settled, or at once. */
  const respond = (call: Call, view: Runs.RunView, cut: number, options: { readonly stream: boolean; readonly immediately: boolean; readonly historyLength: number | undefined; readonly resumed: boolean; readonly snapshotOnly?: boolean }) =>
    Effect.gen(function*() {
      const followed = yield* follow(runs, messages, view, call.owner, cut)
      // A continued task is working again: the snapshot is of the moment the answer was given.
      const snapshot: Wire.Task = options.resumed && !isTerminal(followed.snapshot)
        ? { ...followed.snapshot, status: { state: "TASK_STATE_WORKING", timestamp: new Date(yield* Clock.currentTimeMillis).toISOString() } }
        : followed.snapshot
      if (options.stream) {
        return sse(call.id, Stream.concat(Stream.succeed<Wire.StreamResponse>({ task: snapshot }), options.snapshotOnly === true ? Stream.empty : followed.live))
      }
      if (options.immediately) return answer(call.id, { task: Tasks.withHistoryLength(snapshot, options.historyLength) })
      const task = yield* Stream.runFold(followed.live, () => snapshot, Tasks.apply)
      return answer(call.id, { task: Tasks.withHistoryLength(task, options.historyLength) })
    })

  const sendMessage = (call: Call, stream: boolean) =>
    Effect.gen(function*() {
      const params = yield* fromResult(Rpc.paramsOf(Wire.SendMessageRequest, call.params))
      const { message } = params
      if (message.role !== "ROLE_USER") return yield* refused(Rpc.invalidParams("message.role", `a client's message has role ROLE_USER, not ${message.role}`))
      if (message.messageId === "") return yield* refused(Rpc.invalidParams("message.messageId", "a message needs its messageId"))
      const options = {
        stream,
        immediately: params.configuration?.returnImmediately === true,
        historyLength: params.configuration?.historyLength,
        resumed: false
      }
      if (message.taskId !== undefined && message.taskId !== "") {
        // A continuation: the answer to what the task waits for.
        const view = yield* viewOf(runs, message.taskId, call.owner, call.agent.name)
        const ref = Tasks.refOf(view, call.owner)
        if (messages.has(ref.id, message.messageId)) {
          // A retry of a message the task has (same messageId) answers nothing again (it might answer the next
          // question): it gets the task as it is, or as it goes on to its end or its next wait.
          const settledNow = view.status !== "running"
          if (!settledNow && (options.stream || !options.immediately)) yield* holdEventStream
          return yield* respond(call, view, view.events, { ...options, immediately: options.immediately || settledNow, snapshotOnly: settledNow })
        }
        if (view.status === "completed" || view.status === "failed") {
          return yield* refused(Rpc.unsupportedOperation(`task ${JSON.stringify(ref.id)} has ended: a task in a terminal state takes no more messages`))
        }
        if (message.contextId !== undefined && message.contextId !== "" && message.contextId !== ref.contextId) {
          return yield* refused(Rpc.invalidParams("message.contextId", `task ${JSON.stringify(ref.id)} is of context ${JSON.stringify(ref.contextId)}, not ${JSON.stringify(message.contextId)}`))
        }
        if (view.status !== "waiting") {
          return yield* refused(Rpc.unsupportedOperation(`task ${JSON.stringify(ref.id)} is working: it takes input only in TASK_STATE_INPUT_REQUIRED`))
        }
        // The answer follows a task this request did not start: one of `maxEventStreams` slots while it lasts, taken
        // before the message is (a 429 answers nothing).
        if (options.stream || !options.immediately) yield* holdEventStream
        // The message as received joins the task's history. A retry got the task as it is just above.
        if (!messages.add(ref.id, { ...message, taskId: ref.id, contextId: ref.contextId }, view.events)) {
          return yield* refused(Rpc.unsupportedOperation(`task ${JSON.stringify(ref.id)} has a message ${JSON.stringify(message.messageId.slice(0, 200))} already`))
        }
        yield* answerWaiting(runs, view, call.owner, message).pipe(Effect.onError(() => Effect.sync(() => messages.remove(ref.id, message.messageId))))
        return yield* respond(call, view, view.events, { ...options, resumed: true })
      }
      const input = yield* fromResult(Parts.inputOf(message))
      const contextId = message.contextId !== undefined && message.contextId !== "" ? message.contextId : undefined
      const start: Effect.Effect<{ readonly runId: string }, Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | Refused> =
        Option.isSome(runs.threads)
          ? turn(runs, runs.threads.value, call, input, contextId)
          : contextId !== undefined
          ? refused(Rpc.unsupportedOperation(`this server keeps no conversations (no thread store: threads: in valet.yaml), so it cannot continue context ${JSON.stringify(contextId.slice(0, 200))}: send the message without a contextId`))
          : runs.start({ agent: call.agent.name, input }, { owner: call.owner })
      const started = yield* start.pipe(
          Effect.catchTags({
            TooManyRuns: tooMany,
            InvalidRunRequest: (error) => refused(Rpc.invalidParams("message", error.message)),
            UnknownAgent: (error) => Effect.die(error)
          })
        )
      messages.started(started.runId, message)
      const view = yield* Effect.orDie(runs.get(started.runId, { owner: call.owner }))
      return yield* respond(call, view, 0, options)
    })

  const turn = (runs: Runs.Service, threads: Threads.Service, call: Call, input: string | ReadonlyArray<Model.Part>, contextId: string | undefined) =>
    Effect.gen(function*() {
      const owner = call.owner
      let id: string
      if (contextId === undefined) {
        id = (yield* threads.create({ owner }).pipe(Effect.catch((error) => refused(Rpc.internalError(error.message))))).id
      } else {
        const problem = Threads.threadIdProblem(contextId) ??
          (contextId.length > Tasks.maxContextIdLength ? `a contextId is at most ${Tasks.maxContextIdLength} characters` : undefined)
        if (problem !== undefined) return yield* refused(Rpc.invalidParams("message.contextId", problem))
        // The owner's own thread of that id (one this server gave out, or one made through /threads), else the
        // owner's thread of that contextId: never another owner's, so an id can be neither squatted nor probed.
        const own = yield* threads.get(contextId, { owner }).pipe(
          Effect.as(true),
          Effect.catchTags({
            ThreadNotFound: () => Effect.succeed(false),
            ThreadForbidden: () => Effect.succeed(false),
            ThreadBusy: () => Effect.succeed(true),
            ThreadStoreError: (error) => refused(Rpc.internalError(error.message))
          })
        )
        id = own ? contextId : Tasks.contextThreadId(owner, contextId)
        // First use: the context's thread is made for the owner. Two first messages at once: one makes it, the other finds it.
        const found = threads.get(id, { owner })
        yield* found.pipe(
          Effect.catchTag("ThreadNotFound", () => Effect.catchTag(threads.create({ id, owner }), "ThreadStoreError", (error) => Effect.catch(found, () => Effect.fail(error)))),
          Effect.catchTags({
            ThreadForbidden: () => refused(Rpc.taskNotFound(id)),
            ThreadBusy: (error) => refused(Rpc.unsupportedOperation(`context ${JSON.stringify(id)} has a task working: ${error.message}`)),
            ThreadStoreError: (error) => refused(Rpc.internalError(error.message))
          })
        )
      }
      return yield* runs.startTurn({ agent: call.agent.name, input }, { id, owner }).pipe(
        Effect.catchTags({
          ThreadForbidden: () => refused(Rpc.taskNotFound(id)),
          ThreadNotFound: () => refused(Rpc.taskNotFound(id)),
          ThreadBusy: (error) => refused(Rpc.unsupportedOperation(`context ${JSON.stringify(id)} has a task working: ${error.message}`)),
          ThreadStoreError: (error) => refused(Rpc.internalError(error.message)),
          ThreadsUnavailable: (error) => refused(Rpc.unsupportedOperation(error.message))
        })
      )
    })

  const getTask = (call: Call) =>
    Effect.gen(function*() {
      const params = yield* fromResult(Rpc.paramsOf(Wire.GetTaskRequest, call.params))
      const view = yield* viewOf(runs, params.id, call.owner, call.agent.name)
      const snapshot = yield* snapshotOf(view, call.owner)
      return answer(call.id, Tasks.withHistoryLength(snapshot, params.historyLength))
    })

  const cancelTask = (call: Call) =>
    Effect.gen(function*() {
      const params = yield* fromResult(Rpc.paramsOf(Wire.CancelTaskRequest, call.params))
      const view = yield* viewOf(runs, params.id, call.owner, call.agent.name)
      const followed = yield* follow(runs, messages, view, call.owner, view.events)
      if (isTerminal(followed.snapshot)) {
        // Canceling a canceled task answers it again (spec §3.3.1); any other end cannot be undone.
        return followed.snapshot.status.state === "TASK_STATE_CANCELED"
          ? answer(call.id, followed.snapshot)
          : yield* refused(Rpc.taskNotCancelable(params.id, followed.snapshot.status.state))
      }
      yield* runs.cancel(params.id, { owner: call.owner }).pipe(Effect.catchTag("RunNotFound", () => refused(Rpc.taskNotFound(params.id))))
      const ended = yield* settled(followed)
      // The run may have ended on its own between the look above and the cancel (which leaves an ended run as it
      // is): a task that completed, failed or was rejected was not canceled, whatever was asked.
      return ended.status.state === "TASK_STATE_CANCELED" || !isTerminal(ended)
        ? answer(call.id, ended)
        : yield* refused(Rpc.taskNotCancelable(params.id, ended.status.state))
    })

  const subscribe = (call: Call) =>
    Effect.gen(function*() {
      const params = yield* fromResult(Rpc.paramsOf(Wire.SubscribeToTaskRequest, call.params))
      const view = yield* viewOf(runs, params.id, call.owner, call.agent.name)
      // A subscriber follows a task it did not start: one of `maxEventStreams` slots while its stream lasts, taken
      // before the task's log is folded (a refused subscriber costs no fold). A task found waiting or ended below
      // gives it back with its short answer.
      if (view.status === "running") yield* holdEventStream
      const followed = yield* follow(runs, messages, view, call.owner, view.events)
      if (isTerminal(followed.snapshot)) {
        return yield* refused(Rpc.unsupportedOperation(`task ${JSON.stringify(params.id)} is ${followed.snapshot.status.state}: a task in a terminal state has no updates to subscribe to`))
      }
      // A task waiting for a person gets its snapshot and the stream closes, as a live stream closes when it starts waiting.
      const waiting = followed.snapshot.status.state === "TASK_STATE_INPUT_REQUIRED"
      // One that was waiting when looked at and is working again by now follows it too.
      if (!waiting && view.status !== "running") yield* holdEventStream
      const live = waiting ? Stream.empty : followed.live
      return sse(call.id, Stream.concat(Stream.succeed<Wire.StreamResponse>({ task: followed.snapshot }), live))
    })

  const listTasks = (call: Call) =>
    Effect.gen(function*() {
      const params = yield* fromResult(Rpc.paramsOf(Wire.ListTasksRequest, call.params))
      if (params.pageSize !== undefined && (params.pageSize < 1 || params.pageSize > 100)) {
        return yield* refused(Rpc.invalidParams("pageSize", "pageSize is from 1 to 100"))
      }
      if (params.pageToken !== undefined && params.pageToken !== "" && !/^\d+$/.test(params.pageToken)) {
        return yield* refused(Rpc.invalidParams("pageToken", "not a page token this server gave"))
      }
      const after = params.statusTimestampAfter !== undefined && params.statusTimestampAfter !== "" ? Date.parse(params.statusTimestampAfter) : undefined
      if (after !== undefined && Number.isNaN(after)) {
        return yield* refused(Rpc.invalidParams("statusTimestampAfter", `not an ISO-8601 timestamp: ${JSON.stringify(params.statusTimestampAfter!.slice(0, 100))}`))
      }
      const wanted = params.status !== undefined && params.status !== "TASK_STATE_UNSPECIFIED" ? params.status : undefined
      const context = params.contextId !== undefined && params.contextId !== "" ? params.contextId : undefined
      // Run by run (the registry's own pages are of every agent's runs): the token is the registry's cursor after
      // the last run of the page, so that a page holds `pageSize` of this agent's tasks and the next goes on after
      // it. The scan goes on past the page to count the tasks that match (`totalSize`, from this page on); a run's
      // log is folded only where the answer needs it: for the page, or to tell a state or a time the summary does not.
      const pageSize = params.pageSize ?? 50
      const tasks: Array<Wire.Task> = []
      let total = 0
      let nextPageToken = ""
      let cursor = params.pageToken !== undefined && params.pageToken !== "" ? params.pageToken : undefined
      let more = true
      while (more) {
        const page = yield* runs.list({ owner: call.owner, limit: 1, ...(cursor !== undefined ? { cursor } : {}) })
        cursor = page.nextCursor
        more = cursor !== undefined
        const summary = page.runs[0]
        if (summary === undefined || summary.agent !== call.agent.name) continue
        // The state from the summary, before any fold (a run's log can be 50 000 events).
        const states = Tasks.statesOf(summary)
        if (wanted !== undefined && !states.includes(wanted)) continue
        const view = yield* Effect.option(runs.get(summary.runId, { owner: call.owner }))
        if (Option.isNone(view)) continue
        if (context !== undefined && Tasks.refOf(view.value, call.owner).contextId !== context) continue
        const full = tasks.length >= pageSize
        if (full && after === undefined && (wanted === undefined || states.length === 1)) {
          total++
          continue
        }
        const snapshot = yield* snapshotOf(view.value, call.owner)
        if (wanted !== undefined && snapshot.status.state !== wanted) continue
        if (after !== undefined && !(Date.parse(snapshot.status.timestamp ?? "") >= after)) continue
        total++
        if (full) continue
        const shown = Tasks.withHistoryLength(snapshot, params.historyLength)
        tasks.push(params.includeArtifacts === true ? shown : Tasks.withoutArtifacts(shown))
        if (tasks.length === pageSize && more) nextPageToken = cursor ?? ""
      }
      // A token only when a task matches after this page.
      return answer(call.id, { tasks, nextPageToken: total > tasks.length ? nextPageToken : "", pageSize, totalSize: total })
    })

  // Scoped: a response that follows a task holds its `maxEventStreams` slot until the request's scope closes.
  return (call: Call, method: string): Effect.Effect<Response, Refused, Scope.Scope> => {
    switch (method) {
      case "SendMessage":
        return sendMessage(call, false)
      case "SendStreamingMessage":
        return sendMessage(call, true)
      case "GetTask":
        return getTask(call)
      case "CancelTask":
        return cancelTask(call)
      case "SubscribeToTask":
        return subscribe(call)
      case "ListTasks":
        return listTasks(call)
      case "CreateTaskPushNotificationConfig":
      case "GetTaskPushNotificationConfig":
      case "ListTaskPushNotificationConfigs":
      case "DeleteTaskPushNotificationConfig":
        return refused(Rpc.pushNotificationNotSupported())
      case "GetExtendedAgentCard":
        return refused(Rpc.unsupportedOperation("this agent has no extended card (capabilities.extendedAgentCard is false)"))
      default:
        return refused(Rpc.methodNotFound(method))
    }
  }
}

/**
 * Whether reading the body failed on the server's body cap: a body without Content-Length (chunked) is cut while
 * read, and the Node server says so as a `RequestParseError` of reason `BodyTooLarge` (its cause the stream's
 * `MaxBytesError`); a body announcing its length is refused by the guard before.
 */
const bodyTooLarge = (error: HttpServerError.HttpServerError): boolean => {
  if (error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge") return true
  // Another server (or another copy of the Node stream, where `instanceof` fails) may give only the cause.
  let cause: unknown = error.reason
  for (let depth = 0; depth < 8 && typeof cause === "object" && cause !== null; depth++) {
    if ((cause as { readonly _tag?: unknown })._tag === "MaxBytesError") return true
    cause = (cause as { readonly cause?: unknown }).cause
  }
  return false
}

/** The JSON-RPC endpoint of `agentName`. */
const endpoint = (
  agents: Agents.Service,
  ownerOf: RunsApi.OwnerOf,
  dispatch: ReturnType<typeof make>,
  agentName: string,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<Response, never, Scope.Scope> =>
  Effect.gen(function*() {
    const agent = agents.get(agentName)
    if (agent === undefined) {
      return refuse(null, Rpc.invalidRequest(`no agent ${JSON.stringify(agentName.slice(0, 100))} here (agents: ${agents.list.map((entry) => entry.name).join(", ")})`), 404)
    }
    const text = yield* Effect.result(request.text)
    if (Result.isFailure(text)) {
      return bodyTooLarge(text.failure)
        ? refuse(null, Rpc.invalidRequest("the request body is more than this server's limit"), 413)
        : refuse(null, Rpc.parseError("the request body could not be read"), 400)
    }
    // The id first, so that even the version's refusal answers it.
    let id: Wire.RequestId = null
    try {
      id = Rpc.idOf(JSON.parse(text.success))
    } catch {
      // Not JSON: `envelopeOf` says so below, after the version.
    }
    const version = Rpc.versionProblem(request.headers[Wire.versionHeader.toLowerCase()], request.url)
    if (version !== undefined) return refuse(id, version)
    const envelope = Rpc.envelopeOf(text.success)
    if (Result.isFailure(envelope)) return refuse(envelope.failure.id, envelope.failure.error)
    const owner = yield* Effect.result(Effect.provideService(ownerOf, HttpServerRequest.HttpServerRequest, request))
    if (Result.isFailure(owner)) {
      return refuse(envelope.success.id ?? null, Rpc.invalidRequest(owner.failure.message), 401, { "www-authenticate": "Bearer" })
    }
    const call: Call = { id: envelope.success.id ?? null, params: envelope.success.params, agent, owner: owner.success }
    return yield* dispatch(call, envelope.success.method).pipe(Effect.catch((refusal) => Effect.succeed(refuse(call.id, refusal.error, refusal.status, refusal.headers))))
  })

// ---------------------------------------------------------------------------------------------------------
// Layers
// ---------------------------------------------------------------------------------------------------------

const cardResponse = (card: Wire.AgentCard): Response =>
  // The card's URL comes from the Host: a cache must not give one Host's card for another.
  HttpServerResponse.jsonUnsafe(card, { headers: { "cache-control": "no-cache", vary: "Host" } })

/**
 * Where the server is, as a client reached it: `publicUrl`, else the (allow-listed) Host's name, parsed, over
 * http, with the port the connection came in on. The Host's own port or anything else in it is not echoed: a card
 * is what a client (and its token) goes to next, and a cache in between would keep a spoofed one.
 */
const originOf = (request: HttpServerRequest.HttpServerRequest, options: LayerOptions): string => {
  if (options.publicUrl !== undefined) return options.publicUrl.replace(/\/+$/, "")
  let parsed: URL | undefined
  try {
    parsed = new URL(`http://${request.headers["host"] ?? "localhost"}`)
  } catch {
    parsed = undefined
  }
  const hostname = parsed?.hostname ?? "localhost"
  const local = (request.source as { readonly socket?: { readonly localPort?: unknown } } | undefined)?.socket?.localPort
  const port = typeof local === "number" ? String(local) : parsed?.port ?? ""
  return `http://${hostname}${port === "" || port === "80" ? "" : `:${port}`}`
}

/** The endpoint path of `agent` in `api` (under the group's prefix, if any). */
const endpointPath = (api: { readonly groups: object }, agent: string): string => {
  const groups = api.groups as Record<string, { readonly endpoints: Record<string, { readonly path: string }> }>
  const path = groups["a2a"]?.endpoints["rpc"]?.path ?? "/a2a/:agent"
  return path.replace(":agent", encodeURIComponent(agent))
}

/**
 * The groups' handlers for `api` (an `HttpApi` holding `group`, and maybe `discoveryGroup`), over `Runs` and
 * `Agents`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  options: LayerOptions = {}
): Layer.Layer<HttpApiGroup.Service<Id, "a2a"> | HttpApiGroup.Service<Id, "a2aDiscovery">, never, Runs.Runs | Agents.Agents> => {
  const ownerOf: RunsApi.OwnerOf = options.owner ?? Effect.succeed(RunsApi.defaultOwner)
  const cardOptions = { bearer: options.bearer === true, version: options.version ?? "0.2.0" }
  const a2a = requireGroup("A2aApi", "a2a", api, () =>
    HttpApiBuilder.group(api as unknown as typeof Api, "a2a", (handlers) =>
      Effect.gen(function*() {
        const runs = yield* Runs.Runs
        const agents = yield* Agents.Agents
        const dispatch = make(runs)
        return handlers
          .handleRaw("agentCard", ({ params, request }) => {
            const entry = agents.get(params.agent)
            if (entry === undefined) {
              return Effect.succeed(HttpServerResponse.jsonUnsafe({ _tag: "UnknownAgent", agent: params.agent, message: `no agent ${JSON.stringify(params.agent)}` }, { status: 404 }))
            }
            return Effect.succeed(cardResponse(Card.cardOf(entry, `${originOf(request, options)}${endpointPath(api, entry.name)}`, cardOptions)))
          })
          .handleRaw("rpc", ({ params, request }) => endpoint(agents, ownerOf, dispatch, params.agent, request))
      })))
  const discovery = "a2aDiscovery" in api.groups
    ? HttpApiBuilder.group(api as unknown as typeof Api, "a2aDiscovery", (handlers) =>
      Effect.map(Effect.service(Agents.Agents), (agents) =>
        handlers.handleRaw("rootCard", ({ request }) => {
          const entry = options.defaultAgent !== undefined ? agents.get(options.defaultAgent) : agents.list[0]
          if (entry === undefined) {
            return Effect.succeed(HttpServerResponse.jsonUnsafe({
              _tag: "NotFound",
              message: options.defaultAgent !== undefined
                ? `the root card is of the agent ${JSON.stringify(options.defaultAgent)} (a2a.defaultAgent), which this server does not have`
                : "this server has no agents"
            }, { status: 404 }))
          }
          return Effect.succeed(cardResponse(Card.cardOf(entry, `${originOf(request, options)}${endpointPath(api, entry.name)}`, cardOptions)))
        })))
    : Layer.empty
  return Layer.mergeAll(a2a, discovery) as unknown as Layer.Layer<
    HttpApiGroup.Service<Id, "a2a"> | HttpApiGroup.Service<Id, "a2aDiscovery">,
    never,
    Runs.Runs | Agents.Agents
  >
}

/**
 * The groups' handlers for `Api`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = layerFor(Api)

