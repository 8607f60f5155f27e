/**
 * The OpenAI Responses API facade (`POST /v1/responses`), driven by clients no one here wrote: the `openai`
 * package's `responses.create` / `responses.stream` and the AI SDK's OpenAI provider (`openai.responses(...)`), over
 * loopback against `Server.layerNode`, with agents on scripted models.
 */
import { createOpenAI } from "@ai-sdk/openai"
import { describe, expect, it } from "@effect/vitest"
import { generateText, streamText } from "ai"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import OpenAI from "openai"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Guardrail from "../../src/core/Guardrail.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import { expectWeatherExchange, inspected, openAiClient, refusedWith, weatherExchange } from "../support/openAiFacade.js"
import * as LoopbackServer from "../support/openAiServer.js"
import { json, post, scriptedAgent, serveAgents, sseEvents } from "../support/serve.js"


const answer = { text: "Paris is the capital of France.", usage: { inputTokens: 11, outputTokens: 7 } }


describe("OpenAiApi /v1/responses (the openai package as client)", () => {
  it.live("responses.create: a string input runs the agent; output_text, usage, status completed", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = openAiClient(url)
      const response = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Capital of France?" }))
      expect(response.object).toBe("response")
      expect(response.id).toMatch(/^resp_/)
      expect(response.status).toBe("completed")
      expect(response.error).toBeNull()
      expect(response.output_text).toBe("Paris is the capital of France.")
      expect(response.output).toEqual([{
        id: expect.stringMatching(/^msg_/),
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Paris is the capital of France.", annotations: [], logprobs: [] }]
      }])
      expect(response.usage).toEqual({
        input_tokens: 11,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 7,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 18
      })
      expect((yield* echo.calls)[0]!.messages).toEqual([Model.system("Be brief."), Model.user("Capital of France?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("responses.create: instructions, then message items in order; the last user message is the input", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = openAiClient(url)
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      yield* Effect.promise(() =>
        client.responses.create({
          model: "echo",
          instructions: "Answer in French if asked to.",
          temperature: 0.3,
          input: [
            { role: "developer", content: "Be exact." },
            { role: "user", content: "Hi." },
            { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello!", annotations: [] }], id: "msg_1", status: "completed" },
            { role: "user", content: [{ type: "input_text", text: "Which city?" }, { type: "input_image", image_url: `data:image/png;base64,${png}`, detail: "auto" }] },
            { type: "reasoning", id: "rs_1", summary: [] },
            { role: "user", content: [{ type: "input_text", text: "Capital of France?" }] }
          ]
        })
      )
      expect((yield* echo.calls)[0]!.messages).toEqual([
        Model.system("Be brief."),
        Model.system("Answer in French if asked to."),
        Model.system("Be exact."),
        Model.user("Hi."),
        Model.assistant("Hello!"),
        Model.user([Model.textPart("Which city?"), { ...Model.imagePart({ data: png, mediaType: "image/png" }), detail: "auto" }]),
        Model.user("Capital of France?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("what the facade cannot honour is a 400 naming the parameter or the item, in OpenAI's shape, and no run starts", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = openAiClient(url)
      const create = (body: Record<string, unknown>) =>
        refusedWith(client.responses.create({ model: "echo", input: "x", ...body } as OpenAI.Responses.ResponseCreateParamsNonStreaming))
      expect(yield* create({ tools: [{ type: "function", name: "f", parameters: {}, strict: true }] })).toMatchObject({
        status: 400,
        param: "tools",
        code: "unsupported_parameter",
        type: "invalid_request_error"
      })
      const computer = yield* create({ input: [{ type: "computer_call", id: "c", call_id: "c", action: { type: "screenshot" }, pending_safety_checks: [], status: "completed" }] })
      expect(computer).toMatchObject({ status: 400, param: "input[0].type", code: "unsupported_value" })
      expect(computer?.message).toMatch(/computer_call items are not supported/)
      const fileId = yield* create({ input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] })
      expect(fileId).toMatchObject({ status: 400, param: "input[0].content[0].file_id" })
      expect(yield* create({ input: [{ type: "item_reference", id: "msg_1" }] })).toMatchObject({ status: 400, param: "input[0].type" })
      expect(yield* create({ previous_response_id: "resp_1" })).toMatchObject({ status: 400, param: "previous_response_id" })
      expect(yield* create({ background: true })).toMatchObject({ status: 400, param: "background" })
      expect(yield* create({ tool_choice: "required" })).toMatchObject({ status: 400, param: "tool_choice" })
      expect(yield* create({ text: { format: { type: "json_schema", name: "x" } } })).toMatchObject({ status: 400, param: "text.format.schema" })
      expect(yield* create({ input: [{ type: "function_call_output", call_id: "nobody", output: "x" }] })).toMatchObject({
        status: 400,
        param: "input[0].call_id"
      })
      expect(yield* create({ input: [{ role: "assistant", content: "only me" }] })).toMatchObject({ status: 400, param: "input" })
      // A body that does not decode: the path of the first bad field.
      expect(yield* create({ input: [{ role: "user", content: 7 }] })).toMatchObject({ status: 400, param: "input[0].content" })
      const unknown = yield* refusedWith(client.responses.create({ model: "nobody", input: "x" }))
      expect(unknown).toMatchObject({ status: 404, code: "model_not_found" })
      expect(yield* echo.calls).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("the server's token and body cap apply to /v1/responses, answered in OpenAI's shape", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("echo", ["hi"])], { token: Redacted.make("s3cret"), maxBodyBytes: 2_000 })
      const denied = yield* refusedWith(new OpenAI({ baseURL: `${url}/v1`, apiKey: "wrong", maxRetries: 0 }).responses.create({ model: "echo", input: "x" }))
      expect(denied).toMatchObject({ status: 401, type: "authentication_error" })
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "s3cret", maxRetries: 0 })
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: "x".repeat(5_000) }))).toMatchObject({ status: 413 })
      expect((yield* Effect.promise(() => client.responses.create({ model: "echo", input: "x" }))).output_text).toBe("hi")
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxConcurrentRuns a response is a 429 rate_limit_exceeded with Retry-After", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serveAgents([remote], { maxConcurrentRuns: 1 })
      const client = openAiClient(url)
      const controller = new AbortController()
      // The first response holds the one slot: its model call stalls.
      yield* Effect.promise(async () => {
        for await (const event of client.responses.stream({ model: "remote", input: "hi" }, { signal: controller.signal })) {
          if (event.type === "response.created") return
        }
      })
      const second = yield* post(`${url}/v1/responses`, { model: "remote", input: "and me?" })
      controller.abort()
      expect(second.status).toBe(429)
      expect(second.headers.get("retry-after")).toMatch(/^\d+$/)
      expect(yield* json(second)).toMatchObject({ error: { type: "rate_limit_exceeded", code: "rate_limit_exceeded" } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a failed run is a failed response naming the run's error; max_output_tokens reached is status incomplete", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([
        scriptedAgent("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }]),
        scriptedAgent("long", [{ text: "a long answer", usage: { inputTokens: 3, outputTokens: 9 } }])
      ])
      const client = openAiClient(url)
      const failed = yield* Effect.promise(() => client.responses.create({ model: "broken", input: "x" }))
      expect(failed.status).toBe("failed")
      expect(failed.error).toMatchObject({ type: "server_error", code: "RateLimited" })
      expect(failed.error?.message).toMatch(/slow down/)
      const cut = yield* Effect.promise(() => client.responses.create({ model: "long", input: "x", max_output_tokens: 9 }))
      expect(cut.status).toBe("incomplete")
      expect(cut.incomplete_details).toEqual({ reason: "max_output_tokens" })
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi /v1/responses: how a run that ended early is reported", () => {
  it.live("a cancelled run is status cancelled; a budget other than output tokens is incomplete naming itself (not max_output_tokens), streamed too", () =>
    Effect.gen(function*() {
      const add = Tool.make({ name: "add", description: "adds", parameters: Schema.Struct({}), handler: () => Effect.succeed("2") })
      const counter = Agent.make({ name: "counter", instructions: "", tools: [add], model: ScriptedModel.layer(() => ({ toolCalls: [{ name: "add", arguments: {} }] })) })
      const url = yield* serveAgents([
        scriptedAgent("slow", [{ text: "never", delay: "20 seconds" }]),
        { name: "counter", description: "", architecture: "tool-loop", agent: counter, budget: { maxCalls: 1 } }
      ])
      const client = openAiClient(url)
      // Cancelled through the runs API while it waits for its model.
      const pending = client.responses.create({ model: "slow", input: "hi", store: false })
      const runId = yield* Effect.promise(async () => {
        for (;;) {
          const listed = (await (await fetch(`${url}/runs`)).json()) as { runs: ReadonlyArray<{ runId: string; status: string }> }
          const running = listed.runs.find((run) => run.status === "running")
          if (running !== undefined) return running.runId
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
      })
      yield* Effect.promise(() => fetch(`${url}/runs/${runId}/cancel`, { method: "POST" }))
      const cancelled = yield* Effect.promise(() => pending)
      expect(cancelled.status).toBe("cancelled")
      expect(cancelled.incomplete_details).toEqual({ reason: "cancelled" })
      // The agent's call budget: incomplete, and the reason is the budget's, not max_output_tokens.
      const cut = yield* Effect.promise(() => client.responses.create({ model: "counter", input: "count" }))
      expect(cut.status).toBe("incomplete")
      expect(cut.incomplete_details).toEqual({ reason: "budget:max_calls" })
      const streamed = yield* Effect.promise(async () => {
        const types: Array<string> = []
        const stream = client.responses.stream({ model: "counter", input: "count" })
        for await (const event of stream) types.push(event.type)
        return { last: types.at(-1), final: await stream.finalResponse() }
      })
      expect(streamed.last).toBe("response.incomplete")
      expect(streamed.final.incomplete_details).toEqual({ reason: "budget:max_calls" })
    }).pipe(Effect.scoped), 30_000)
})

/** The fields a streamed and a non-streamed response share (ids and times differ). */
const comparable = (response: OpenAI.Responses.Response) => {
  const { created_at: _, id: __, output, ...rest } = response
  return { ...rest, output: output.map((item) => ({ ...item, id: "" })) }
}

describe("OpenAiApi /v1/responses streaming", () => {
  it.live("responses.stream: response.created first, the item and part added before the deltas, sequence numbers, no [DONE]", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("echo", [answer])])
      const client = openAiClient(url)
      const { events, final } = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "echo", input: "Capital of France?" })
        const events: Array<OpenAI.Responses.ResponseStreamEvent> = []
        for await (const event of stream) events.push(event)
        return { events, final: await stream.finalResponse() }
      })
      const types = events.map((event) => event.type)
      const deltas = types.filter((type) => type === "response.output_text.delta").length
      // The scripted model streams the answer in several pieces: each is a delta, as generated.
      expect(deltas).toBeGreaterThan(2)
      expect(types).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        ...Array.from({ length: deltas }, () => "response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed"
      ])
      expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, i) => i))
      expect(final.output_text).toBe("Paris is the capital of France.")
      // The streamed response (response.completed's, before the client adds its parsed fields) is the one
      // `responses.create` answers.
      const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
      const whole = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Capital of France?" }))
      expect(comparable(completed.response)).toEqual(comparable(whole))
      // Raw: event names on the frames, and the stream ends after response.completed (no [DONE]).
      const raw = yield* sseEvents(yield* post(`${url}/v1/responses`, { model: "echo", input: "x", stream: true }))
      expect(raw[0]!.event).toBe("response.created")
      expect(raw.at(-1)!.event).toBe("response.completed")
      expect(raw.every((event) => event.data !== "[DONE]" && JSON.parse(event.data).type === event.event)).toBe(true)
    }).pipe(Effect.scoped), 30_000)

  it.live("an answer made by sub-agents (Self-Refine) is one delta; a failed run rejects responses.stream with the run's error", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([
        scriptedAgent("writer", ["Paris is the capital", "Add a full stop.", "Paris is the capital.", "No issues."], SelfRefine.architecture),
        scriptedAgent("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }])
      ])
      const client = openAiClient(url)
      const refined = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "writer", input: "Capital of France?" })
        const deltas: Array<string> = []
        for await (const event of stream) if (event.type === "response.output_text.delta") deltas.push(event.delta)
        return { deltas, final: await stream.finalResponse() }
      })
      expect(refined.deltas).toEqual(["Paris is the capital."])
      expect(refined.final.output_text).toBe("Paris is the capital.")
      const failed = yield* Effect.promise(async () => {
        const types: Array<string> = []
        try {
          for await (const event of client.responses.stream({ model: "broken", input: "x" })) types.push(event.type)
          return { types, error: undefined }
        } catch (error) {
          return { types, error }
        }
      })
      expect(failed.error).toBeInstanceOf(OpenAI.APIError)
      expect((failed.error as Error).message).toMatch(/slow down/)
      expect(failed.types[0]).toBe("response.created")
      // Raw: the error event, then response.failed with the response's error.
      const raw = yield* sseEvents(yield* post(`${url}/v1/responses`, { model: "broken", input: "x", stream: true }))
      expect(raw.slice(-2).map((event) => event.event)).toEqual(["error", "response.failed"])
      expect(JSON.parse(raw.at(-1)!.data).response).toMatchObject({ status: "failed", error: { message: expect.stringMatching(/slow down/) } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a tool loop's text said on the way is an output message of its own: the deltas, the messages and output_text agree, streamed or not", () =>
    Effect.gen(function*() {
      const weather = Tool.make({ name: "weather", description: "the weather", parameters: Schema.Struct({}), handler: () => Effect.succeed("sunny") })
      // A call, then the answer from its result; "Tomorrow?" is answered at once.
      const script: ScriptedModel.Script = (request) => {
        const last = request.messages?.at(-1)
        return last?.role === "tool"
          ? { text: "It is sunny." }
          : last !== undefined && Model.textOf(last.content) === "Tomorrow?"
          ? { text: "Tomorrow too." }
          : { text: "Let me check. ", toolCalls: [{ name: "weather", arguments: {} }] }
      }
      const context = ScriptedModel.context(script)
      const agent = Agent.make({ name: "w", instructions: "", tools: [weather], model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) })
      const url = yield* serveAgents([agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const streamed = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "w", input: "Weather?" })
        let deltas = ""
        const done: Array<string> = []
        let completed: OpenAI.Responses.Response | undefined
        for await (const event of stream) {
          if (event.type === "response.output_text.delta") deltas += event.delta
          if (event.type === "response.output_text.done") done.push(event.text)
          if (event.type === "response.completed") completed = event.response
        }
        return { deltas, done, final: completed! }
      })
      expect(streamed.done).toEqual(["Let me check. ", "It is sunny."])
      expect(streamed.deltas).toBe("Let me check. It is sunny.")
      expect(streamed.final.output_text).toBe("Let me check. It is sunny.")
      const texts = (response: OpenAI.Responses.Response) =>
        response.output.map((item) => (item as OpenAI.Responses.ResponseOutputMessage).content.map((part) => (part as OpenAI.Responses.ResponseOutputText).text).join(""))
      expect(texts(streamed.final)).toEqual(["Let me check. ", "It is sunny."])
      const plain = yield* Effect.promise(() => client.responses.create({ model: "w", input: "Weather?" }))
      expect(comparable(plain)).toEqual(comparable(streamed.final))
      const ids = plain.output.map((item) => (item as OpenAI.Responses.ResponseOutputMessage).id)
      expect(new Set(ids).size).toBe(2)
      // The AI SDK names both messages by item_reference: the turn's answer, said once.
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const first = yield* Effect.promise(() => generateText({ model: openai.responses("w"), prompt: "Weather?" }))
      expect(first.text).toBe("Let me check. It is sunny.")
      const second = yield* Effect.promise(() =>
        generateText({ model: openai.responses("w"), messages: [{ role: "user", content: "Weather?" }, ...first.response.messages, { role: "user", content: "Tomorrow?" }] })
      )
      expect(second.text).toBe("Tomorrow too.")
      const calls = yield* ScriptedModel.calls.pipe(Effect.provide(context))
      expect(calls.at(-1)!.messages).toEqual([Model.user("Weather?"), Model.assistant("It is sunny."), Model.user("Tomorrow?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("a client that aborts mid-stream cancels the run: the model request is aborted", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serveAgents([remote])
      const client = openAiClient(url)
      const controller = new AbortController()
      const reading = (async () => {
        try {
          for await (const _ of client.responses.stream({ model: "remote", input: "hi" }, { signal: controller.signal })) { /* until aborted */ }
          return "ended"
        } catch (error) {
          return (error as Error).name
        }
      })()
      const until = Date.now() + 5_000
      while (!model.requests.some((request) => request.path === "/v1/chat/completions") && Date.now() < until) {
        yield* Effect.sleep("20 millis")
      }
      controller.abort()
      yield* Effect.promise(() => reading)
      yield* model.closedEarlySignal
      expect(model.closedEarly()).toBe(1)
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi /v1/responses (the AI SDK's OpenAI provider, openai.responses)", () => {
  it.live("generateText and streamText", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("echo", [answer])])
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const generated = yield* Effect.promise(() => generateText({ model: openai.responses("echo"), prompt: "Capital of France?" }))
      expect(generated.text).toBe("Paris is the capital of France.")
      expect(generated.finishReason).toBe("stop")
      expect(generated.usage).toMatchObject({ inputTokens: 11, outputTokens: 7, totalTokens: 18 })
      const streamed = streamText({ model: openai.responses("echo"), prompt: "Capital of France?" })
      expect(yield* Effect.promise(() => streamed.text)).toBe("Paris is the capital of France.")
      expect(yield* Effect.promise(() => streamed.finishReason)).toBe("stop")
      expect(yield* Effect.promise(() => streamed.usage)).toMatchObject({ inputTokens: 11, outputTokens: 7 })
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi /v1/responses: function_call and function_call_output items", () => {
  it.live("openai: the calls and their outputs reach the model as a tool exchange; an unanswered call is a 400 naming it", () =>
    Effect.gen(function*() {
      const weather = inspected("weather", ["It is 18°C and sunny.", "Rain tomorrow."])
      const url = yield* serveAgents([weather.agent])
      const client = openAiClient(url)
      const exchange: Array<OpenAI.Responses.ResponseInputItem> = [
        { role: "user", content: "Weather in Paris and Rome?" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Looking.", annotations: [] }], id: "msg_a", status: "completed" },
        { type: "function_call", call_id: "call_1", name: "weather", arguments: `{"city":"Paris"}` },
        { type: "function_call", call_id: "call_2", name: "weather", arguments: `{"city":"Rome"}` },
        { type: "function_call_output", call_id: "call_2", output: "21°C" },
        { type: "function_call_output", call_id: "call_1", output: [{ type: "input_text", text: "18°C, " }, { type: "input_text", text: "sunny" }] }
      ]
      const first = yield* Effect.promise(() => client.responses.create({ model: "weather", input: exchange }))
      expect(first.output_text).toBe("It is 18°C and sunny.")
      yield* Effect.promise(() =>
        client.responses.create({ model: "weather", input: [...exchange, { role: "assistant", content: "It is 18°C and sunny." }, { role: "user", content: "And tomorrow?" }] })
      )
      const [one, two] = yield* weather.calls
      const messages = [
        Model.system("Be brief."),
        Model.user("Weather in Paris and Rome?"),
        Model.assistant("Looking.", [
          { id: "call_1", name: "weather", arguments: `{"city":"Paris"}` },
          { id: "call_2", name: "weather", arguments: `{"city":"Rome"}` }
        ]),
        Model.toolResult("call_2", "weather", "21°C"),
        Model.toolResult("call_1", "weather", "18°C, sunny")
      ]
      // The conversation ends with the outputs: the model continues it, with no empty user turn after it.
      expect(one!.messages).toEqual(messages)
      expect(two!.messages).toEqual([...messages, Model.assistant("It is 18°C and sunny."), Model.user("And tomorrow?")])
      const unanswered = yield* refusedWith(client.responses.create({ model: "weather", input: [...exchange.slice(0, 5), { role: "user", content: "?" }] }))
      expect(unanswered).toMatchObject({ status: 400, param: "input[2].call_id" })
      expect(unanswered?.message).toMatch(/"call_1" has no function_call_output/)
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK: tool-call and tool-result parts reach the model as a tool exchange", () =>
    Effect.gen(function*() {
      const weather = inspected("weather", ["It is 18°C and sunny."])
      const url = yield* serveAgents([weather.agent])
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const generated = yield* Effect.promise(() =>
        generateText({
          model: openai.responses("weather"),
          messages: weatherExchange
        })
      )
      expect(generated.text).toBe("It is 18°C and sunny.")
      const [request] = yield* weather.calls
      expectWeatherExchange(request)
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK, a second turn: with store false the earlier answer is sent whole; with its default (store true) the item_reference is a 400 saying so", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", ["Paris.", "Rome."])
      const url = yield* serveAgents([echo.agent])
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const providerOptions = { openai: { store: false } }
      const asked = { role: "user" as const, content: "Capital of France?" }
      const first = yield* Effect.promise(() => generateText({ model: openai.responses("echo"), messages: [asked], providerOptions }))
      const messages = [asked, ...first.response.messages, { role: "user" as const, content: "And of Italy?" }]
      const second = yield* Effect.promise(() => generateText({ model: openai.responses("echo"), messages, providerOptions }))
      expect(second.text).toBe("Rome.")
      expect((yield* echo.calls)[1]!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("Capital of France?"),
        Model.assistant("Paris."),
        Model.user("And of Italy?")
      ])
      const stored = yield* Effect.promise(() =>
        generateText({ model: openai.responses("echo"), messages, maxRetries: 0 }).then(() => "answered", (error: Error) => error.message)
      )
      expect(stored).toMatch(/item_reference.*providerOptions\.openai\.store = false/)
    }).pipe(Effect.scoped), 30_000)
})

const CitySchema = {
  type: "object",
  properties: { city: { type: "string" }, population: { type: "integer" } },
  required: ["city", "population"],
  additionalProperties: false
}

describe("OpenAiApi /v1/responses: structured output and runs that wait", () => {
  it.live("text.format json_schema is the run's structured output, streamed or not: the text is the decoded JSON, sent whole", () =>
    Effect.gen(function*() {
      const geo = inspected("geo", [
        "```json\n{\"city\": \"Paris\", \"population\": 2100000}\n```",
        `Here: {"city": "Lyon", "population": 520000, "note": "extra keys are dropped"}`
      ])
      const url = yield* serveAgents([geo.agent])
      const client = openAiClient(url)
      const text = { format: { type: "json_schema" as const, name: "city", schema: CitySchema, strict: true } }
      const answer = yield* Effect.promise(() => client.responses.create({ model: "geo", input: "Largest city of France?", text }))
      expect(JSON.parse(answer.output_text)).toEqual({ city: "Paris", population: 2100000 })
      expect(answer.text).toEqual(text)
      const deltas = yield* Effect.promise(async () => {
        const deltas: Array<string> = []
        for await (const event of client.responses.stream({ model: "geo", input: "Second city of France?", text })) {
          if (event.type === "response.output_text.delta") deltas.push(event.delta)
        }
        return deltas
      })
      // Known once decoded: one delta, the decoded value (the model's fence and extra key gone).
      expect(deltas.map((delta) => JSON.parse(delta))).toEqual([{ city: "Lyon", population: 520000 }])
      for (const request of yield* geo.calls) {
        expect(request.responseFormat).toMatchObject({ type: "json_schema", schema: { properties: { population: { type: "integer" } } } })
      }
    }).pipe(Effect.scoped), 30_000)

  it.live("a tool call that needs approval fails the response, code needs_approval (it cannot wait); streamed, the error pair", () =>
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
      const url = yield* serveAgents([agent])
      const client = openAiClient(url)
      const refused = yield* Effect.promise(() => client.responses.create({ model: "support", input: "Refund." }))
      expect(refused.status).toBe("failed")
      expect(refused.error).toMatchObject({ code: "needs_approval", type: "invalid_request_error" })
      expect(refused.error?.message).toMatch(/needs a person's approval of tool "refund" \(call c1\), which the OpenAI API cannot wait for/)
      const raw = yield* sseEvents(yield* post(`${url}/v1/responses`, { model: "support", input: "Refund.", stream: true }))
      expect(raw.slice(-2).map((event) => event.event)).toEqual(["error", "response.failed"])
      const error = JSON.parse(raw.at(-2)!.data)
      expect(error.error).toMatchObject({ code: "needs_approval", message: expect.stringMatching(/approval of tool "refund"/) })
      // openai 6.49's ResponseErrorEvent: code, message and param at the top too.
      expect(error).toMatchObject({ type: "error", code: "needs_approval", param: null, message: error.error.message })
    }).pipe(Effect.scoped), 30_000)
})

describe("OpenAiApi /v1/responses: stored responses are thread turns (previous_response_id, item_reference)", () => {
  /** `store` of a response object (the `openai` package's `Response` type leaves it out). */
  const storeOf = (response: object) => (response as { readonly store?: unknown }).store

  it.live("previous_response_id: turn 2 sees turn 1; branching from turn 1 after turn 2 forks (turn 2 unseen); unknown ids are a 400", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "First?" }))
      expect(storeOf(one)).toBe(true)
      const two = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Second?", previous_response_id: one.id }))
      expect(two.previous_response_id).toBe(one.id)
      // Branching: the answer to turn 1 again, with another question.
      yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Instead?", previous_response_id: one.id }))
      // Streamed, on from turn 2: the id is in response.created already.
      const streamed = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "echo", input: "Third?", previous_response_id: two.id })
        let created = ""
        for await (const event of stream) if (event.type === "response.created") created = event.response.id
        return { created, final: await stream.finalResponse() }
      })
      expect(streamed.created).toBe(streamed.final.id)
      const calls = yield* echo.calls
      const system = Model.system("Be brief.")
      expect(calls.map((call) => call.messages)).toEqual([
        [system, Model.user("First?")],
        [system, Model.user("First?"), Model.assistant("answer 1"), Model.user("Second?")],
        [system, Model.user("First?"), Model.assistant("answer 1"), Model.user("Instead?")],
        [system, Model.user("First?"), Model.assistant("answer 1"), Model.user("Second?"), Model.assistant("answer 2"), Model.user("Third?")]
      ])
      const unknown = yield* refusedWith(client.responses.create({ model: "echo", input: "x", previous_response_id: "resp_nope" }))
      expect(unknown).toMatchObject({ status: 400, param: "previous_response_id" })
      expect(unknown?.message).toMatch(/not found/)
      const reference = yield* refusedWith(client.responses.create({ model: "echo", input: [{ type: "item_reference", id: "msg_nope" }] }))
      expect(reference).toMatchObject({ status: 400, param: "input[0].id" })
      // store: false is a plain run: its id names nothing later.
      const plain = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Alone?", store: false }))
      expect(storeOf(plain)).toBe(false)
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: "x", previous_response_id: plain.id }))).toMatchObject({
        status: 400,
        param: "previous_response_id"
      })
    }).pipe(Effect.scoped), 30_000)

  it.live("another owner's response id reads as an unknown one", () =>
    Effect.gen(function*() {
      const echo = counting()
      const owner = Effect.map(Effect.service(HttpServerRequest.HttpServerRequest), (request) => request.headers["x-user"] ?? "anonymous")
      const url = yield* serveAgents([echo.agent], { owner }, Threads.layerMemory())
      const as = (user: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, defaultHeaders: { "x-user": user } })
      const mine = yield* Effect.promise(() => as("ann").responses.create({ model: "echo", input: "Secret?" }))
      expect(yield* refusedWith(as("bob").responses.create({ model: "echo", input: "x", previous_response_id: mine.id }))).toMatchObject({
        status: 400,
        param: "previous_response_id"
      })
      expect((yield* Effect.promise(() => as("ann").responses.create({ model: "echo", input: "Again?", previous_response_id: mine.id }))).status).toBe("completed")
    }).pipe(Effect.scoped), 30_000)

  it.live("the AI SDK with its default store true: the second turn's item_reference is the stored answer", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      const asked = { role: "user" as const, content: "Capital of France?" }
      const first = yield* Effect.promise(() => generateText({ model: openai.responses("echo"), messages: [asked] }))
      expect(first.text).toBe("answer 1")
      const second = yield* Effect.promise(() =>
        generateText({ model: openai.responses("echo"), messages: [asked, ...first.response.messages, { role: "user", content: "And of Italy?" }] })
      )
      expect(second.text).toBe("answer 2")
      expect((yield* echo.calls)[1]!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("Capital of France?"),
        Model.assistant("answer 1"),
        Model.user("And of Italy?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("an id names one turn: a refused turn's id names nothing (400, never another turn's answer); a forged key is a 400", () =>
    Effect.gen(function*() {
      const noHomework = Guardrail.make("no_homework", (subject) =>
        Effect.succeed(subject.text.includes("homework") ? Guardrail.trip("mentions homework") : Guardrail.pass))
      // Answers naming the question (a refused run may have called the model: input guardrails run beside it).
      const context = ScriptedModel.context((request) => ({ text: `answer to ${Model.textOf(request.messages?.at(-1)?.content ?? "")}` }))
      const guarded = Agent.make({
        name: "echo",
        instructions: "Be brief.",
        model: Layer.succeed(Model.Model, Context.get(context, Model.Model)),
        guardrails: { input: [noHomework] }
      }) as Agent.Agent<never>
      const url = yield* serveAgents([guarded], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "First?" }))
      // Refused by the input guardrail: the turn stores nothing.
      const two = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Do my homework", previous_response_id: one.id }))
      expect(two.status).toBe("failed")
      const three = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Other?", previous_response_id: one.id }))
      expect(three.status).toBe("completed")
      expect(three.id).not.toBe(two.id)
      expect(three.output[0]!.id).not.toBe(two.output[0]?.id)
      // The refused response names nothing: not found (not 409 forever, not three's exchange).
      const fromTwo = yield* refusedWith(client.responses.create({ model: "echo", input: "Continue from two?", previous_response_id: two.id }))
      expect(fromTwo).toMatchObject({ status: 400, param: "previous_response_id" })
      // three went on from one: its answer is there, and continuing from it reads it.
      const four = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "And?", previous_response_id: three.id }))
      expect(four.status).toBe("completed")
      // A refused response that would have made a thread (a new one, a branch) leaves none behind: no id names it.
      const threadsBefore = (yield* storedThreads(url)).length
      const refusedNew = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "More homework" }))
      const refusedBranch = yield* Effect.promise(() =>
        client.responses.create({ model: "echo", input: "My homework instead", previous_response_id: one.id })
      )
      expect([refusedNew.status, refusedBranch.status]).toEqual(["failed", "failed"])
      expect((yield* storedThreads(url)).length).toBe(threadsBefore)
      // A forged key on one's own thread (a turn that never was): 400, not 409.
      const threadId = Buffer.from(one.id.slice("resp_".length), "base64url").toString("utf8").split("\u0000")[0]!
      const forged = `resp_${Buffer.from(`${threadId}\u0000999999999`, "utf8").toString("base64url")}`
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: "x", previous_response_id: forged }))).toMatchObject({
        status: 400,
        param: "previous_response_id"
      })
      const calls = yield* ScriptedModel.calls.pipe(Effect.provide(context))
      const texts = calls.map((call) => (call.messages ?? []).map((message) => Model.textOf(message.content)))
      expect(texts.find((asked) => asked.at(-1) === "And?")).toEqual(
        ["Be brief.", "First?", "answer to First?", "Other?", "answer to Other?", "And?"]
      )
    }).pipe(Effect.scoped), 30_000)

  it.live("streamed: response.completed comes once the turn is written, so going on from it at once is no 409 (a store whose append is slow)", () =>
    Effect.gen(function*() {
      const echo = counting()
      // A store whose append takes a moment, as a database's round trip does.
      const slow = Layer.effect(
        Threads.Threads,
        Effect.map(Effect.service(Threads.Threads), (inner): Threads.Service => ({
          ...inner,
          append: (...args) => Effect.andThen(Effect.sleep("50 millis"), inner.append(...args))
        }))
      ).pipe(Layer.provide(Threads.layerMemory()))
      const url = yield* serveAgents([echo.agent], {}, slow)
      const client = openAiClient(url)
      const statuses: Array<string> = []
      let previous: string | undefined
      for (let i = 0; i < 3; i++) {
        const next = yield* Effect.promise(async () => {
          const stream = client.responses.stream({ model: "echo", input: `Question ${i}?`, ...(previous !== undefined ? { previous_response_id: previous } : {}) })
          for await (const event of stream) {
            if (event.type === "response.completed") {
              // On at once from the response just completed.
              return client.responses.create({ model: "echo", input: `Then ${i}?`, previous_response_id: event.response.id }).then(
                (response) => ({ status: response.status as string, id: response.id }),
                (error: unknown) => ({ status: error instanceof OpenAI.APIError ? `${error.status} ${error.code}` : String(error), id: undefined })
              )
            }
          }
          return { status: "no response.completed", id: undefined }
        })
        statuses.push(next.status)
        previous = next.id
      }
      expect(statuses).toEqual(["completed", "completed", "completed"])
    }).pipe(Effect.scoped), 30_000)

  it.live("a stored conversation ending in function_call_output keeps no empty user message: the next turn's model reads none, the thread holds none", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() =>
        client.responses.create({
          model: "echo",
          input: [
            { role: "user", content: "Weather?" },
            { type: "function_call", call_id: "c1", name: "weather", arguments: "{}" },
            { type: "function_call_output", call_id: "c1", output: "sunny" }
          ]
        })
      )
      const two = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "And tomorrow?", previous_response_id: one.id }))
      expect(two.output_text).toBe("answer 2")
      const exchange = [
        Model.user("Weather?"),
        Model.assistant("", [{ id: "c1", name: "weather", arguments: "{}" }]),
        Model.toolResult("c1", "weather", "sunny")
      ]
      const calls = yield* echo.calls
      expect(calls[1]!.messages).toEqual([Model.system("Be brief."), ...exchange, Model.assistant("answer 1"), Model.user("And tomorrow?")])
      expect((yield* storedThreads(url)).map((thread) => thread.messages)).toEqual([
        [...exchange, Model.assistant("answer 1"), Model.user("And tomorrow?"), Model.assistant("answer 2")]
      ])
      // Going on from one again branches after its answer (its messages end there).
      yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Instead?", previous_response_id: one.id }))
      expect((yield* echo.calls)[2]!.messages).toEqual([Model.system("Be brief."), ...exchange, Model.assistant("answer 1"), Model.user("Instead?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("two branches from the latest response under onBusy wait: the one that waited runs on a fork, not after its sibling", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", (request) => {
        const asked = Model.textOf(request.messages?.at(-1)?.content ?? "")
        // Branch A holds the thread a while, so that B is chosen (and waits) while A runs.
        return asked === "Branch A?" ? { text: "answer A", delay: "500 millis" } : { text: `answer to ${asked}` }
      })
      const url = yield* serveAgents([echo.agent], { turns: { onBusy: "wait" } }, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "First?" }))
      const [a, b] = yield* Effect.promise(async () => {
        const stream = client.responses.stream({ model: "echo", input: "Branch A?", previous_response_id: one.id })
        // A holds the thread once its response.created is sent.
        await new Promise<void>((resolve) => stream.on("response.created", () => resolve()))
        const b = client.responses.create({ model: "echo", input: "Branch B?", previous_response_id: one.id })
        return [await stream.finalResponse(), await b] as const
      })
      expect([a.status, b.status]).toEqual(["completed", "completed"])
      const requests = (yield* echo.calls).map((call) => (call.messages ?? []).map((message) => Model.textOf(message.content)))
      expect(requests).toContainEqual(["Be brief.", "First?", "answer to First?", "Branch A?"])
      expect(requests).toContainEqual(["Be brief.", "First?", "answer to First?", "Branch B?"])
      // Each branch goes on from itself.
      const fromA = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "After A?", previous_response_id: a.id }))
      expect(fromA.status).toBe("completed")
      expect((yield* echo.calls).at(-1)!.messages?.map((message) => Model.textOf(message.content))).toEqual(
        ["Be brief.", "First?", "answer to First?", "Branch A?", "answer A", "After A?"]
      )
    }).pipe(Effect.scoped), 30_000)

  it.live("an item_reference to a turn that ended early is the text the client was given, not the thread's note of how it ended", () =>
    Effect.gen(function*() {
      const add = Tool.make({ name: "add", description: "adds", parameters: Schema.Struct({}), handler: () => Effect.succeed("2") })
      const context = ScriptedModel.context((request) =>
        Model.textOf(request.messages?.at(-1)?.content ?? "") === "Next?" ? { text: "Done." } : { text: "Counting. ", toolCalls: [{ name: "add", arguments: {} }] }
      )
      const counter = Agent.make({ name: "counter", instructions: "", tools: [add], model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) })
      const url = yield* serveAgents([{ name: "counter", description: "", architecture: "tool-loop", agent: counter, budget: { maxCalls: 1 } }], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const cut = yield* Effect.promise(() => client.responses.create({ model: "counter", input: "Count." }))
      expect(cut.status).toBe("incomplete")
      // The thread keeps a note of how it ended.
      expect(JSON.stringify((yield* storedThreads(url)).map((thread) => thread.messages))).toContain("This turn ended early")
      const answer = cut.output.at(-1) as OpenAI.Responses.ResponseOutputMessage
      const itemId = answer.id
      const said = (answer.content[0] as OpenAI.Responses.ResponseOutputText).text
      const next = yield* Effect.promise(() =>
        client.responses.create({ model: "counter", input: [{ role: "user", content: "Count." }, { type: "item_reference", id: itemId }, { role: "user", content: "Next?" }] })
      )
      expect(next.output_text).toBe("Done.")
      const asked = (yield* ScriptedModel.calls.pipe(Effect.provide(context))).at(-1)!.messages ?? []
      expect(JSON.stringify(asked)).not.toContain("This turn ended early")
      // The answer the client was given (its last message), said once; nothing when it said nothing.
      expect(cut.output_text).toBe(said)
      expect(asked).toEqual(said === "" ? [Model.user("Count."), Model.user("Next?")] : [Model.user("Count."), Model.assistant(said), Model.user("Next?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("store false with previous_response_id reads that response's conversation and writes nothing; its own id names nothing", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "First?" }))
      const two = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Second?", store: false, previous_response_id: one.id }))
      expect(two.status).toBe("completed")
      expect(two.previous_response_id).toBe(one.id)
      expect(storeOf(two)).toBe(false)
      expect((yield* echo.calls)[1]!.messages).toEqual([Model.system("Be brief."), Model.user("First?"), Model.assistant("answer 1"), Model.user("Second?")])
      expect((yield* storedThreads(url)).map((thread) => thread.messages)).toEqual([[Model.user("First?"), Model.assistant("answer 1")]])
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: "x", previous_response_id: two.id }))).toMatchObject({
        status: 400,
        param: "previous_response_id"
      })
    }).pipe(Effect.scoped), 30_000)

  it.live("a response whose thread is in another turn is a 409 conversation_locked", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serveAgents([remote], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const controller = new AbortController()
      // The first turn stalls in its model call; its id is known from response.created.
      const id = yield* Effect.promise(async () => {
        for await (const event of client.responses.stream({ model: "remote", input: "hi" }, { signal: controller.signal })) {
          if (event.type === "response.created") return event.response.id
        }
        return ""
      })
      const locked = yield* refusedWith(client.responses.create({ model: "remote", input: "and?", previous_response_id: id }))
      controller.abort()
      expect(locked).toMatchObject({ status: 409, code: "conversation_locked" })
    }).pipe(Effect.scoped), 30_000)
})

