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
})
