/**
 * The `useChat` route, driven by the AI SDK's own client code: `DefaultChatTransport.sendMessages` (what `useChat`
 * calls) sends its body as it is to `POST /agents/:name/chat` on a loopback `Server.layerNode`, and
 * `readUIMessageStream` folds the answer into the message `useChat` renders. The agents run on scripted models whose
 * requests the tests read back, so what reaches the model from the UI messages is checked as sent. Then once in
 * headless Chromium: a React page on `useChat` from `@ai-sdk/react` (test/support/chatPage.jsx, the README's front
 * end), bundled with esbuild and served beside valet's routes, where a message is typed, sent and answered. Without
 * Chromium the browser test is skipped, unless VALET_REQUIRE_CHROMIUM=1 (CI), where it fails.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream, type UIMessage } from "ai"
import * as AiV7 from "ai-v7"
import { Context, Effect, Layer, Result, Schema } from "effect"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as esbuild from "esbuild"
import { createServer } from "node:http"
import { join } from "node:path"
import { chromium } from "playwright-core"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as Agents from "../../src/serve/Agents.js"
import * as ChatApi from "../../src/serve/ChatApi.js"
import * as ChatRequestOf from "../../src/serve/internal/chat/request.js"
import * as Server from "../../src/serve/Server.js"
import { chromiumPath, chromiumRequired, chromiumUnavailable } from "../support/chromium.js"
import { serveAgents } from "../support/serve.js"

const haveChromium = chromiumUnavailable === undefined

const add = Tool.make({
  name: "add",
  description: "Adds two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(String(a + b))
})

/** An agent on a scripted model (one script over all its runs) whose requests the test reads back. */
const inspected = (name: string, script: ScriptedModel.Script, tools: ReadonlyArray<Tool.Tool> = []) => {
  const context = ScriptedModel.context(script)
  const agent = Agent.make({
    name,
    instructions: "Be brief.",
    tools,
    model: Layer.succeed(Model.Model, Context.get(context, Model.Model))
  }) as Agent.Agent<never>
  return { agent, calls: ScriptedModel.calls.pipe(Effect.provide(context)) }
}

const user = (id: string, text: string): UIMessage => ({ id, role: "user", parts: [{ type: "text", text }] })

/** One `useChat` turn: the transport sends the messages, the answer is read into the message `useChat` shows. */
const turn = (
  api: string,
  messages: ReadonlyArray<UIMessage>,
  options: { headers?: Record<string, string>; signal?: AbortSignal; chatId?: string } = {}
) =>
  Effect.promise(async () => {
    const transport = new DefaultChatTransport<UIMessage>({ api, ...(options.headers !== undefined ? { headers: options.headers } : {}) })
    const stream = await transport.sendMessages({
      trigger: "submit-message",
      chatId: options.chatId ?? "chat-1",
      messageId: undefined,
      messages: [...messages],
      abortSignal: options.signal
    })
    let message: UIMessage | undefined
    const errors: Array<unknown> = []
    for await (const state of readUIMessageStream<UIMessage>({ stream, onError: (error) => void errors.push(error) })) message = state
    return { message: message!, errors }
  })

/** What the transport throws when the route refuses (its message is the response's body). */
const refusal = (api: string, messages: ReadonlyArray<UIMessage>, headers?: Record<string, string>) =>
  Effect.promise(() =>
    Effect.runPromise(turn(api, messages, headers !== undefined ? { headers } : {})).then(
      () => undefined,
      (error: unknown) => JSON.parse((error as Error).message) as { _tag: string; message: string }
    )
  )

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

const textOf = (message: UIMessage) =>
  message.parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text).join("")

