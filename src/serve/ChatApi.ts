/**
 * A chat route for the AI SDK's `useChat` (DESIGN §12): `POST /agents/:name/chat` takes the body the SDK's chat
 * transport sends as it is (`DefaultChatTransport({ api: "/agents/assistant/chat" })`, no `prepareSendMessagesRequest`)
 * and answers with the run as the SDK's UI message stream (`UiMessageStream`). An `effect/http-api` group (`chat`),
 * mounted beside `RunsApi` by `valet serve`.
 *
 * - The body: `{id, messages, trigger, messageId}` (and whatever the transport's `body` option adds, ignored).
 *   `trigger` is `submit-message` or `regenerate-message`; both run on the messages sent, which the client has
 *   already cut to the turn to answer. Without a thread store, the chat `id` is not a session: each request is a run
 *   of its own.
 * - With a thread store (`Threads` given to `Runs`; `threads:` in `valet.yaml`), the chat `id` is a thread of the
 *   request's owner (`RunsApi.Owner`, the app's auth), created on first use: a request is a turn on it, its history
 *   the thread's, its input the last user message. The client's copy of earlier messages is not read (what the model
 *   reads is what the thread kept); another owner's chat id is 403 `ThreadForbidden`, a chat in another turn 409
 *   `ThreadBusy`, an id that cannot be a thread id 400. `regenerate-message` is then one more turn on the last user
 *   message (the thread keeps the earlier answer).
 * - The conversation: every message but the last is the run's `history`, in order; the last, which must be a user
 *   message, is the input. A system message's and a user message's text parts are one message; an assistant message
 *   is, per step (its parts split at `step-start`), one assistant message with the step's text, its reasoning and its
 *   tool calls (`tool-<name>` and `dynamic-tool` parts, arguments as JSON), each followed by its result: the output
 *   (a string as it is, else JSON), an `output-error`'s `errorText`, or for `output-denied` the rejection as the
 *   model read it (`ERROR: rejected: <reason>`). A call that never ended (the run was cancelled while it ran) is left
 *   out. `source-url`, `source-document` and `data-<name>` parts (valet's own `data-valet-subagent` included) are
 *   display data the model never read: skipped.
 * - Approvals (`HumanLoop`): a tool call that waits for a person is in the stream as the AI SDK's own approval
 *   (`tool-approval-request`, its `approvalId` `<runId>/<sessionId>/<toolCallId>`; a sub-agent's call gets a tool
 *   part of its own, `<sessionId>/<toolCallId>`), and the response ends (`finishReason: "tool-calls"`) once the run
 *   has nothing to do but wait; the run goes on waiting. `useChat`'s `addToolApprovalResponse` then sends the same
 *   body with that assistant message last, its tool parts `approval-responded` (with `sendAutomaticallyWhen:
 *   lastAssistantMessageIsCompleteWithApprovalResponses`, once every approval of the step is answered): each answer
 *   is `Runs.decide` on the run it names (the request's owner's), and the response continues the message from where
 *   it ended. A rejection reaches the model as `ERROR: rejected: <reason>`. An answer to no waiting call: 404
 *   `RunNotFound` / `NotWaiting`; decided already, 409 `AlreadyDecided`; an approval id this server did not give,
 *   400. Such an answer is refused before any other answer of the request is taken.
 * - Refused with 400 `BadRequest` naming the field: a body that does not decode (`payload: messages[0].role …`), a
 *   part that does not fit its type, the last message neither a user message nor an assistant message answering
 *   approvals, a `file` part that is not text, tool calls or reasoning in a user or system message, any other part
 *   type.
 * - The run goes through `Runs` like `POST /runs/stream`, as the request's owner's run: the agent's budget caps,
 *   `maxConcurrentRuns` (429 with `Retry-After`; a request answering approvals, which follows a run it did not
 *   start, `maxEventStreams`: 429 `TooManyEventStreams`, before any answer is taken), an unknown agent (404
 *   `UnknownAgent`); a client that goes away before the response ends cancels the run (a response that ended because
 *   the run waits does not). `valet serve`'s guard covers the route: the bearer token, the body cap (413), the Host /
 *   Origin allow-list.
 *
 * @example
 * ```ts
 * import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 * import { HttpApi, HttpApiBuilder } from "effect/http-api"
 * import { createServer } from "node:http"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as ChatApi from "valet/ChatApi"
 * import * as Runs from "valet/Runs"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * // The chat route in your own API (`valet serve` mounts it beside `RunsApi`): POST /api/agents/:name/chat.
 * const MyApi = HttpApi.make("app").add(ChatApi.group.prefix("/api"))
 *
 * const main = HttpApiBuilder.layer(MyApi).pipe(
 *   Layer.provide(ChatApi.layerFor(MyApi)),
 *   Layer.provide(Runs.layer()),
 *   Layer.provide(Agents.layer([assistant])),
 *   HttpRouter.serve,
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 8787, host: "127.0.0.1" })),
 *   Layer.launch
 * )
 *
 * // In the React app:
 * //   useChat({ transport: new DefaultChatTransport({ api: "/api/agents/assistant/chat" }) })
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Layer, Option, Result, Schema } from "effect"
import * as Threads from "../core/Threads.js"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import * as Request from "./internal/chat/request.js"
import { requireGroup } from "./internal/groupLayer.js"
import * as RunStream from "./internal/runStream.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"

// ---------------------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------------------

/**
 * A part of a UI message: its `type` and that type's keys (each part is checked against its type's keys when the
 * conversation is read).
 *
 * @since 0.2.0
 * @category models
 */
