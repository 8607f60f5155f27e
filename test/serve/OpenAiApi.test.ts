/**
 * The OpenAI-compatible facade, driven by clients no one here wrote: the `openai` package and the AI SDK's
 * OpenAI-compatible provider, over loopback against `Server.layerNode`, with agents on scripted models.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { describe, expect, it } from "@effect/vitest"
import { generateText, streamText } from "ai"
import { Context, Effect, Layer } from "effect"
import OpenAI from "openai"
import * as ReAct from "../../src/architectures/ReAct.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as OpenAiApi from "../../src/serve/OpenAiApi.js"
import * as LoopbackServer from "../support/openAiServer.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

const scripted = (name: string, script: ScriptedModel.Script, architecture?: Parameters<typeof Agent.make>[0]["architecture"]) =>
  scriptedAgent(name, script, architecture, "Be brief.")
const serve = serveAgents

/** The conversation each run saw, read back from the scripted model of a function script. */
const seen: Array<ReadonlyArray<Model.Message>> = []
const recording = Agent.make({
  name: "echo",
  instructions: "Be brief.",
  model: Layer.orDie(ScriptedModel.layer((request) => {
    seen.push(request.messages ?? [])
    return { text: "Paris is the capital of France.", usage: { inputTokens: 11, outputTokens: 7 } }
  }))
}) as Agent.Agent<never>

const agents = [
  recording,
  scripted("writer", ["Paris is the capital", "Add a full stop.", "Paris is the capital.", "No issues."], SelfRefine.architecture),
  scripted("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }]),
  scripted("capped", ["one", "two"], ReAct.architecture)
]

describe("OpenAiApi (the openai package and the AI SDK as clients)", () => {
  it.live("openai: models.list lists the agents; a completion runs the agent on the conversation", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const models = yield* Effect.promise(() => client.models.list())
      expect(models.data.map((model) => model.id)).toEqual(["echo", "writer", "broken", "capped"])
      seen.length = 0
      const completion = yield* Effect.promise(() =>
        client.chat.completions.create({
          model: "echo",
          temperature: 0.2,
          messages: [
            { role: "system", content: "Answer in French if asked to." },
            { role: "user", content: "Hi." },
            { role: "assistant", content: "Hello!" },
            { role: "user", content: [{ type: "text", text: "Capital of France?" }] }
          ]
        })
      )
      expect(completion.object).toBe("chat.completion")
      expect(completion.choices[0]!.message).toMatchObject({ role: "assistant", content: "Paris is the capital of France." })
      expect(completion.choices[0]!.finish_reason).toBe("stop")
      expect(completion.usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
      // The agent's instructions, then the conversation before the last user message, then that message.
      expect(seen[0]).toEqual([
        Model.system("Be brief."),
        Model.system("Answer in French if asked to."),
        Model.user("Hi."),
        Model.assistant("Hello!"),
        Model.user("Capital of France?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("openai streaming: content deltas that add up to the answer, a finish reason, the usage chunk, [DONE]", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const read = (model: string) =>
        Effect.promise(async () => {
          const stream = await client.chat.completions.create({
            model,
            messages: [{ role: "user", content: "Capital of France?" }],
            stream: true,
            stream_options: { include_usage: true }
          })
          const chunks = []
          for await (const chunk of stream) chunks.push(chunk)
          return chunks
        })
      const chunks = yield* read("echo")
      expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant")
      const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")
      expect(text).toBe("Paris is the capital of France.")
      // Several content deltas: the root run's text as it was generated.
      expect(chunks.filter((chunk) => (chunk.choices[0]?.delta.content ?? "") !== "").length).toBeGreaterThan(2)
      expect(chunks.find((chunk) => chunk.choices[0]?.finish_reason !== null && chunk.choices[0]?.finish_reason !== undefined)!.choices[0]!.finish_reason).toBe("stop")
      expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
      // Self-Refine answers through its sub-agents: the output comes as one delta at the end.
      const refined = yield* read("writer")
      expect(refined.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe("Paris is the capital.")
    }).pipe(Effect.scoped), 30_000)

  it.live("openai errors: an unknown model is a 404 NotFoundError; a failed run a 500; a bad body a 400 naming the field", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const failure = (model: string) =>
        Effect.promise(() =>
          client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }] }).then(
            () => undefined,
            (error: unknown) => error
          )
        )
      const unknown = yield* failure("nobody")
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect((unknown as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found")
      expect((unknown as Error).message).toContain("The model `nobody` does not exist")
      const failed = yield* failure("broken")
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError)
      expect((failed as Error).message).toContain("slow down")
      const bad = yield* Effect.promise(() =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "echo", messages: [{ role: "wizard", content: "x" }] })
        })
      )
      expect(bad.status).toBe(400)
      const body = yield* Effect.promise(() => bad.json() as Promise<{ error: { message: string; type: string } }>)
      expect(body.error.type).toBe("invalid_request_error")
      expect(body.error.message).toMatch(/messages\[0\]\.role/)
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK's OpenAI-compatible provider: generateText and streamText", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const provider = createOpenAICompatible({ name: "valet", baseURL: `${url}/v1`, includeUsage: true })
      const generated = yield* Effect.promise(() => generateText({ model: provider("echo"), prompt: "Capital of France?" }))
      expect(generated.text).toBe("Paris is the capital of France.")
      expect(generated.usage.inputTokens).toBe(11)
      const streamed = yield* Effect.promise(async () => {
        const result = streamText({ model: provider("writer"), prompt: "Capital of France?" })
        let text = ""
        for await (const delta of result.textStream) text += delta
        return { text, finishReason: await result.finishReason }
      })
      expect(streamed).toEqual({ text: "Paris is the capital.", finishReason: "stop" })
    }).pipe(Effect.scoped), 30_000)

  it.live("a client that aborts mid-stream cancels the run: the model request is aborted", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serve([remote])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const controller = new AbortController()
      const reading = client.chat.completions.create(
        { model: "remote", messages: [{ role: "user", content: "hi" }], stream: true },
        { signal: controller.signal }
      ).then(async (stream) => {
        for await (const _ of stream) { /* the role chunk, then nothing */ }
        return "ended"
      }, (error: Error) => error.name).catch((error: Error) => error.name)
      const until = Date.now() + 5_000
      while (!model.requests.some((request) => request.path === "/v1/chat/completions") && Date.now() < until) {
        yield* Effect.sleep("20 millis")
      }
      controller.abort()
      yield* Effect.promise(() => reading)
      yield* model.closedEarlySignal
      expect(model.closedEarly()).toBe(1)
    }).pipe(Effect.scoped), 30_000)

  it("runRequestOf: the last user message is the input, tool results are quoted", () => {
    expect(OpenAiApi.runRequestOf({
      model: "a",
      messages: [
        { role: "developer", content: "d" },
        { role: "user", content: "q1" },
        { role: "tool", name: "search", content: "r" },
        { role: "user", content: "q2" }
      ]
    })).toEqual({
      agent: "a",
      input: "q2",
      history: [{ role: "system", content: "d" }, { role: "user", content: "q1" }, { role: "user", content: "Tool result (search): r" }]
    })
  })
})