describe("ChatApi (the AI SDK's chat transport as the client)", () => {
  it.live("a first message: DefaultChatTransport's own body runs the agent, the answer streams back as one message", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Paris."])
      const url = yield* serveAgents([assistant.agent])
      const { message, errors } = yield* turn(`${url}/agents/assistant/chat`, [user("u1", "Capital of France?")])
      expect(errors).toEqual([])
      expect(message.role).toBe("assistant")
      expect(textOf(message)).toBe("Paris.")
      expect(message.metadata).toMatchObject({ modelCalls: 1, interrupted: false })
      const [request] = yield* assistant.calls
      expect(request!.messages).toEqual([Model.system("Be brief."), Model.user("Capital of France?")])
      // The route is in the server's OpenAPI document.
      const openapi = yield* Effect.promise(() => fetch(`${url}/openapi.json`).then((response) => response.json() as Promise<{ paths: object }>))
      expect(Object.keys(openapi.paths)).toContain("/agents/{name}/chat")
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK 7's transport sends the same body: answered the same way", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Paris.", "About 2.1 million."])
      const url = yield* serveAgents([assistant.agent])
      const transport = new AiV7.DefaultChatTransport<AiV7.UIMessage>({ api: `${url}/agents/assistant/chat` })
      const send = (messages: Array<AiV7.UIMessage>) =>
        Effect.promise(async () => {
          const stream = await transport.sendMessages({ trigger: "submit-message", chatId: "chat-7", messageId: undefined, messages, abortSignal: undefined })
          let message: AiV7.UIMessage | undefined
          for await (const state of AiV7.readUIMessageStream<AiV7.UIMessage>({ stream })) message = state
          return message!
        })
      const first: AiV7.UIMessage = { id: "u1", role: "user", parts: [{ type: "text", text: "Capital of France?" }] }
      const answer = yield* send([first])
      const second = yield* send([first, answer, { id: "u2", role: "user", parts: [{ type: "text", text: "How many people?" }] }])
      expect(second.parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text)).toEqual(["About 2.1 million."])
      const calls = yield* assistant.calls
      expect(calls[1]!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("Capital of France?"),
        Model.assistant("Paris."),
        Model.user("How many people?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("a second turn: the first turn's messages, as useChat keeps them, reach the model as the history", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Paris.", "About 2.1 million."])
      const url = yield* serveAgents([assistant.agent])
      const api = `${url}/agents/assistant/chat`
      const first = user("u1", "Capital of France?")
      const answer = (yield* turn(api, [first])).message
      const { message } = yield* turn(api, [first, answer, user("u2", "How many people live there?")])
      expect(textOf(message)).toBe("About 2.1 million.")
      const [, second] = yield* assistant.calls
      expect(second!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("Capital of France?"),
        Model.assistant("Paris."),
        Model.user("How many people live there?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("tool parts: a turn's tool call and its output reach the next turn's model as a tool call and its result", () =>
    Effect.gen(function*() {
      const calculator = inspected(
        "calculator",
        [{ toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }] }, "The sum is 5.", "10."],
        [add]
      )
      const url = yield* serveAgents([calculator.agent])
      const api = `${url}/agents/calculator/chat`
      const first = user("u1", "2 + 3?")
      const answer = (yield* turn(api, [first])).message
      // useChat shows the call with its input and output, then the answer.
      expect(answer.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({
        toolName: "add",
        toolCallId: "call_1",
        state: "output-available",
        input: { a: 2, b: 3 },
        output: "5"
      })
      expect(textOf(answer)).toBe("The sum is 5.")
      yield* turn(api, [first, answer, user("u2", "Twice that?")])
      const calls = yield* calculator.calls
      expect(calls[2]!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("2 + 3?"),
        Model.assistant("", [{ id: "call_1", name: "add", arguments: `{"a":2,"b":3}` }]),
        Model.toolResult("call_1", "add", "5"),
        Model.assistant("The sum is 5."),
        Model.user("Twice that?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("an unknown agent: 404 UnknownAgent, which the transport throws", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([inspected("assistant", ["Hi."]).agent])
      const response = yield* post(`${url}/agents/nobody/chat`, { id: "c", messages: [user("u1", "hi")], trigger: "submit-message" })
      expect(response.status).toBe(404)
      expect(JSON.parse(response.body)).toMatchObject({ _tag: "UnknownAgent", agent: "nobody" })
      expect(yield* refusal(`${url}/agents/nobody/chat`, [user("u1", "hi")])).toMatchObject({ _tag: "UnknownAgent" })
    }).pipe(Effect.scoped), 30_000)

  it.live("a body that does not fit: 400 BadRequest naming the field", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([inspected("assistant", ["Hi."]).agent])
      const api = `${url}/agents/assistant/chat`
      const refused = (body: unknown) =>
        Effect.map(post(api, body), (response) => ({ status: response.status, ...(JSON.parse(response.body) as { _tag: string; message: string }) }))
      expect(yield* refused({ id: "c" })).toEqual({ status: 400, _tag: "BadRequest", message: "payload: messages is required" })
      expect(yield* refused({ messages: [] })).toMatchObject({ status: 400, message: "payload: messages must be at least one message" })
      expect(yield* refused({ messages: [{ id: "u1", role: "bot", parts: [] }] })).toMatchObject({
        status: 400,
        message: `payload: messages[0].role must be "system" or "user" or "assistant"`
      })
      expect(yield* refused({ messages: [user("u1", "hi")], trigger: "resume-stream" })).toMatchObject({
        status: 400,
        message: `payload: trigger must be "submit-message" or "regenerate-message"`
      })
      // A part is checked against its own type's keys.
      expect(yield* refused({ messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: 3 }] }] })).toMatchObject({
        status: 400,
        message: "payload: messages[0].parts[0].text must be a string, got 3"
      })
      // The answer is to the last message: a user's (or an assistant message answering approvals).
      expect(yield* refused({ messages: [user("u1", "hi"), { id: "a1", role: "assistant", parts: [{ type: "text", text: "Hello" }] }] }))
        .toMatchObject({ status: 400, message: `payload: messages[1].role must be "user" (the agent answers the last message), got "assistant" answering no approval (no tool part in state "approval-responded")` })
      // The transport throws the body: the message useChat's `error` holds.
      const file = { id: "u1", role: "user" as const, parts: [{ type: "file" as const, mediaType: "image/tiff", url: "data:image/tiff;base64,AA==" }] }
      expect(yield* refusal(api, [file])).toEqual({
        _tag: "BadRequest",
        message: `payload: messages[0].parts[0] is a file valet cannot send: unknown file media type "image/tiff" (known: application/pdf, text/plain, text/markdown, text/csv, text/html, application/json, image/png, image/jpeg, image/gif, image/webp)`
      })
    }).pipe(Effect.scoped), 30_000)

  it.live("a server with a token: 401 without it; the transport's headers option carries it; the body cap applies (413)", () =>
    Effect.gen(function*() {
      const token = "chat-token-123"
      const url = yield* serveAgents([inspected("assistant", ["Hi there."]).agent], { token, maxBodyBytes: 2_000 })
      const api = `${url}/agents/assistant/chat`
      const anonymous = yield* post(api, { messages: [user("u1", "hi")] })
      expect(anonymous.status).toBe(401)
      expect(JSON.parse(anonymous.body)).toMatchObject({ _tag: "Unauthorized" })
      const { message } = yield* turn(api, [user("u1", "hi")], { headers: { authorization: `Bearer ${token}` } })
      expect(textOf(message)).toBe("Hi there.")
      const large = yield* post(api, { messages: [user("u1", "x".repeat(5_000))] }, { authorization: `Bearer ${token}` })
      expect(large.status).toBe(413)
      expect(JSON.parse(large.body)).toMatchObject({ _tag: "PayloadTooLarge" })
    }).pipe(Effect.scoped), 30_000)

  it.live("through Runs: beyond maxConcurrentRuns a 429 with Retry-After; a client that goes away cancels its run", () =>
    Effect.gen(function*() {
      const slow = inspected("slow", [{ text: "Too late.", delay: "20 seconds" }])
      const url = yield* serveAgents([slow.agent], { maxConcurrentRuns: 1 })
      const api = `${url}/agents/slow/chat`
      const controller = new AbortController()
      // The first chat turn: its run waits on the model.
      let settled = false
      const reading = Effect.runPromise(Effect.exit(turn(api, [user("u1", "hi")], { signal: controller.signal }))).finally(() => (settled = true))
      while ((yield* slow.calls).length === 0 && !settled) yield* Effect.sleep("10 millis")
      expect(settled, "the first turn ended before its run called the model").toBe(false)
      const busy = yield* post(api, { messages: [user("u1", "hi")] })
      expect(busy.status).toBe(429)
      expect(busy.headers.get("retry-after")).toMatch(/^\d+$/)
      expect(JSON.parse(busy.body)).toMatchObject({ _tag: "TooManyRuns", limit: 1 })
      controller.abort()
      yield* Effect.promise(() => reading)
      // The run ends cancelled, not after the model's 20 seconds.
      const ended = () =>
        Effect.promise(() =>
          fetch(`${url}/runs?full=true`).then((response) =>
            response.json() as Promise<{ runs: ReadonlyArray<{ status: string; result?: { interruptionReason?: string } }> }>
          )
        )
      let runs = (yield* ended()).runs
      while (runs[0]?.status === "running") {
        yield* Effect.sleep("20 millis")
        runs = (yield* ended()).runs
      }
      expect(runs).toEqual([expect.objectContaining({ status: "completed", result: expect.objectContaining({ interruptionReason: "cancelled" }) })])
    }).pipe(Effect.scoped), 30_000)
})