export const UiMessagePart = Request.UiMessagePart
/**
 * A part of a UI message.
 *
 * @since 0.2.0
 * @category models
 */
export type UiMessagePart = Request.UiMessagePart

/**
 * A UI message as `useChat` keeps it: `id`, `role` (`system`, `user`, `assistant`), `parts`.
 *
 * @since 0.2.0
 * @category models
 */
export const UiMessage = Request.UiMessage
/**
 * A UI message.
 *
 * @since 0.2.0
 * @category models
 */
export type UiMessage = Request.UiMessage

/**
 * The body the AI SDK's chat transport sends: `{id, messages, trigger, messageId}`; other keys are ignored.
 *
 * @since 0.2.0
 * @category models
 */
export const ChatRequest = Request.ChatRequest
/**
 * The body the AI SDK's chat transport sends.
 *
 * @since 0.2.0
 * @category models
 */
export type ChatRequest = Request.ChatRequest

/**
 * The group: `POST /agents/:name/chat`.
 *
 * @since 0.2.0
 * @category api
 */
export const group = HttpApiGroup.make("chat")
  .add(
    HttpApiEndpoint.post("chat", "/agents/:name/chat", {
      params: { name: Schema.String },
      payload: ChatRequest,
      // The run as the UI message stream (`UiMessageStream.headers`).
      success: HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" }),
      error: [RunsApi.BadRequest, Runs.UnknownAgent, Runs.TooManyRuns, Runs.TooManyEventStreams, Runs.InvalidRunRequest, ...RunsApi.threadErrors, ...RunsApi.decisionErrors]
    }).middleware(RunsApi.Owner)
  )
  .middleware(RunsApi.RequestErrors)

/**
 * An API of the group alone.
 *
 * @since 0.2.0
 * @category api
 */
export const Api = HttpApi.make("valet-chat").add(group)

// ---------------------------------------------------------------------------------------------------------
// Conversation → run
// ---------------------------------------------------------------------------------------------------------

/**
 * The run a chat request asks for on the agent `agent` (every message but the last as the history, the last user
 * message as the input), or the `BadRequest` naming what cannot be given to an agent.
 *
 * @since 0.2.0
 * @category conversation
 */
export const runRequestOf = (agent: string, request: ChatRequest): Result.Result<Runs.RunRequest, RunsApi.BadRequest> =>
  Result.mapError(Request.runRequestOf(agent, request), (message) => new RunsApi.BadRequest({ message }))

// ---------------------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------------------

