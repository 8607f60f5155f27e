/**
 * The OpenAI-compatible facade, driven by clients no one here wrote: the `openai` package and the AI SDK's
 * OpenAI-compatible provider, over loopback against `Server.layerNode`, with agents on scripted models.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { describe, expect, it } from "@effect/vitest"
import { generateText, Output, streamText } from "ai"
import { Context, Effect, Layer, Result, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import OpenAI from "openai"
import * as ReAct from "../../src/architectures/ReAct.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as OpenAiApi from "../../src/serve/OpenAiApi.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import { z } from "zod"
import { expectWeatherExchange, inspected, openAiClient, refusedWith, weatherExchange } from "../support/openAiFacade.js"
import * as LoopbackServer from "../support/openAiServer.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

// The AI SDK logs a warning when its provider asks for json_object without a schema: expected here, not news.
Object.assign(globalThis, { AI_SDK_LOG_WARNINGS: false })

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



const paris = { id: "call_1", type: "function" as const, function: { name: "weather", arguments: `{"city":"Paris"}` } }
const CitySchema = {
  type: "object",
  properties: { city: { type: "string" }, population: { type: "integer" } },
  required: ["city", "population"],
  additionalProperties: false
}

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

  it.live("openai: a user message with an image reaches the agent's model as an image part, exactly as sent", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      seen.length = 0
      const completion = yield* Effect.promise(() =>
        client.chat.completions.create({
          model: "echo",
          messages: [{
            role: "user",
            content: [
              { type: "text", text: "Which city is this?" },
              { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }
            ]
          }]
        })
      )
      expect(completion.choices[0]!.message.content).toBe("Paris is the capital of France.")
      expect(seen[0]).toEqual([
        Model.system("Be brief."),
        Model.user([Model.textPart("Which city is this?"), Model.imagePart({ data: png, mediaType: "image/png" })])
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
      const client = openAiClient(url)
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
      const body = yield* Effect.promise(() => bad.json() as Promise<{ error: { message: string; type: string; param: string | null } }>)
      expect(body.error.type).toBe("invalid_request_error")
      expect(body.error.message).toMatch(/messages\[0\]\.role/)
      expect(body.error.param).toBe("messages[0].role")
    }).pipe(Effect.scoped), 30_000)

  it.live("a failed run's 500 says x-should-retry: false: the openai package with its default retries runs it once", () =>
    Effect.gen(function*() {
      let calls = 0
      const failing = scripted("failing", () => {
        calls++
        return { error: new ModelError.InvalidRequest({ status: 400, message: "bad request to the model" }) }
      })
      const url = yield* serve([failing])
      const failed = yield* Effect.promise(() =>
        new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" }).chat.completions.create({ model: "failing", messages: [{ role: "user", content: "x" }] })
          .then(() => undefined, (error: unknown) => error)
      )
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError)
      expect((failed as InstanceType<typeof OpenAI.InternalServerError>).headers.get("x-should-retry")).toBe("false")
      expect(calls).toBe(1)
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
      const client = openAiClient(url)
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

  it.live("openai: a conversation with tool calls reaches the model as sent, tool results as tool results", () =>
    Effect.gen(function*() {
      const weather = inspected("weather", ["It is 18°C and sunny.", "Rain tomorrow."])
      const url = yield* serve([weather.agent])
      const client = openAiClient(url)
      const conversation = [
        { role: "user" as const, content: "Weather in Paris?" },
        { role: "assistant" as const, content: null, tool_calls: [paris] },
        { role: "tool" as const, tool_call_id: "call_1", content: "18°C, sunny" }
      ]
      const answer = yield* Effect.promise(() => client.chat.completions.create({ model: "weather", messages: conversation }))
      expect(answer.choices[0]!.message.content).toBe("It is 18°C and sunny.")
      // Then the user asks on: the last user message is the input, everything before it the history, in order.
      yield* Effect.promise(() =>
        client.chat.completions.create({
          model: "weather",
          messages: [...conversation, { role: "assistant", content: "It is 18°C and sunny." }, { role: "user", content: "And tomorrow?" }]
        })
      )
      const [first, second] = yield* weather.calls
      const exchange = [
        Model.system("Be brief."),
        Model.user("Weather in Paris?"),
        Model.assistant("", [{ id: "call_1", name: "weather", arguments: `{"city":"Paris"}` }]),
        Model.toolResult("call_1", "weather", "18°C, sunny")
      ]
      // The conversation ends with the tool result: the model continues it, with no empty user turn after it.
      expect(first!.messages).toEqual(exchange)
      expect(second!.messages).toEqual([...exchange, Model.assistant("It is 18°C and sunny."), Model.user("And tomorrow?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK: tool-call and tool-result parts reach the model as a tool exchange", () =>
    Effect.gen(function*() {
      const weather = inspected("weather", ["It is 18°C and sunny."])
      const url = yield* serve([weather.agent])
      const provider = createOpenAICompatible({ name: "valet", baseURL: `${url}/v1` })
      const generated = yield* Effect.promise(() =>
        generateText({
          model: provider("weather"),
          messages: weatherExchange
        })
      )
      expect(generated.text).toBe("It is 18°C and sunny.")
      const [request] = yield* weather.calls
      expectWeatherExchange(request)
    }).pipe(Effect.scoped), 30_000)

  it.live("openai: what the facade cannot honour is a 400 naming the parameter, and no run starts", () =>
    Effect.gen(function*() {
      const quiet = inspected("quiet", ["Hello."])
      const url = yield* serve([quiet.agent])
      const client = openAiClient(url)
      const ask = (extra: Record<string, unknown>, messages: ReadonlyArray<Record<string, unknown>> = [{ role: "user", content: "Hi." }]) =>
        refusedWith(client.chat.completions.create({ model: "quiet", messages, ...extra } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming))
      const noUser = yield* ask({}, [{ role: "system", content: "Be nice." }])
      expect(noUser).toMatchObject({ status: 400, type: "invalid_request_error", param: "messages", code: "invalid_value" })
      expect(noUser!.message).toContain("no user message")
      expect(yield* ask({ n: 2 })).toMatchObject({ status: 400, param: "n", code: "unsupported_value" })
      const tools = [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }]
      expect(yield* ask({ tools })).toMatchObject({ status: 400, param: "tools", code: "unsupported_parameter" })
      expect(yield* ask({ tool_choice: "required" })).toMatchObject({ status: 400, param: "tool_choice" })
      // A deeply nested value is named by its kind, not serialized back (that overflowed the stack: a 500).
      const nested = yield* Effect.promise(() =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: `{"model":"quiet","messages":[{"role":"user","content":"Hi."}],"tool_choice":${"[".repeat(200_000)}${"]".repeat(200_000)}}`
        }).then(async (response) => ({ status: response.status, body: await response.json() as { error: { param: string; message: string } } }))
      )
      expect(nested).toMatchObject({ status: 400, body: { error: { param: "tool_choice" } } })
      expect(nested.body.error.message).toContain("got an array")
      expect(yield* ask({ functions: [{ name: "weather", parameters: {} }] })).toMatchObject({ status: 400, param: "functions" })
      expect(yield* ask({ logprobs: true })).toMatchObject({ status: 400, param: "logprobs" })
      expect(yield* ask({ modalities: ["text", "audio"] })).toMatchObject({ status: 400, param: "modalities" })
      expect(yield* ask({ response_format: { type: "grammar", grammar: "root ::= x" } }))
        .toMatchObject({ status: 400, param: "response_format.type", code: "unsupported_value" })
      expect(yield* ask({ response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/$defs/Missing" } } } }))
        .toMatchObject({ status: 400, param: "response_format.json_schema.schema" })
      const tiff = yield* ask({}, [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/tiff;base64,AA==" } }] }])
      expect(tiff).toMatchObject({ status: 400, param: "messages[0].content[0]", code: "invalid_value" })
      expect(tiff!.message).toContain("unknown image media type \"image/tiff\"")
      expect(yield* ask({}, [{ role: "user", content: [{ type: "image_url", image_url: { url: "file:///etc/passwd" } }] }]))
        .toMatchObject({ status: 400, param: "messages[0].content[0]" })
      expect(yield* ask({}, [{ role: "user", content: [{ type: "refusal", refusal: "no" }] }]))
        .toMatchObject({ status: 400, param: "messages[0].content[0].type", code: "unsupported_value" })
      // Accepted: what an agent does anyway, and the sampling knobs its architecture owns (not used).
      expect(yield* ask({ n: 1, tools: [], tool_choice: "auto", logprobs: false, temperature: 0.3, seed: 7, stop: ["x"] })).toBeUndefined()
      // Only that last request started a run: every refusal came before one.
      expect((yield* quiet.calls).length).toBe(1)
    }).pipe(Effect.scoped), 30_000)

  it.live("openai: response_format json_schema is honoured, streaming or not: the content is the decoded JSON", () =>
    Effect.gen(function*() {
      const geo = inspected("geo", [
        `{"city": "Paris"}`, // does not match: repaired
        "```json\n{\"city\": \"Paris\", \"population\": 2100000}\n```",
        `Here: {"city": "Lyon", "population": 520000, "note": "extra keys are dropped"}`
      ])
      const url = yield* serve([geo.agent])
      const client = openAiClient(url)
      const response_format = { type: "json_schema" as const, json_schema: { name: "city", schema: CitySchema, strict: true } }
      const answer = yield* Effect.promise(() =>
        client.chat.completions.create({ model: "geo", messages: [{ role: "user", content: "Largest city of France?" }], response_format })
      )
      expect(JSON.parse(answer.choices[0]!.message.content!)).toEqual({ city: "Paris", population: 2100000 })
      const streamed = yield* Effect.promise(async () => {
        const stream = await client.chat.completions.create({
          model: "geo",
          messages: [{ role: "user", content: "Second city of France?" }],
          response_format,
          stream: true
        })
        let text = ""
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
        return text
      })
      expect(JSON.parse(streamed)).toEqual({ city: "Lyon", population: 520000 })
      // Asked natively, with the client's schema.
      const [first, repair, third] = yield* geo.calls
      for (const request of [first, repair, third]) {
        expect(request!.responseFormat).toMatchObject({ type: "json_schema", schema: { properties: { population: { type: "integer" } } } })
      }
      expect(repair!.messages!.at(-1)!.content).toContain("population")
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK: Output.object over json_schema and json_object; max_tokens is the run's output budget", () =>
    Effect.gen(function*() {
      const geo = inspected("geo", [
        { text: `{"city": "Paris", "population": 2100000}` },
        { text: `{"city": "Lyon", "population": 520000}` },
        { text: "A long answer that", usage: { inputTokens: 5, outputTokens: 4 } }
      ])
      const url = yield* serve([geo.agent])
      const City = z.object({ city: z.string(), population: z.number().int() })
      const strict = createOpenAICompatible({ name: "valet", baseURL: `${url}/v1`, supportsStructuredOutputs: true })
      const loose = createOpenAICompatible({ name: "valet", baseURL: `${url}/v1` })
      const viaSchema = yield* Effect.promise(() =>
        generateText({ model: strict("geo"), output: Output.object({ schema: City }), prompt: "Largest city of France?" })
      )
      expect(viaSchema.output).toEqual({ city: "Paris", population: 2100000 })
      // Without structured outputs the provider asks for json_object: any JSON object, which the SDK then checks.
      const viaObject = yield* Effect.promise(() =>
        generateText({ model: loose("geo"), output: Output.object({ schema: City }), prompt: "Second city of France?" })
      )
      expect(viaObject.output).toEqual({ city: "Lyon", population: 520000 })
      const capped = yield* Effect.promise(() => generateText({ model: loose("geo"), maxOutputTokens: 4, prompt: "Tell me all." }))
      expect(capped.finishReason).toBe("length")
      const [schemaCall, objectCall, cappedCall] = yield* geo.calls
      expect(schemaCall!.responseFormat).toMatchObject({ type: "json_schema", schema: { required: ["city", "population"] } })
      expect(objectCall!.responseFormat).toMatchObject({ type: "json_schema", schema: { type: "object" } })
      // The budget lowered the call's own limit to what the run had left.
      expect(cappedCall!.maxTokens).toBe(4)
    }).pipe(Effect.scoped), 30_000)

  it("runRequestOf: the last user message is the input only when nothing follows it; tool results stay tool results", () => {
    const call = { id: "call_1", type: "function" as const, function: { name: "search", arguments: `{"q":"x"}` } }
    expect(OpenAiApi.runRequestOf({
      model: "a",
      messages: [
        { role: "developer", content: "d" },
        { role: "user", content: "q1" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: "call_1", content: "r" },
        { role: "user", content: "q2" }
      ]
    })).toEqual(Result.succeed({
      agent: "a",
      input: "q2",
      history: [
        Model.system("d"),
        Model.user("q1"),
        Model.assistant("", [{ id: "call_1", name: "search", arguments: `{"q":"x"}` }]),
        Model.toolResult("call_1", "search", "r")
      ]
    }))
    // Ending with a tool result: every message is history, the input is empty.
    const ending = OpenAiApi.runRequestOf({
      model: "a",
      messages: [{ role: "user", content: "q1" }, { role: "assistant", tool_calls: [call] }, { role: "tool", tool_call_id: "call_1", content: "r" }]
    })
    expect(ending).toEqual(Result.succeed({
      agent: "a",
      input: "",
      history: [Model.user("q1"), Model.assistant("", [{ id: "call_1", name: "search", arguments: `{"q":"x"}` }]), Model.toolResult("call_1", "search", "r")]
    }))
    // `max_tokens` is the run's output-token budget; `response_format` its structured output.
    expect(OpenAiApi.runRequestOf({
      model: "a",
      messages: [{ role: "user", content: "q" }],
      max_tokens: 50,
      response_format: { type: "json_object" }
    })).toEqual(Result.succeed({ agent: "a", input: "q", output: { type: "object" }, budget: { maxOutputTokens: 50 } }))
  })

  it("runRequestOf: a user message's image, audio and file parts reach the run's conversation as valet parts", () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    const run = OpenAiApi.runRequestOf({
      model: "a",
      messages: [
        { role: "system", content: "Look." },
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "image_url", image_url: { url: `data:image/png;base64,${png}`, detail: "low" } },
            { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
            { type: "input_audio", input_audio: { data: "UklGRg==", format: "wav" } },
            { type: "file", file: { file_data: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" } }
          ]
        }
      ]
    })
    // The last message keeps its parts in the history; the run's (text) input is empty, so the history is the
    // conversation.
    expect(run).toEqual(Result.succeed({
      agent: "a",
      input: "",
      history: [
        Model.system("Look."),
        Model.user([
          Model.textPart("What is this?"),
          { type: "image", data: png, mediaType: "image/png", detail: "low" },
          Model.imagePart({ url: "https://example.com/cat.png" }),
          Model.audioPart("UklGRg==", "wav"),
          Model.filePart({ data: "JVBERi0=", mediaType: "application/pdf", name: "a.pdf" })
        ])
      ]
    }))
  })

  it("runRequestOf: cache_control { type: \"ephemeral\" } on a text part is a cache breakpoint (on a system message: the message's); another type is refused", () => {
    const ephemeral = { type: "ephemeral" }
    const run = OpenAiApi.runRequestOf({
      model: "a",
      messages: [
        { role: "system", content: [{ type: "text", text: "Rules.", cache_control: ephemeral }] },
        { role: "user", content: [{ type: "text", text: "Long document.", cache_control: { ...ephemeral, ttl: "1h" } }, { type: "text", text: "Question?" }] }
      ]
    })
    expect(run).toEqual(Result.succeed({
      agent: "a",
      input: "",
      history: [
        Model.system("Rules.", { cacheControl: "ephemeral" }),
        Model.user([Model.textPart("Long document.", { cacheControl: "ephemeral" }), Model.textPart("Question?")])
      ]
    }))
    const refused = OpenAiApi.runRequestOf({
      model: "a",
      messages: [{ role: "user", content: [{ type: "text", text: "q", cache_control: { type: "persistent" } }] }]
    })
    expect(Result.isFailure(refused) && refused.failure).toMatchObject({ param: "messages[0].content[0].cache_control.type" })
  })

  it("runRequestOf: a broken tool exchange is refused naming the message", () => {
    const call = { id: "call_1", function: { name: "search", arguments: "{}" } }
    const param = (messages: OpenAiApi.ChatCompletionRequest["messages"]) => {
      const run = OpenAiApi.runRequestOf({ model: "a", messages })
      return Result.isFailure(run) ? run.failure.param : "accepted"
    }
    expect(param([{ role: "user", content: "q" }, { role: "tool", tool_call_id: "call_9", content: "r" }])).toBe("messages[1].tool_call_id")
    expect(param([{ role: "user", content: "q" }, { role: "assistant", tool_calls: [call] }, { role: "tool", content: "r" }]))
      .toBe("messages[2].tool_call_id")
    // A tool call left without its result, before the next message or at the end.
    expect(param([{ role: "user", content: "q" }, { role: "assistant", tool_calls: [call] }, { role: "user", content: "q2" }]))
      .toBe("messages[1].tool_calls")
    expect(param([{ role: "user", content: "q" }, { role: "assistant", tool_calls: [call] }])).toBe("messages[1].tool_calls")
    expect(param([{ role: "user", content: [{ type: "text", text: "q" }, { type: "image_url" }] }])).toBe("messages[0].content[1].image_url")
    expect(param([{ role: "assistant", content: [{ type: "image_url", image_url: { url: "https://x/a.png" } }] }, { role: "user", content: "q" }]))
      .toBe("messages[0].content[0].type")
    expect(param([{ role: "user", content: "q" }, { role: "assistant", content: "", function_call: { name: "f", arguments: "{}" } }]))
      .toBe("messages[1].function_call")
  })
})

describe("OpenAiApi: owners (the app's auth, RunsApi.Owner)", () => {
  it.live("/v1/chat/completions runs are the request's owner's: another owner neither lists, reads, follows nor cancels them; a request the owner function refuses is a 401 and runs nothing", () =>
    Effect.gen(function*() {
      const owner = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) =>
        request.headers["x-user"] === undefined
          ? Effect.fail(new RunsApi.Unauthorized({ message: "who are you?" }))
          : Effect.succeed(request.headers["x-user"]))
      const url = yield* serve([scripted("echo", () => ({ text: "Ada's answer." }))], { owner })
      const as = (user: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, defaultHeaders: { "x-user": user } })
      const answer = yield* Effect.promise(() => as("ada").chat.completions.create({ model: "echo", messages: [{ role: "user", content: "Ada's secret question" }] }))
      expect(answer.choices[0]!.message.content).toBe("Ada's answer.")
      const runId = answer.id.replace(/^chatcmpl-/, "")
      const read = (path: string, user: string, method = "GET") =>
        Effect.promise(() =>
          fetch(`${url}${path}`, { method, headers: { "x-user": user, "content-type": "application/json" }, ...(method === "POST" ? { body: "{}" } : {}) })
            .then(async (response) => ({ status: response.status, body: await response.text() }))
        )
      // Ada's own run is hers.
      expect(JSON.parse((yield* read("/runs", "ada")).body).runs.map((run: { runId: string }) => run.runId)).toEqual([runId])
      // Bob: not listed, not found.
      const listed = yield* read("/runs?full=true", "bob")
      expect(listed.body).not.toContain("secret question")
      expect(JSON.parse(listed.body).runs).toEqual([])
      expect((yield* read(`/runs/${runId}`, "bob")).status).toBe(404)
      expect((yield* read(`/runs/${runId}/events`, "bob")).status).toBe(404)
      expect((yield* read(`/runs/${runId}/cancel`, "bob", "POST")).status).toBe(404)
      // No owner: the app's 401, in OpenAI's shape, and no run.
      const refused = yield* Effect.promise(() =>
        openAiClient(url).chat.completions.create({ model: "echo", messages: [{ role: "user", content: "x" }] }).then(() => undefined, (error: unknown) => error)
      )
      expect(refused).toBeInstanceOf(OpenAI.AuthenticationError)
      expect((refused as Error).message).toMatch(/who are you\?/)
      expect(JSON.parse((yield* read("/runs", "ada")).body).runs).toHaveLength(1)
      // The agents are the app's users' to see: listed for an owner, a 401 without one (OpenAI's shape on /v1).
      expect((yield* Effect.promise(() => as("bob").models.list())).data.map((model) => model.id)).toEqual(["echo"])
      const models = yield* Effect.promise(() => openAiClient(url).models.list().then(() => undefined, (error: unknown) => error))
      expect(models).toBeInstanceOf(OpenAI.AuthenticationError)
      expect(JSON.parse((yield* read("/agents", "bob")).body).agents.map((agent: { name: string }) => agent.name)).toEqual(["echo"])
      const agents = yield* Effect.promise(() => fetch(`${url}/agents`).then(async (response) => ({ status: response.status, body: await response.json() })))
      expect(agents).toMatchObject({ status: 401, body: { _tag: "Unauthorized" } })
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi: a run that needs a person", () => {
  it.live("openai: a tool call that needs approval fails the completion with 409 needs_approval (it cannot wait); streamed, an error frame", () =>
    Effect.gen(function*() {
      const guarded = Tool.make({
        name: "refund",
        description: "Refunds",
        parameters: Schema.Struct({ amount: Schema.Number }),
        handler: () => Effect.succeed("refunded"),
        needsApproval: true
      })
      const agent = Agent.make({
        name: "support",
        instructions: "Help.",
        tools: [guarded],
        model: Layer.orDie(ScriptedModel.layer(() => ({ toolCalls: [{ id: "c1", name: "refund", arguments: { amount: 5 } }] })))
      }) as Agent.Agent<never>
      const url = yield* serve([agent])
      const client = openAiClient(url)
      const refused = yield* refusedWith(client.chat.completions.create({ model: "support", messages: [{ role: "user", content: "Refund." }] }))
      expect(refused).toMatchObject({ status: 409, code: "needs_approval", type: "invalid_request_error" })
      expect(refused?.message).toMatch(/needs a person's approval of tool "refund" \(call c1\), which the OpenAI API cannot wait for/)
      const streamed = yield* Effect.promise(async () => {
        const stream = await client.chat.completions.create({ model: "support", stream: true, messages: [{ role: "user", content: "Refund." }] })
        try {
          for await (const _ of stream) { /* until the error */ }
          return undefined
        } catch (error) {
          return error instanceof Error ? error.message : String(error)
        }
      })
      expect(streamed).toMatch(/needs a person's approval of tool "refund"/)
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi: prompt-cache counts", () => {
  it.live("the run's cached input tokens come back where OpenAI puts them (prompt_tokens_details.cached_tokens)", () =>
    Effect.gen(function*() {
      const cached = Agent.make({
        name: "cached",
        instructions: "Be brief.",
        model: Layer.orDie(ScriptedModel.layer([{ text: "Paris.", usage: { inputTokens: 2006, outputTokens: 3, cachedInputTokens: 1920 } }]))
      }) as Agent.Agent<never>
      const url = yield* serve([cached, recording])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const ask = (model: string) =>
        Effect.promise(() => client.chat.completions.create({ model, messages: [{ role: "user", content: "Capital of France?" }] }))
      expect((yield* ask("cached")).usage).toEqual({
        prompt_tokens: 2006,
        completion_tokens: 3,
        total_tokens: 2009,
        prompt_tokens_details: { cached_tokens: 1920 }
      })
      // A run whose model said nothing of a cache: no details, as before.
      expect((yield* ask("echo")).usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 })
    }))
})