const refund = Tool.make({
  name: "refund",
  description: "Refunds an order.",
  parameters: Schema.Struct({ order: Schema.String, amount: Schema.Number }),
  handler: ({ amount, order }) => Effect.succeed(`refunded ${amount} on ${order}`),
  needsApproval: true
})

type ToolPart = { type: string; toolCallId: string; state: string; input?: unknown; output?: unknown; approval?: { id: string; approved?: boolean; reason?: string } }

const toolParts = (message: UIMessage) => message.parts.filter((part) => part.type === "dynamic-tool") as unknown as Array<ToolPart>

/** What `useChat`'s `addToolApprovalResponse({ id, approved, reason })` does to the message it shows. */
const respond = (message: UIMessage, answers: Record<string, { approved: boolean; reason?: string }>): UIMessage => ({
  ...message,
  parts: message.parts.map((part) => {
    const tool = part as unknown as ToolPart
    const answer = tool.approval !== undefined && tool.state === "approval-requested" ? answers[tool.toolCallId] : undefined
    return answer === undefined ? part : ({ ...part, state: "approval-responded", approval: { id: tool.approval!.id, ...answer } } as unknown as UIMessage["parts"][number])
  })
})

/** The transport's request after the approval answers; the answer is read into the message it continues (what `useChat` does). */
const continued = (api: string, messages: ReadonlyArray<UIMessage>) =>
  Effect.promise(async () => {
    const transport = new DefaultChatTransport<UIMessage>({ api })
    const stream = await transport.sendMessages({ trigger: "submit-message", chatId: "chat-1", messageId: undefined, messages: [...messages], abortSignal: undefined })
    let message: UIMessage = structuredClone(messages.at(-1)!)
    const errors: Array<unknown> = []
    for await (const state of readUIMessageStream<UIMessage>({ message, stream, onError: (error) => void errors.push(error) })) message = state
    return { message, errors }
  })