const build = (handlers: Parameters<Parameters<typeof HttpApiBuilder.group<"valet-chat", typeof group, "chat", unknown>>[2]>[0]) =>
  Effect.gen(function*() {
    const runs = yield* Runs.Runs
    return handlers.handle("chat", ({ params, payload }) =>
      Effect.gen(function*() {
        const owner = yield* Effect.service(RunsApi.CurrentOwner)
        const answers = Request.approvalAnswersOf(payload)
        if (answers !== undefined) return yield* answer(runs, owner, yield* Effect.fromResult(Result.mapError(answers, (message) => new RunsApi.BadRequest({ message }))))
        const { runId } = yield* (Option.isSome(runs.threads) && payload.id !== undefined
          ? turn(runs, runs.threads.value, params.name, payload.id, payload)
          : Effect.flatMap(Effect.fromResult(runRequestOf(params.name, payload)), (request) => runs.start(request, { owner })))
        // The run was started just now: it is in the registry.
        return yield* Effect.orDie(RunStream.chatResponse(runs, runId, { owner }))
      }).pipe(Effect.catchTags({
        TooManyRuns: (error) => Effect.succeed(RunStream.tooMany(error)),
        TooManyEventStreams: (error) => Effect.succeed(RunStream.tooMany(error))
      })))
  })

/**
 * The answers to a run's approvals (`useChat`'s `addToolApprovalResponse`, sent once every approval of the step is
 * answered): each decided (`Runs.decide`, the request's owner's run), then the message continued from where it ended.
 * A refused answer (no such run, no such waiting call, decided already) fails the request; the answers decided
 * before it stay decided.
 */
const answer = (runs: Runs.Service, owner: string, request: Request.ApprovalAnswers) =>
  Effect.gen(function*() {
    // How far the run had got when the answers came: the message goes on from where it ended then.
    const before = yield* runs.get(request.runId, { owner })
    // The response follows a run this request did not start: one of `maxEventStreams` slots, held while the response
    // lasts, taken before any answer is (a 429 decides nothing).
    yield* runs.holdEventStream
    // An answer to no waiting call goes first: its refusal comes before any other answer is taken.
    const waiting = new Set((before.pending ?? []).map((call) => `${call.sessionId}/${call.toolCallId}`))
    const answers = [...request.answers].sort((a, b) =>
      Number(waiting.has(`${a.sessionId}/${a.toolCallId}`)) - Number(waiting.has(`${b.sessionId}/${b.toolCallId}`)))
    for (const { decision, sessionId, toolCallId } of answers) {
      yield* runs.decide(request.runId, toolCallId, decision, { owner, sessionId })
    }
    return yield* RunStream.chatResponse(runs, request.runId, { owner, continueAfter: before.events })
  })

/**
 * A chat request as a turn on the thread `id` (the request's owner's; created on first use): the last user message
 * is the input, the thread the history.
 */
const turn = (runs: Runs.Service, threads: Threads.Service, agent: string, id: string, payload: ChatRequest) =>
  Effect.gen(function*() {
    const problem = Threads.threadIdProblem(id)
    if (problem !== undefined) return yield* new RunsApi.BadRequest({ message: `payload: id: ${problem}` })
    const request = yield* Effect.fromResult(Result.mapError(Request.turnRequestOf(agent, payload), (message) => new RunsApi.BadRequest({ message })))
    const owner = yield* Effect.service(RunsApi.CurrentOwner)
    // First use: the thread is created for the owner. Two first requests at once: one creates it, the other finds it.
    const found = threads.get(id, { owner })
    yield* found.pipe(
      Effect.catchTag("ThreadNotFound", () =>
        Effect.catchTag(threads.create({ id, owner }), "ThreadStoreError", (error) =>
          // Made meanwhile by another request: found now. Else the store's own failure, not a 404.
          Effect.catch(found, () => Effect.fail(error))))
    )
    return yield* runs.startTurn(request, { id, owner })
  })

/**
 * The group's handlers (and its request-error middleware) for `api`, an `HttpApi` holding `group` (maybe under a
 * prefix), over `Runs`; `owner` finds a request's owner when the chat id is a thread (`RunsApi.LayerOptions`).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  options: RunsApi.LayerOptions = {}
): Layer.Layer<HttpApiGroup.Service<Id, "chat"> | RunsApi.RequestErrors, never, Runs.Runs> =>
  requireGroup("ChatApi", "chat", api, () =>
    HttpApiBuilder.group(api as unknown as typeof Api, "chat", build).pipe(
      Layer.provide(RunsApi.layerOwner(options.owner)),
      Layer.provideMerge(RunsApi.layerRequestErrors)
    )) as unknown as Layer.Layer<HttpApiGroup.Service<Id, "chat"> | RunsApi.RequestErrors, never, Runs.Runs>

/**
 * The group's handlers for `Api`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = layerFor(Api)
