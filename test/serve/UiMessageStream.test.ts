/**
 * The AI SDK UI message stream, read back with the `ai` package's own reader (`parseJsonEventStream` with its
 * `uiMessageChunkSchema`, then `readUIMessageStream`: what `useChat`'s transport does), from the library function
 * and from `POST /runs/stream?protocol=ui-message`.
 */
import { describe, expect, it } from "@effect/vitest"
import { parseJsonEventStream, readUIMessageStream, type UIMessage, type UIMessageChunk, uiMessageChunkSchema } from "ai"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { HttpServer } from "effect/http"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Guardrail from "../../src/core/Guardrail.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Server from "../../src/serve/Server.js"
import * as UiMessageStream from "../../src/serve/UiMessageStream.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(String(a + b))
})

const calculator = Agent.make({ name: "calculator", instructions: "Use the tool.", tools: [add] })
const writer = Agent.make({ name: "writer", instructions: "Write.", architecture: SelfRefine.architecture })

/** The SSE text as the AI SDK reads it: chunks validated by its schema, folded into the final message. */
const readBack = async (body: ReadableStream<Uint8Array>) => {
  const chunks: Array<UIMessageChunk> = []
  const parsed = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) throw result.error
        chunks.push(result.value)
        controller.enqueue(result.value)
      }
    })
  )
  let message: UIMessage | undefined
  const errors: Array<unknown> = []
  for await (const state of readUIMessageStream({ stream: parsed, onError: (error) => void errors.push(error) })) message = state
  return { message: message!, chunks, errors }
}

const bodyOf = (text: string) => new Response(text).body!