describe("ChatApi approvals (useChat's addToolApprovalResponse)", () => {
  it.live("a call that needs approval: the answer ends at the approval request; approving it continues the same message to the end", () =>
    Effect.gen(function*() {
      const support = inspected(
        "support",
        [{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 250 } }] }, "Refunded."],
        [refund]
      )
      const url = yield* serveAgents([support.agent])
      const api = `${url}/agents/support/chat`
      const question = user("u1", "Refund order 7.")
      const asked = yield* turn(api, [question])
      expect(asked.errors).toEqual([])
      const [part] = toolParts(asked.message)
      expect(part).toMatchObject({ toolCallId: "c1", state: "approval-requested", input: { order: "7", amount: 250 } })
      expect(part!.approval!.id).toMatch(/^run_[0-9a-f]+\/sess_[0-9a-f]+\/c1$/)
      expect(asked.message.metadata).toMatchObject({ waiting: 1 })
      // The run waits (the response ended, the run did not).
      const runId = part!.approval!.id.split("/")[0]!
      const waiting = yield* Effect.promise(() => fetch(`${url}/runs/${runId}`).then((response) => response.json() as Promise<{ status: string }>))
      expect(waiting.status).toBe("waiting")
      const answered = respond(asked.message, { c1: { approved: true } })
      // useChat's own predicate sends it by itself.
      expect(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [question, answered] })).toBe(true)
      const { errors, message } = yield* continued(api, [question, answered])
      expect(errors).toEqual([])
      expect(message.id).toBe(asked.message.id)
      expect(toolParts(message)).toEqual([expect.objectContaining({ toolCallId: "c1", state: "output-available", output: "refunded 250 on 7" })])
      expect(textOf(message)).toBe("Refunded.")
      expect(message.metadata).toMatchObject({ modelCalls: 2, interrupted: false })
      const calls = yield* support.calls
      expect(calls[1]!.messages?.at(-1)).toEqual(Model.toolResult("c1", "refund", "refunded 250 on 7"))
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxEventStreams: approval answers (a response following a run it did not start) are 429 before any is taken; once a slot is free they go on", () =>
    Effect.gen(function*() {
      const support = inspected(
        "support",
        [{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 250 } }] }, "Refunded."],
        [refund]
      )
      const url = yield* serveAgents([support.agent], { maxEventStreams: 1 })
      const api = `${url}/agents/support/chat`
      const question = user("u1", "Refund order 7.")
      // Starting a chat's run is not following one: no slot.
      const asked = yield* turn(api, [question])
      const runId = toolParts(asked.message)[0]!.approval!.id.split("/")[0]!
      // The one slot, held by a reader of the waiting run.
      const abort = new AbortController()
      const reader = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { signal: abort.signal }))
      expect(reader.status).toBe(200)
      yield* Effect.promise(() => reader.body!.getReader().read())
      const body = { id: "chat-1", trigger: "submit-message", messages: [question, respond(asked.message, { c1: { approved: true } })] }
      const refused = yield* post(api, body)
      expect(refused.status).toBe(429)
      expect(refused.headers.get("retry-after")).toBe("1")
      expect(JSON.parse(refused.body)).toMatchObject({ _tag: "TooManyEventStreams", limit: 1 })
      // Nothing was decided: the call still waits.
      const run = yield* Effect.promise(() => fetch(`${url}/runs/${runId}`).then((response) => response.json() as Promise<{ status: string; pending?: ReadonlyArray<unknown> }>))
      expect(run).toMatchObject({ status: "waiting", pending: [expect.objectContaining({ toolCallId: "c1" })] })
      // The reader goes away; the answers, sent again while refused (a bounded number of times), go on to the end.
      abort.abort()
      let answered = refused
      for (let attempt = 0; answered.status === 429 && attempt < 300; attempt++) {
        yield* Effect.sleep("10 millis")
        answered = yield* post(api, body)
      }
      expect(answered.status).toBe(200)
      expect(answered.body).toContain("Refunded.")
      const ended = yield* Effect.promise(() => fetch(`${url}/runs/${runId}`).then((response) => response.json() as Promise<{ status: string }>))
      expect(ended.status).toBe("completed")
    }).pipe(Effect.scoped), 30_000)

  it.live("a rejection: the part ends output-denied, the model reads ERROR: rejected: <reason>, as it does in a later request's history", () =>
    Effect.gen(function*() {
      const support = inspected(
        "support",
        [{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 250 } }] }, "Not refunded.", "OK."],
        [refund]
      )
      const url = yield* serveAgents([support.agent])
      const api = `${url}/agents/support/chat`
      const question = user("u1", "Refund order 7.")
      const asked = yield* turn(api, [question])
      const { errors, message } = yield* continued(api, [question, respond(asked.message, { c1: { approved: false, reason: "too much" } })])
      expect(errors).toEqual([])
      expect(toolParts(message)).toEqual([expect.objectContaining({ toolCallId: "c1", state: "output-denied", approval: expect.objectContaining({ approved: false, reason: "too much" }) })])
      expect(textOf(message)).toBe("Not refunded.")
      yield* turn(api, [question, message, user("u2", "Fine.")])
      const calls = yield* support.calls
      expect(calls[1]!.messages?.at(-1)).toEqual(Model.toolResult("c1", "refund", "ERROR: rejected: too much"))
      expect(calls[2]!.messages).toContainEqual(Model.toolResult("c1", "refund", "ERROR: rejected: too much"))
    }).pipe(Effect.scoped), 30_000)

  it.live("two calls wait: answering one continues until the run waits again; answering it twice is 409; unknown ids 404 and 400", () =>
    Effect.gen(function*() {
      const support = inspected(
        "support",
        [{
          toolCalls: [
            { id: "c1", name: "refund", arguments: { order: "7", amount: 1 } },
            { id: "c2", name: "refund", arguments: { order: "8", amount: 2 } }
          ]
        }, "Both done."],
        [refund]
      )
      const url = yield* serveAgents([support.agent])
      const api = `${url}/agents/support/chat`
      const question = user("u1", "Refund 7 and 8.")
      const asked = yield* turn(api, [question])
      expect(toolParts(asked.message).map((part) => part.state)).toEqual(["approval-requested", "approval-requested"])
      // Only c1 answered (another person decides c2): the answer's response ends when the run waits for c2 alone.
      const first = respond(asked.message, { c1: { approved: true } })
      const after = yield* continued(api, [question, first])
      expect(after.errors).toEqual([])
      expect(toolParts(after.message).map((part) => [part.toolCallId, part.state])).toEqual([["c1", "output-available"], ["c2", "approval-requested"]])
      // The same answer again: decided already.
      const again = yield* post(api, { id: "chat-1", messages: [question, first] })
      expect(again.status).toBe(409)
      expect(JSON.parse(again.body)).toMatchObject({ _tag: "AlreadyDecided", toolCallId: "c1" })
      const c2 = toolParts(after.message)[1]!.approval!.id
      const withId = (id: string) => ({
        messages: [question, { ...after.message, parts: [{ type: "dynamic-tool", toolName: "refund", toolCallId: "c2", state: "approval-responded", input: {}, approval: { id, approved: true } }] }]
      })
      const unknownRun = yield* post(api, withId(c2.replace(/^run_[0-9a-f]+/, "run_0000")))
      expect(unknownRun.status).toBe(404)
      expect(JSON.parse(unknownRun.body)).toMatchObject({ _tag: "RunNotFound" })
      const unknownCall = yield* post(api, withId(`${c2}x`))
      expect(unknownCall.status).toBe(404)
      expect(JSON.parse(unknownCall.body)).toMatchObject({ _tag: "NotWaiting", toolCallId: "c2x" })
      const notOurs = yield* post(api, withId("approval-1"))
      expect(notOurs.status).toBe(400)
      expect(JSON.parse(notOurs.body).message).toMatch(/^payload: messages\[1\]\.parts\[0\]\.approval\.id "approval-1" is not an approval id this server gave/)
      // Nothing changed: c2 still waits; answered, the run ends.
      const done = yield* continued(api, [question, respond(after.message, { c2: { approved: true } })])
      expect(toolParts(done.message).map((part) => part.state)).toEqual(["output-available", "output-available"])
      expect(textOf(done.message)).toBe("Both done.")
    }).pipe(Effect.scoped), 30_000)
})