/** The server's threads (GET /threads), each with its messages (GET /threads/:id), oldest first. */
/** Answers "answer <n>" to its n-th call; the messages of each call are read back. */
const counting = () => {
  let n = 0
  return inspected("echo", () => ({ text: `answer ${++n}` }))
}

const storedThreads = (url: string) =>
  Effect.gen(function*() {
    const listed = (yield* json(yield* Effect.promise(() => fetch(`${url}/threads`)))) as { threads: ReadonlyArray<{ id: string }> }
    const threads: Array<{ id: string; messages: ReadonlyArray<Model.Message> }> = []
    for (const { id } of listed.threads) {
      const page = (yield* json(yield* Effect.promise(() => fetch(`${url}/threads/${id}`)))) as { messages: { messages: ReadonlyArray<Model.Message> } }
      threads.push({ id, messages: page.messages.messages })
    }
    return threads
  })

describe("OpenAiApi /v1/responses stored turns: what is kept, checked, and when", () => {
  const noHomework = Guardrail.make("no_homework", (subject) =>
    Effect.succeed(subject.text.includes("homework") ? Guardrail.trip("mentions homework") : Guardrail.pass))

  it.live("the items before the input are checked by the input guardrails, and kept with the turn only when it is (one write)", () =>
    Effect.gen(function*() {
      // Answers naming the question (a refused run may have called the model: input guardrails run beside it).
      const script: ScriptedModel.Script = (request) => ({ text: `answer to ${Model.textOf(request.messages?.at(-1)?.content ?? "")}` })
      const context = ScriptedModel.context(script)
      const guarded = Agent.make({
        name: "guarded",
        instructions: "Be brief.",
        model: Layer.succeed(Model.Model, Context.get(context, Model.Model)),
        guardrails: { input: [noHomework] }
      }) as Agent.Agent<never>
      const url = yield* serveAgents([guarded], {}, Threads.layerMemory())
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })
      // What the guardrail refuses, in an earlier item of a stored response's conversation.
      const refused = yield* Effect.promise(() =>
        client.responses.create({
          model: "guarded",
          input: [{ role: "user", content: "Do my homework." }, { role: "assistant", content: "Sure." }, { role: "user", content: "Capital of France?" }]
        })
      )
      expect(refused.status).toBe("failed")
      expect(refused.error?.code).toBe("GuardrailTripped")
      expect(refused.error?.message).toMatch(/no_homework|homework/)
      // Nothing of it is on any thread: the next turn's model will not read it.
      expect((yield* storedThreads(url)).flatMap((thread) => thread.messages)).toEqual([])
      // A conversation that passes: its items are written with the turn, and the next turn reads them.
      const one = yield* Effect.promise(() =>
        client.responses.create({
          model: "guarded",
          input: [{ role: "user", content: "Hi." }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Capital of France?" }]
        })
      )
      expect(one.output_text).toBe("answer to Capital of France?")
      const two = yield* Effect.promise(() => client.responses.create({ model: "guarded", input: "And Italy?", previous_response_id: one.id }))
      expect(two.output_text).toBe("answer to And Italy?")
      expect((yield* storedThreads(url)).map((thread) => thread.messages)).toContainEqual([
        Model.user("Hi."),
        Model.assistant("Hello!"),
        Model.user("Capital of France?"),
        Model.assistant("answer to Capital of France?"),
        Model.user("And Italy?"),
        Model.assistant("answer to And Italy?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("instructions and system / developer items reach a stored turn's model, each call's own (not kept, not piled up)", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() =>
        client.responses.create({
          model: "echo",
          instructions: "Answer in French.",
          input: [{ role: "developer", content: "Be exact." }, { role: "user", content: "Capital of France?" }]
        })
      )
      yield* Effect.promise(() =>
        client.responses.create({ model: "echo", instructions: "Answer in Italian.", input: "And Italy?", previous_response_id: one.id })
      )
      const calls = yield* echo.calls
      expect(calls.map((call) => call.messages)).toEqual([
        [Model.system("Be brief."), Model.system("Answer in French."), Model.system("Be exact."), Model.user("Capital of France?")],
        [
          Model.system("Be brief."),
          Model.user("Capital of France?"),
          Model.assistant("answer 1"),
          Model.system("Answer in Italian."),
          Model.user("And Italy?")
        ]
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("a last input message with an image is the turn's task, kept whole (no empty user message); the next turn goes on from it", () =>
    Effect.gen(function*() {
      const echo = counting()
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      const asked = Model.user([Model.textPart("What is it?"), { ...Model.imagePart({ data: png, mediaType: "image/png" }), detail: "auto" }])
      const one = yield* Effect.promise(() =>
        client.responses.create({
          model: "echo",
          input: [{
            role: "user",
            content: [{ type: "input_text", text: "What is it?" }, { type: "input_image", image_url: `data:image/png;base64,${png}`, detail: "auto" }]
          }]
        })
      )
      yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Sure?", previous_response_id: one.id }))
      expect((yield* echo.calls).map((call) => call.messages)).toEqual([
        [Model.system("Be brief."), asked],
        [Model.system("Be brief."), asked, Model.assistant("answer 1"), Model.user("Sure?")]
      ])
      expect((yield* storedThreads(url)).map((thread) => thread.messages)).toEqual([
        [asked, Model.assistant("answer 1"), Model.user("Sure?"), Model.assistant("answer 2")]
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("response and item ids decode strictly (a variant is not found); too many stored turns named by item_reference is a 400", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", () => ({ text: "an answer" }))
      const url = yield* serveAgents([echo.agent], {}, Threads.layerMemory())
      const client = openAiClient(url)
      const one = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "First?" }))
      const body = one.id.slice("resp_".length)
      // base64url decoding skips what is not in its alphabet and ignores padding: each of these read as the same id.
      for (const variant of [`resp_${body}=`, `resp_${body.slice(0, 3)}!${body.slice(3)}`, `resp_${body}\n`]) {
        const refused = yield* refusedWith(client.responses.create({ model: "echo", input: "x", previous_response_id: variant }))
        expect(refused).toMatchObject({ status: 400, param: "previous_response_id" })
      }
      const itemId = (one.output[0] as OpenAI.Responses.ResponseOutputMessage).id
      const itemBody = itemId.slice("msg_".length)
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: [{ type: "item_reference", id: `msg_${itemBody}==` }, { role: "user", content: "x" }] })))
        .toMatchObject({ status: 400, param: "input[0].id" })
      // The same turn named many times is one read; 201 turns named is refused before any read.
      const same = Array.from({ length: 300 }, () => ({ type: "item_reference" as const, id: itemId }))
      expect((yield* Effect.promise(() => client.responses.create({ model: "echo", input: [...same, { role: "user", content: "Next?" }] }))).status)
        .toBe("completed")
      const threadId = Buffer.from(body, "base64url").toString("utf8").split("\u0000")[0]!
      const many = Array.from({ length: 201 }, (_, i) => ({
        type: "item_reference" as const,
        id: `msg_${Buffer.from(`${threadId}\u0000key${i}`, "utf8").toString("base64url")}`
      }))
      const tooMany = yield* refusedWith(client.responses.create({ model: "echo", input: [...many, { role: "user", content: "x" }] }))
      expect(tooMany).toMatchObject({ status: 400, param: "input[200].id" })
      expect(tooMany?.message).toMatch(/at most 200 stored turns/)
    }).pipe(Effect.scoped), 30_000)

  it.live("the app's owner function refusing a request is a 401 in OpenAI's shape (an AuthenticationError)", () =>
    Effect.gen(function*() {
      const owner = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) =>
        request.headers["x-user"] === undefined
          ? Effect.fail(new RunsApi.Unauthorized({ message: "who are you?" }))
          : Effect.succeed(request.headers["x-user"]))
      const url = yield* serveAgents([scriptedAgent("echo", ["hi"])], { owner }, Threads.layerMemory())
      const refused = yield* Effect.promise(() =>
        openAiClient(url).responses.create({ model: "echo", input: "x" }).then(
          () => undefined,
          (error: unknown) => error
        )
      )
      expect(refused).toBeInstanceOf(OpenAI.AuthenticationError)
      expect(refused).toMatchObject({ status: 401, type: "authentication_error" })
      expect((refused as Error).message).toMatch(/who are you\?/)
    }).pipe(Effect.scoped), 30_000)

  it.live("store: false drops the run from the registry once it ended, streamed or not; a run not stored otherwise stays listed", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("echo", () => ({ text: "hi" }))])
      const client = openAiClient(url)
      const runIds = Effect.map(
        Effect.flatMap(Effect.promise(() => fetch(`${url}/runs`)), json),
        (page) => (page as { runs: ReadonlyArray<{ runId: string }> }).runs.map((run) => run.runId)
      )
      const kept = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "x" }))
      yield* Effect.promise(() => client.responses.create({ model: "echo", input: "x", store: false }))
      yield* Effect.promise(async () => {
        for await (const _ of client.responses.stream({ model: "echo", input: "x", store: false })) {
          // read to the end
        }
      })
      expect(yield* runIds).toEqual([`run_${kept.id.slice("resp_".length)}`])
    }).pipe(Effect.scoped), 30_000)

  it.live("a turn refused for the server's run limit writes nothing and leaves no thread behind", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serveAgents([remote], { maxConcurrentRuns: 1 }, Threads.layerMemory())
      const client = openAiClient(url)
      const controller = new AbortController()
      // The first response holds the one slot (its model call stalls); its stream is kept open (closing it would
      // cancel the run).
      yield* Effect.promise(async () => {
        const response = await fetch(`${url}/v1/responses`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "remote", input: "hi", stream: true }),
          signal: controller.signal
        })
        await response.body!.getReader().read()
      })
      const second = yield* refusedWith(client.responses.create({
        model: "remote",
        input: [{ role: "user", content: "Earlier." }, { role: "assistant", content: "Yes." }, { role: "user", content: "Now?" }]
      }))
      expect(second).toMatchObject({ status: 429 })
      const threads = yield* storedThreads(url)
      controller.abort()
      // The first response's thread alone, nothing on it yet (a turn writes when it ends).
      expect(threads.map((thread) => thread.messages)).toEqual([[]])
    }).pipe(Effect.scoped), 30_000)

  it.live("a failed run answers 200 with status failed (x-should-retry: false): clients with default retries run it once", () =>
    Effect.gen(function*() {
      let calls = 0
      const script: ScriptedModel.Script = () => {
        calls++
        return { error: new ModelError.InvalidRequest({ status: 400, message: "bad request to the model" }) }
      }
      const context = ScriptedModel.context(script)
      const broken = Agent.make({ name: "broken", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serveAgents([broken])
      // The openai package with its default retries (2).
      const failed = yield* Effect.promise(() => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused" }).responses.create({ model: "broken", input: "x" }))
      expect(failed.status).toBe("failed")
      expect(failed.error?.message).toMatch(/bad request to the model/)
      expect(failed.output).toEqual([])
      expect(calls).toBe(1)
      // The AI SDK with its default retries (2): it throws, once.
      const thrown = yield* Effect.promise(() =>
        generateText({ model: createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" }).responses("broken"), prompt: "x" }).then(
          () => undefined,
          (error: unknown) => error as Error
        )
      )
      expect(thrown?.message).toMatch(/bad request to the model/)
      expect(calls).toBe(2)
      // The raw answer says not to retry.
      const raw = yield* post(`${url}/v1/responses`, { model: "broken", input: "x" })
      expect(raw.status).toBe(200)
      expect(raw.headers.get("x-should-retry")).toBe("false")
    }).pipe(Effect.scoped), 30_000)
})