describe("UiMessageStream", () => {
  it.effect("a ReAct run with a tool: one message with a step per model call, the tool's input and output, the answer", () =>
    Effect.gen(function*() {
      const text = (yield* Stream.runCollect(UiMessageStream.toSse(Agent.stream(calculator, "2 + 3?")))).join("")
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
      const { message, chunks } = yield* Effect.promise(() => readBack(bodyOf(text)))
      expect(chunks.map((chunk) => chunk.type).filter((type) => type.endsWith("step"))).toEqual(["start-step", "finish-step", "start-step", "finish-step"])
      const tool = message.parts.find((part) => part.type === "dynamic-tool")
      expect(tool).toMatchObject({ toolName: "add", state: "output-available", input: { a: 2, b: 3 }, output: "5" })
      const texts = message.parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text)
      expect(texts.join("")).toBe("The sum is 5.")
      expect(message.metadata).toMatchObject({ modelCalls: 2, interrupted: false, usage: { totalTokens: expect.any(Number) } })
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] }, "The sum is 5."]))))

  it.effect("Self-Refine: sub-agents as data parts updated in place, progress transient, the answer as the last text", () =>
    Effect.gen(function*() {
      const text = (yield* Stream.runCollect(UiMessageStream.toSse(Agent.stream(writer, "Capital of France?")))).join("")
      const { message, chunks } = yield* Effect.promise(() => readBack(bodyOf(text)))
      const subAgents = message.parts.filter((part) => part.type === "data-valet-subagent") as Array<{ id: string; data: UiMessageStream.SubAgentData }>
      // One part per sub-agent session (base, critic, refiner, critic again), each ended.
      expect(subAgents.map((part) => part.id.split("__")[1])).toEqual(["base", "critic_1", "refiner_1", "critic_2"])
      expect(subAgents.every((part) => part.data.status === "completed" && part.data.modelCalls === 1)).toBe(true)
      expect(chunks.some((chunk) => chunk.type === "data-valet-progress")).toBe(true)
      expect(message.parts.some((part) => part.type === "data-valet-progress")).toBe(false)
      const last = message.parts.filter((part) => part.type === "text").at(-1) as { text: string }
      expect(last.text).toBe("Paris is the capital.")
    }).pipe(Effect.provide(ScriptedModel.layer(["Paris is the capital", "Add a full stop.", "Paris is the capital.", "No issues."]))))

  it.effect("cached counts and cost as message metadata (live, then the run's), a fallback and a guardrail rewrite as data parts", () =>
    Effect.gen(function*() {
      const down = Context.get(ScriptedModel.context(() => ({ error: new ModelError.ServerError({ status: 503, message: "upstream down" }) })), Model.Model)
      const backup = Context.get(
        ScriptedModel.context([{ text: "Mail ann@example.com.", usage: { inputTokens: 2006, outputTokens: 300, cachedInputTokens: 1920, cacheWriteTokens: 0 } }]),
        Model.Model
      )
      const agent = Agent.make({
        name: "describer",
        instructions: "Describe.",
        guardrails: { output: [Guardrail.redact()] },
        model: Layer.orDie(Model.fallback([{ name: "primary", model: down }, { name: "backup", model: backup }]))
      }) as Agent.Agent<never>
      const pricing = { inputPerMillion: 2, cachedInputPerMillion: 0.5, outputPerMillion: 8 }
      const text = (yield* Stream.runCollect(UiMessageStream.toSse(Agent.stream(agent, "What is it?", { budget: { pricing } })))).join("")
      const { message, chunks, errors } = yield* Effect.promise(() => readBack(bodyOf(text)))
      expect(errors).toEqual([])
      const usage = { inputTokens: 2006, outputTokens: 300, totalTokens: 2306, cachedInputTokens: 1920, cacheWriteTokens: 0 }
      // After the call, before the end: the counts so far (86 uncached at 2, 1920 cached at 0.5, 300 out at 8 per million).
      const live = chunks.filter((chunk) => chunk.type === "message-metadata")
      expect(live).toEqual([{ type: "message-metadata", messageMetadata: { usage, cost: expect.closeTo(0.003532, 9) } }])
      expect(chunks.indexOf(live[0]!)).toBeLessThan(chunks.findIndex((chunk) => chunk.type === "finish"))
      expect(message.metadata).toMatchObject({ modelCalls: 1, usage, cost: expect.closeTo(0.003532, 9) })
      const sessionId = (message.metadata as { sessionId: string }).sessionId
      const fallback = message.parts.filter((part) => part.type === "data-valet-fallback") as Array<{ data: UiMessageStream.FallbackData }>
      expect(fallback.map((part) => part.data)).toEqual([
        { sessionId, step: "react.turn_1", from: "primary", to: "backup", reason: expect.stringMatching(/^ServerError/) }
      ])
      const guardrail = message.parts.filter((part) => part.type === "data-valet-guardrail") as Array<{ data: UiMessageStream.GuardrailData }>
      expect(guardrail.map((part) => part.data)).toEqual([
        { sessionId, guardrail: "redact", kind: "output", reason: expect.stringContaining("email"), rewritten: true }
      ])
    }))

  it.effect("a failed run: an error chunk, which the AI SDK's reader hands to onError", () =>
    Effect.gen(function*() {
      const text = (yield* Stream.runCollect(UiMessageStream.toSse(Agent.stream(calculator, "x")))).join("")
      const { chunks, errors } = yield* Effect.promise(() => readBack(bodyOf(text)))
      expect(chunks.at(-1)).toEqual({ type: "error", errorText: expect.stringMatching(/^RateLimited: .*slow down/) })
      expect(errors.map((error) => (error as Error).message)).toEqual([expect.stringMatching(/^RateLimited: .*slow down/)])
    }).pipe(Effect.provide(ScriptedModel.layer([{ error: new ModelError.RateLimited({ message: "slow down" }) }]))))

  it.live("POST /runs/stream?protocol=ui-message: the protocol's headers and stream, read by the AI SDK", () =>
    Effect.gen(function*() {
      const agent = Agent.make({
        name: "writer",
        instructions: "Write.",
        architecture: SelfRefine.architecture,
        model: Layer.orDie(ScriptedModel.layer(["Paris is the capital", "Add a full stop.", "Paris is the capital.", "No issues."]))
      }) as Agent.Agent<never>
      const context = yield* Layer.build(Server.layerNode({ port: 0 }).pipe(Layer.provide(Agents.layer([agent]))))
      const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${address.port}/runs/stream?protocol=ui-message`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "writer", input: "Capital of France?" })
        })
      )
      expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1")
      expect(response.headers.get("content-type")).toBe("text/event-stream")
      const { message } = yield* Effect.promise(() => readBack(response.body!))
      expect((message.parts.filter((part) => part.type === "text").at(-1) as { text: string }).text).toBe("Paris is the capital.")
    }).pipe(Effect.scoped), 30_000)

  it.effect("a sub-agent's call waits for approval: its own tool part first, then the AI SDK's approval request; the message ends there", () =>
    Effect.gen(function*() {
      const root = "sess_root"
      const worker = `${root}__worker_1`
      const at = (timestamp: number) => ({ timestamp })
      const events: Array<AgentEvent.AgentEvent> = [
        { _tag: "RunStarted", sessionId: root, ...at(1), agent: "boss", architecture: "supervisor", prompt: "Refund 7." },
        { _tag: "RunStarted", sessionId: worker, ...at(2), agent: "worker", architecture: "react", prompt: "Refund 7." },
        { _tag: "ModelCalled", sessionId: worker, ...at(3), step: "s1" },
        {
          _tag: "ModelReplied",
          sessionId: worker,
          ...at(4),
          step: "s1",
          text: "",
          toolCalls: [{ id: "c1", name: "refund", arguments: `{"order":"7"}` }],
          finishReason: "tool_calls",
          usage: Model.emptyUsage,
          latencyMs: 1
        },
        { _tag: "ApprovalRequested", sessionId: worker, ...at(5), toolCallId: "c1", name: "refund", arguments: `{"order":"7"}` },
        // After the end: not sent.
        { _tag: "ApprovalDecided", sessionId: worker, ...at(6), toolCallId: "c1", name: "refund", approved: false, edited: false, reason: "no", waitedMs: 1 }
      ]
      const chunks = yield* Stream.runCollect(UiMessageStream.fromEvents(Stream.fromIterable(events), { runId: "run_1", endWhenWaiting: true }))
      expect(chunks.filter((chunk) => chunk.type.startsWith("tool-") || chunk.type === "finish")).toEqual([
        { type: "tool-input-available", toolCallId: `${worker}/c1`, toolName: "refund", input: { order: "7" }, dynamic: true },
        { type: "tool-approval-request", approvalId: `run_1/${worker}/c1`, toolCallId: `${worker}/c1` },
        { type: "finish", finishReason: "tool-calls", messageMetadata: { sessionId: root, waiting: 1 } }
      ])
      expect(UiMessageStream.parseApprovalId(`run_1/${worker}/c/1`)).toEqual({ runId: "run_1", sessionId: worker, toolCallId: "c/1" })
      // The AI SDK's reader takes it (a request for a part it has not seen would throw).
      const text = (yield* Stream.runCollect(UiMessageStream.toSse(Stream.fromIterable(events), { runId: "run_1", endWhenWaiting: true }))).join("")
      const { errors, message } = yield* Effect.promise(() => readBack(bodyOf(text)))
      expect(errors).toEqual([])
      expect(message.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({
        toolCallId: `${worker}/c1`,
        state: "approval-requested",
        approval: { id: `run_1/${worker}/c1` }
      })
    }))

  it.live("POST /runs/stream?protocol=ui-message: an approval request, decided with POST /runs/:runId/decisions/:toolCallId, and the same stream goes on", () =>
    Effect.gen(function*() {
      const refund = Tool.make({
        name: "refund",
        description: "Refunds an order.",
        parameters: Schema.Struct({ order: Schema.String }),
        handler: ({ order }) => Effect.succeed(`refunded ${order}`),
        needsApproval: true
      })
      const agent = Agent.make({
        name: "support",
        instructions: "Help.",
        tools: [refund],
        model: Layer.orDie(ScriptedModel.layer([{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7" } }] }, "Done."]))
      }) as Agent.Agent<never>
      const context = yield* Layer.build(Server.layerNode({ port: 0 }).pipe(Layer.provide(Agents.layer([agent]))))
      const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
      const base = `http://127.0.0.1:${address.port}`
      const response = yield* Effect.promise(() =>
        fetch(`${base}/runs/stream?protocol=ui-message`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "support", input: "Refund 7." })
        })
      )
      // The client reads the request, and a person decides it by the run and call its id names.
      const decided = (async () => {
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
        let text = ""
        while (!text.includes(`"tool-approval-request"`)) text += (await reader.read()).value ?? ""
        const request = JSON.parse(/data: (\{[^\n]*"tool-approval-request"[^\n]*\})/.exec(text)![1]!) as { approvalId: string }
        const named = UiMessageStream.parseApprovalId(request.approvalId)!
        const decision = await fetch(`${base}/runs/${named.runId}/decisions/${named.toolCallId}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ approved: true })
        })
        for (let next = await reader.read(); !next.done; next = await reader.read()) text += next.value
        return { status: decision.status, text }
      })()
      const { status, text } = yield* Effect.promise(() => decided)
      expect(status).toBe(200)
      const { errors, message } = yield* Effect.promise(() => readBack(bodyOf(text)))
      expect(errors).toEqual([])
      expect(message.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({ toolCallId: "c1", state: "output-available", output: "refunded 7" })
      expect((message.parts.filter((part) => part.type === "text").at(-1) as { text: string }).text).toBe("Done.")
    }).pipe(Effect.scoped), 30_000)
})