describe("ChatApi with a thread store (the chat id is the thread)", () => {
  it.live("two useChat turns with one chat id: the second turn's model reads the first from the thread, not from the client", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Paris.", "About 2.1 million."])
      const threads = yield* Threads.makeMemory()
      const url = yield* serveAgents([assistant.agent], {}, Layer.succeed(Threads.Threads, threads))
      const api = `${url}/agents/assistant/chat`
      const first = yield* turn(api, [user("u1", "Capital of France?")], { chatId: "chat-42" })
      expect(textOf(first.message)).toBe("Paris.")
      // The client's copy of the first turn is tampered with: the thread's copy is what the model reads.
      const second = yield* turn(
        api,
        [user("u1", "Capital of Spain?"), { ...first.message, parts: [{ type: "text", text: "Madrid." }] }, user("u2", "How many people?")],
        { chatId: "chat-42" }
      )
      expect(second.errors).toEqual([])
      expect(textOf(second.message)).toBe("About 2.1 million.")
      const [, request] = yield* assistant.calls
      expect(request!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("Capital of France?"),
        Model.assistant("Paris."),
        Model.user("How many people?")
      ])
      // The thread was created on first use, for the request's owner (the default one: no owner function).
      const thread = yield* threads.get("chat-42")
      expect(thread).toMatchObject({ owner: "default", messageCount: 4 })
    }).pipe(Effect.scoped), 30_000)

  it.live("an approval in a turn on the chat's thread: the answer continues that turn (no new one); the thread keeps the call and its result", () =>
    Effect.gen(function*() {
      const support = inspected(
        "support",
        [{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 5 } }] }, "Refunded.", "You're welcome."],
        [refund]
      )
      const threads = yield* Threads.makeMemory()
      const url = yield* serveAgents([support.agent], {}, Layer.succeed(Threads.Threads, threads))
      const api = `${url}/agents/support/chat`
      const question = user("u1", "Refund order 7.")
      const asked = yield* turn(api, [question])
      expect(toolParts(asked.message).map((part) => part.state)).toEqual(["approval-requested"])
      const { errors, message } = yield* continued(api, [question, respond(asked.message, { c1: { approved: true } })])
      expect(errors).toEqual([])
      expect(textOf(message)).toBe("Refunded.")
      // The turn ended and let the thread go: the next one runs on it, its model reading the call from the thread.
      const next = yield* turn(api, [question, message, user("u2", "Thanks.")])
      expect(textOf(next.message)).toBe("You're welcome.")
      const calls = yield* support.calls
      expect(calls[2]!.messages).toContainEqual(Model.toolResult("c1", "refund", "refunded 5 on 7"))
      expect(yield* threads.get("chat-1")).toMatchObject({ messageCount: 6 })
    }).pipe(Effect.scoped), 30_000)

  it.live("the chat's thread belongs to the owner of the request that created it: another owner is 403; a chat id that cannot be a thread id is 400", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Hi, Ada."])
      const owner = Effect.map(Effect.service(HttpServerRequest.HttpServerRequest), (request) => request.headers["x-user"] ?? "nobody")
      const url = yield* serveAgents([assistant.agent], { owner }, Threads.layerMemory())
      const api = `${url}/agents/assistant/chat`
      yield* turn(api, [user("u1", "Hello")], { chatId: "chat-ada", headers: { "x-user": "ada" } })
      const other = yield* Effect.promise(() =>
        Effect.runPromise(turn(api, [user("u1", "Hello")], { chatId: "chat-ada", headers: { "x-user": "bob" } })).then(
          () => undefined,
          (error: unknown) => JSON.parse((error as Error).message) as { _tag: string }
        ))
      expect(other?._tag).toBe("ThreadForbidden")
      const bad = yield* post(api, { id: "not a thread id", messages: [user("u1", "Hello")] })
      expect(bad.status).toBe(400)
      expect(JSON.parse(bad.body).message).toMatch(/^payload: id: invalid thread id "not a thread id"/)
      expect((yield* assistant.calls).length).toBe(1)
    }).pipe(Effect.scoped), 30_000)
})

describe("ChatApi.runRequestOf (UI messages → the run's history and input)", () => {
  const run = (messages: ReadonlyArray<unknown>) =>
    ChatApi.runRequestOf("agent", Schema.decodeUnknownSync(ChatApi.ChatRequest)({ messages }))

  it("every part kind that maps: steps as assistant messages, each call followed by its result; display data skipped", () => {
    const messages = [
      { id: "s", role: "system", parts: [{ type: "text", text: "Answer in French." }] },
      { id: "u1", role: "user", parts: [{ type: "text", text: "Look it up" }, { type: "text", text: " please." }] },
      {
        id: "a1",
        role: "assistant",
        parts: [
          { type: "step-start" },
          { type: "reasoning", text: "I should search." },
          { type: "tool-search", toolCallId: "c1", state: "output-available", input: { q: "x" }, output: { hits: 2 } },
          { type: "step-start" },
          { type: "dynamic-tool", toolName: "fetch", toolCallId: "c2", state: "output-error", input: { url: "u" }, errorText: "timed out" },
          { type: "tool-delete", toolCallId: "c3", state: "output-denied", input: {}, approval: { id: "p", approved: false, reason: "not allowed" } },
          // Never ended (the run was cancelled while it ran): left out.
          { type: "tool-search", toolCallId: "c4", state: "input-available", input: { q: "y" } },
          { type: "step-start" },
          { type: "text", text: "Found it." },
          { type: "data-valet-subagent", id: "sub", data: { status: "completed" } },
          { type: "source-url", sourceId: "s1", url: "https://example.com" }
        ]
      },
      { id: "u2", role: "user", parts: [{ type: "text", text: "Thanks!" }] }
    ]
    expect(run(messages)).toEqual(Result.succeed({
      agent: "agent",
      input: "Thanks!",
      history: [
        Model.system("Answer in French."),
        // Two parts, two blocks: a line between them.
        Model.user("Look it up\n please."),
        { ...Model.assistant("", [{ id: "c1", name: "search", arguments: `{"q":"x"}` }]), reasoning: "I should search." },
        Model.toolResult("c1", "search", `{"hits":2}`),
        Model.assistant("", [{ id: "c2", name: "fetch", arguments: `{"url":"u"}` }, { id: "c3", name: "delete", arguments: "{}" }]),
        Model.toolResult("c2", "fetch", "timed out"),
        Model.toolResult("c3", "delete", "ERROR: rejected: not allowed"),
        Model.assistant("Found it.")
      ]
    }))
    // One user message: the input, no history.
    expect(run([{ role: "user", parts: [{ type: "text", text: "hi" }] }])).toEqual(Result.succeed({ agent: "agent", input: "hi" }))
    // A text file attached inline (what useChat sends): its text, named, in the message.
    const csv = `data:text/csv;base64,${Buffer.from("a,b\n1,2\n").toString("base64")}`
    expect(run([{ role: "user", parts: [{ type: "text", text: "Sum column b." }, { type: "file", mediaType: "text/csv", filename: "t.csv", url: csv }] }]))
      .toEqual(Result.succeed({ agent: "agent", input: "Sum column b.\n[file t.csv (text/csv)]\na,b\n1,2\n" }))
    expect(run([{ role: "user", parts: [{ type: "file", mediaType: "application/json", url: "data:application/json,%7B%22a%22%3A1%7D" }] }]))
      .toEqual(Result.succeed({ agent: "agent", input: `[file attachment (application/json)]\n{"a":1}` }))
  })

  it("a user's image and PDF attachments are content parts in order with the text; a thread turn refuses them", () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    const messages = [{
      role: "user",
      parts: [
        { type: "text", text: "Compare these." },
        { type: "file", mediaType: "image/png", filename: "a.png", url: `data:image/png;base64,${png}` },
        { type: "file", mediaType: "application/pdf", filename: "b.pdf", url: "data:application/pdf;base64,JVBERi0=" },
        { type: "file", mediaType: "image/jpeg", url: "https://example.com/c.jpg" }
      ]
    }]
    expect(run(messages)).toEqual(Result.succeed({
      agent: "agent",
      input: [
        Model.textPart("Compare these."),
        Model.imagePart({ data: png, mediaType: "image/png" }),
        Model.filePart({ data: "JVBERi0=", mediaType: "application/pdf", name: "b.pdf" }),
        Model.imagePart({ url: "https://example.com/c.jpg" })
      ]
    }))
    const turn = ChatRequestOf.turnRequestOf("agent", Schema.decodeUnknownSync(ChatApi.ChatRequest)({ messages }))
    expect(Result.isFailure(turn) ? turn.failure : "accepted").toBe(
      "payload: messages[0].parts hold images or documents: a thread's turns are text (a chat without a thread takes them)"
    )
    const bad = run([{ role: "user", parts: [{ type: "file", mediaType: "image/png", url: "file:///etc/passwd" }] }])
    expect(Result.isFailure(bad) ? bad.failure.message : "accepted").toBe(
      "payload: messages[0].parts[0] is a file valet cannot send: the URL scheme \"file:\" is not allowed (only http:, https: and data:)"
    )
  })

  it("what cannot be given to an agent is refused, naming the part", () => {
    const refused = (parts: ReadonlyArray<unknown>, role = "assistant") => {
      const result = run([{ role, parts }, { role: "user", parts: [{ type: "text", text: "q" }] }])
      return Result.isFailure(result) ? result.failure.message : undefined
    }
    expect(refused([{ type: "tool-search", state: "output-available", output: 1 }])).toBe("payload: messages[0].parts[0].toolCallId is required")
    expect(refused([{ type: "dynamic-tool", toolCallId: "c", state: "output-available", output: 1 }])).toBe(
      "payload: messages[0].parts[0].toolName is required"
    )
    expect(refused([{ type: "tool-search", toolCallId: "c", state: "done" }])).toMatch(/^payload: messages\[0\]\.parts\[0\]\.state must be "input-streaming" or /)
    expect(refused([{ type: "tool-", toolCallId: "c", state: "output-available" }])).toBe(
      `payload: messages[0].parts[0].type names no tool: "tool-" is followed by the tool's name`
    )
    expect(refused([{ type: "tool-search", toolCallId: "c", state: "output-available", output: 1 }], "user")).toBe(
      "payload: messages[0].parts[0] is a tool call in a user message: only an assistant calls tools"
    )
    expect(refused([{ type: "reasoning", text: "hm" }], "user")).toBe("payload: messages[0].parts[0] is reasoning in a user message: only an assistant reasons")
    expect(refused([{ type: "custom", kind: "a.b" }])).toMatch(/^payload: messages\[0\]\.parts\[0\]\.type is "custom", a part valet cannot give an agent/)
    // Files: a text file by URL is not fetched; a file that is not text is refused.
    expect(refused([{ type: "file", mediaType: "text/plain", url: "https://example.com/a.txt" }], "user")).toBe(
      "payload: messages[0].parts[0] is a file by URL: give it inline (a data: URL, as useChat sends attachments); the server does not fetch URLs"
    )
    expect(refused([{ type: "file", mediaType: "text/plain", url: `data:text/plain;base64,${Buffer.from([0xff, 0xfe]).toString("base64")}` }], "user")).toBe(
      "payload: messages[0].parts[0] is a file whose data is not UTF-8 text"
    )
    // The last user message must say something, and each tool call's id is its own.
    const only = (parts: ReadonlyArray<unknown>) => {
      const result = run([{ role: "user", parts }])
      return Result.isFailure(result) ? result.failure.message : undefined
    }
    expect(only([])).toBe("payload: messages[0].parts hold no text: the last user message is what the agent answers")
    expect(only([{ type: "data-note", data: 1 }])).toBe("payload: messages[0].parts hold no text: the last user message is what the agent answers")
    const call = (id: string) => ({ type: "tool-search", toolCallId: id, state: "output-available", input: {}, output: "r" })
    const twice = run([
      { role: "user", parts: [{ type: "text", text: "a" }] },
      { role: "assistant", parts: [{ type: "step-start" }, call("c1"), { type: "step-start" }, call("c1")] },
      { role: "user", parts: [{ type: "text", text: "b" }] }
    ])
    expect(Result.isFailure(twice) ? twice.failure.message : undefined).toBe(
      `payload: messages hold two tool calls with the id "c1": each call's result must be its own`
    )
  })
})

/** The page's script: test/support/chatPage.jsx and what it imports (React, `@ai-sdk/react`, `ai`) as one file. */
const bundle = Effect.promise(() =>
  esbuild.build({
    entryPoints: [join(import.meta.dirname, "..", "support", "chatPage.jsx")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
    logLevel: "silent"
  }).then((result) => result.outputFiles[0]!.text)
)

const chatHtml = `<!doctype html><html><head><meta charset="utf-8"><title>chat</title></head>
<body><div id="root"></div><script type="module" src="/chat.js"></script></body></html>`

/** valet's routes (`Server.routes`) and the page (`GET /chat`, `GET /chat.js`) on one loopback server: one origin. */
const servePage = (agents: ReadonlyArray<Agent.Agent<never>>, script: string) =>
  Effect.gen(function*() {
    const page = Layer.mergeAll(
      HttpRouter.add("GET", "/chat", HttpServerResponse.text(chatHtml, { contentType: "text/html; charset=utf-8" })),
      HttpRouter.add("GET", "/chat.js", HttpServerResponse.text(script, { contentType: "text/javascript; charset=utf-8" }))
    )
    const context = yield* Layer.build(
      HttpRouter.serve(Layer.mergeAll(Server.routes(), page), { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
        Layer.provide(Agents.layer(agents))
      )
    )
    const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
    return `http://127.0.0.1:${address.port}`
  })

/**
 * A headless Chromium page (closed with the scope) for the chat page tests: its page errors kept, and `say` typing
 * a message and sending it once the form is ready.
 */
const chatPage = Effect.gen(function*() {
  const browser = yield* Effect.acquireRelease(
    Effect.promise(() => chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })),
    (browser) => Effect.promise(() => browser.close())
  )
  const page = yield* Effect.promise(() => browser.newPage())
  const pageErrors: Array<string> = []
  page.on("pageerror", (error) => void pageErrors.push(error.message))
  const say = (text: string) =>
    Effect.promise(async () => {
      await page.locator('button[type="submit"]:not([disabled])').waitFor()
      await page.fill("#input", text)
      await page.click('button[type="submit"]')
    })
  return { page, pageErrors, say }
})

describe("ChatApi in a browser", () => {
  it.live.skipIf(!haveChromium && !chromiumRequired)(
    `in headless Chromium: useChat from @ai-sdk/react with DefaultChatTransport({ api: "/agents/calculator/chat" }), two turns${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
      Effect.gen(function*() {
        expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
        const calculator = inspected(
          "calculator",
          [{ toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }] }, "The sum is 5.", "Twice that is 10."],
          [add]
        )
        const url = yield* servePage([calculator.agent], yield* bundle)
        const { page, pageErrors, say } = yield* chatPage
        yield* Effect.promise(() => page.goto(`${url}/chat`))
        yield* say("2 + 3?")
        yield* Effect.promise(() => page.locator(".message.assistant").getByText("The sum is 5.").waitFor({ timeout: 10_000 }))
        expect(yield* Effect.promise(() => page.locator(".message.assistant .tool").innerText())).toBe('add({"a":2,"b":3}) → 5')
        // The second turn sends the whole chat, as useChat keeps it; the model reads it as a conversation.
        yield* say("Twice that?")
        yield* Effect.promise(() => page.locator(".message.assistant").getByText("Twice that is 10.").waitFor({ timeout: 10_000 }))
        const messages = yield* Effect.promise(() => page.locator(".message").allInnerTexts())
        expect(messages.map((text) => text.replace(/\n+/g, "\n").trim())).toEqual(["2 + 3?", 'add({"a":2,"b":3}) → 5\nThe sum is 5.', "Twice that?", "Twice that is 10."])
        expect(yield* Effect.promise(() => page.locator("#error").count())).toBe(0)
        expect(pageErrors).toEqual([])
        const calls = yield* calculator.calls
        expect(calls[2]!.messages).toEqual([
          Model.system("Be brief."),
          Model.user("2 + 3?"),
          Model.assistant("", [{ id: "call_1", name: "add", arguments: `{"a":2,"b":3}` }]),
          Model.toolResult("call_1", "add", "5"),
          Model.assistant("The sum is 5."),
          Model.user("Twice that?")
        ])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live.skipIf(!haveChromium && !chromiumRequired)(
    `in headless Chromium: useChat shows a call waiting for approval; Approve (addToolApprovalResponse) sends itself and the answer continues; Reject reaches the model${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
      Effect.gen(function*() {
        expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
        const calculator = inspected(
          "calculator",
          [
            { toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }] },
            "The sum is 5.",
            { toolCalls: [{ id: "call_2", name: "add", arguments: { a: 4, b: 4 } }] },
            "Not added."
          ],
          [Tool.withApproval(add)]
        )
        const url = yield* servePage([calculator.agent], yield* bundle)
        const { page, pageErrors, say } = yield* chatPage
        yield* Effect.promise(() => page.goto(`${url}/chat`))
        yield* say("2 + 3?")
        yield* Effect.promise(() => page.locator(".approval").getByText('add({"a":2,"b":3})?').waitFor({ timeout: 10_000 }))
        // The model has been called once: the run waits for the click.
        expect((yield* calculator.calls).length).toBe(1)
        yield* Effect.promise(() => page.click(".approval .approve"))
        yield* Effect.promise(() => page.locator(".message.assistant").getByText("The sum is 5.").waitFor({ timeout: 10_000 }))
        expect(yield* Effect.promise(() => page.locator(".message.assistant .tool").innerText())).toBe('add({"a":2,"b":3}) → 5')
        yield* say("4 + 4?")
        yield* Effect.promise(() => page.locator(".approval").getByText('add({"a":4,"b":4})?').waitFor({ timeout: 10_000 }))
        yield* Effect.promise(() => page.click(".approval .reject"))
        yield* Effect.promise(() => page.locator(".message.assistant").getByText("Not added.").waitFor({ timeout: 10_000 }))
        const messages = yield* Effect.promise(() => page.locator(".message").allInnerTexts())
        expect(messages.map((text) => text.replace(/\n+/g, "\n").trim())).toEqual([
          "2 + 3?",
          'add({"a":2,"b":3}) → 5\nThe sum is 5.',
          "4 + 4?",
          'add({"a":4,"b":4}) → denied\nNot added.'
        ])
        expect(yield* Effect.promise(() => page.locator("#error").count())).toBe(0)
        expect(pageErrors).toEqual([])
        const calls = yield* calculator.calls
        expect(calls.length).toBe(4)
        expect(calls[1]!.messages?.at(-1)).toEqual(Model.toolResult("call_1", "add", "5"))
        expect(calls[3]!.messages?.at(-1)).toEqual(Model.toolResult("call_2", "add", "ERROR: rejected: not now"))
      }).pipe(Effect.scoped),
    60_000
  )
})
