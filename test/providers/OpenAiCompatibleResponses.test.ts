/**
 * `OpenAiCompatible` with `api: "responses"`: `POST /v1/responses` against a loopback server replaying real OpenAI
 * Responses streams (test/fixtures/openai-responses, recorded by vercel/ai): the request body, the decoding of
 * text / tool calls / reasoning / usage, the reasoning items of one call sent back verbatim in the next call of a
 * tool loop (and through a journal), the errors after HTTP 200, an HTTP 400 body, a stream cut before its end, and
 * `valet.yaml`'s `api: responses`.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Result, Schema, Stream } from "effect"
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Agent from "../../src/core/Agent.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as Tool from "../../src/core/Tool.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Server from "../support/openAiServer.js"

const fixturesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "openai-responses")
const fixture = (name: string): string => readFileSync(join(fixturesDir, name), "utf8")

/** The recorded events (JSON lines), one list per response: a file may hold several, each from its `response.created`. */
const responsesOf = (name: string): Array<Array<string>> => {
  const out: Array<Array<string>> = []
  for (const line of fixture(name).split("\n")) {
    if (line.trim() === "") continue
    if (JSON.parse(line).type === "response.created" || out.length === 0) out.push([])
    out[out.length - 1]!.push(line)
  }
  return out
}

/** An SSE answer framing each recorded line as OpenAI does: `event: <type>\ndata: <line>\n\n`. */
const framed = (lines: ReadonlyArray<string>, options: { readonly cutAfter?: number } = {}): Server.Reply => ({
  _tag: "Events",
  pieces: lines.map((line) => `event: ${JSON.parse(line).type}\ndata: ${line}\n\n`),
  contentType: "text/event-stream",
  ...options
})

const clientLayer = (server: Server.LoopbackServer, options: Partial<OpenAiCompatible.Options> = {}) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "gpt-5.1-codex-max", api: "responses", maxAttempts: 1, ...options }).pipe(
    Layer.provide(NodeHttpClient.layerUndici)
  )

const withServer = <A, E>(
  body: (server: Server.LoopbackServer) => Effect.Effect<A, E, Model.Model | OpenAiCompatible.OpenAiCompatible>,
  options: Partial<OpenAiCompatible.Options> = {}
) => Effect.flatMap(Server.make(), (server) => Effect.provide(body(server), clientLayer(server, options)))

const posted = (server: Server.LoopbackServer) => server.requests.filter((r) => r.path === "/v1/responses").map((r) => r.body)

const calculator = Tool.make({
  name: "calculator",
  description: "A minimal calculator for basic arithmetic. Call it once per step.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number, op: Schema.Literals(["add", "subtract", "multiply", "divide"]) }),
  handler: ({ a, b, op }) => Effect.succeed(op === "add" ? a + b : op === "subtract" ? a - b : op === "multiply" ? a * b : a / b)
})
const mathAgent = Agent.make({ name: "math", instructions: "Use the calculator.", tools: [calculator] })
const task = "What is (12 + 7) * 3 * 10? Use the calculator for each step."

/** The reasoning item of the first recorded response, as its `response.output_item.done` has it. */
const recordedReasoning = () =>
  responsesOf("openai-reasoning-encrypted-content.1.chunks.txt")[0]!
    .map((line) => JSON.parse(line))
    .find((event) => event.type === "response.output_item.done" && event.item.type === "reasoning").item

describe("OpenAiCompatible api: responses — recorded streams", () => {
  it.effect("the phase recording: two messages' text joined, usage 7112/463 (3072 cached), stop; generate = accumulate(stream)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const [recorded] = responsesOf("openai-phase.1.chunks.txt")
        server.enqueue("/v1/responses", framed(recorded!), framed(recorded!))
        const chunks = yield* Stream.runCollect(Model.stream({ messages: [Model.user("AI news?")] }))
        expect(chunks[0]).toEqual({ _tag: "Metadata", id: "resp_0a63f40a2632b74300699f8818e5648196a8fa657ae8091421", model: "gpt-5.3-codex" })
        expect(chunks.filter((c) => c._tag === "TextDelta").map((c) => c.text)).toEqual(["Got", " it", "\n\nHere are a", " few **AI"])
        const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
        expect(streamed.choices).toEqual([{ index: 0, text: "Got it\n\nHere are a few **AI", toolCalls: [], finishReason: "stop" }])
        expect(streamed.usage).toEqual({ inputTokens: 7112, outputTokens: 463, totalTokens: 7575, cachedInputTokens: 3072 })
        expect(yield* Model.generate({ messages: [Model.user("AI news?")] })).toEqual(streamed)
        expect(posted(server).map((body) => body.stream)).toEqual([true, true])
      })
    ))

  it.effect("the encrypted-content recording, call 1: reasoning summary, one calculator call, the reasoning item on the choice", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/responses", framed(responsesOf("openai-reasoning-encrypted-content.1.chunks.txt")[0]!))
        const response = yield* Model.generate({ messages: [Model.user(task)] })
        const choice = response.choices[0]!
        expect(choice.reasoning).toBe(
          "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product."
        )
        expect(choice.toolCalls).toEqual([{ id: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", name: "calculator", arguments: "{\"a\":12,\"b\":7,\"op\":\"add\"}" }])
        expect(choice.finishReason).toBe("tool_calls")
        expect(choice.reasoningItems).toEqual([recordedReasoning()])
        expect(response.usage).toEqual({ inputTokens: 134, outputTokens: 28, totalTokens: 162, cachedInputTokens: 0 })
        expect(response.model).toBe("gpt-5.1-codex-max")
      })
    ))

  it.effect("a server that sends items only whole (no deltas), and an incomplete response: the same answer, finish length", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const [recorded] = responsesOf("openai-reasoning-encrypted-content.1.chunks.txt")
        const whole = recorded!.filter((line) => !JSON.parse(line).type.endsWith(".delta"))
        const [phase] = responsesOf("openai-phase.1.chunks.txt")
        const incomplete = JSON.parse(phase!.at(-1)!)
        incomplete.type = "response.incomplete"
        incomplete.response.status = "incomplete"
        incomplete.response.incomplete_details = { reason: "max_output_tokens" }
        server.enqueue(
          "/v1/responses",
          framed(recorded!),
          framed(whole),
          framed([...phase!.filter((line) => !JSON.parse(line).type.endsWith(".delta")).slice(0, -1), JSON.stringify(incomplete)])
        )
        const streamed = yield* Model.generate({ messages: [Model.user(task)] })
        expect(yield* Model.generate({ messages: [Model.user(task)] })).toEqual(streamed)
        // The recording's deltas were shortened; its done items hold the whole texts.
        const texts = phase!.map((line) => JSON.parse(line)).filter((event) => event.type === "response.output_item.done")
          .map((event) => event.item.content[0].text)
        expect(texts).toHaveLength(2)
        const cut = yield* Model.generate({ messages: [Model.user("AI news?")] })
        expect(cut.choices).toEqual([{ index: 0, text: texts.join("\n\n"), toolCalls: [], finishReason: "length" }])
      })
    ))
})

describe("OpenAiCompatible api: responses — the request", () => {
  it.effect("input items in order, flat tools, tool_choice, max_output_tokens, text.format, store:false, include, stream; extra last", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/responses", framed(responsesOf("openai-phase.1.chunks.txt")[0]!))
        const reasoning = { type: "reasoning", id: "rs_1", encrypted_content: "opaque", summary: [] }
        yield* Model.generate({
          messages: [
            Model.system("be brief"),
            Model.user([{ type: "text", text: "look" }, { type: "image", url: "https://example.com/a.png" }, { type: "file", mediaType: "application/pdf", data: "JVBERg==", name: "a.pdf" }]),
            { ...Model.assistant("let me add", [{ id: "call_1", name: "add", arguments: "{\"a\":1}" }]), reasoningItems: [reasoning] },
            Model.toolResult("call_1", "add", "2", [{ type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" }]),
            Model.assistant("done")
          ],
          tools: [{ name: "add", description: "Adds", parameters: { type: "object", properties: { a: { type: "number" } } } }],
          toolChoice: { name: "add" },
          maxTokens: 50,
          temperature: 0.2,
          responseFormat: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true },
          promptCache: { key: "k" },
          extra: { reasoning: { effort: "low" }, store: true }
        })
        expect(posted(server)[0]).toEqual({
          model: "gpt-5.1-codex-max",
          input: [
            { role: "system", content: "be brief" },
            {
              role: "user",
              content: [
                { type: "input_text", text: "look" },
                { type: "input_image", image_url: "https://example.com/a.png", detail: "auto" },
                { type: "input_file", file_data: "data:application/pdf;base64,JVBERg==", filename: "a.pdf" }
              ]
            },
            reasoning,
            { role: "assistant", content: [{ type: "output_text", text: "let me add" }] },
            { type: "function_call", call_id: "call_1", name: "add", arguments: "{\"a\":1}" },
            {
              type: "function_call_output",
              call_id: "call_1",
              output: [{ type: "input_text", text: "2" }, { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "auto" }]
            },
            { role: "assistant", content: [{ type: "output_text", text: "done" }] }
          ],
          tools: [{ type: "function", name: "add", description: "Adds", parameters: { type: "object", properties: { a: { type: "number" } } }, strict: false }],
          tool_choice: { type: "function", name: "add" },
          temperature: 0.2,
          max_output_tokens: 50,
          text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
          prompt_cache_key: "k",
          // `extra` wins, as on the chat wire.
          store: true,
          include: ["reasoning.encrypted_content"],
          stream: true,
          reasoning: { effort: "low" }
        })
      })
    ))

  it.effect("what the Responses API cannot carry is refused before any request: audio, n > 1, stop; a raw prompt stays on /v1/completions", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const audio = yield* Effect.flip(Model.generate({ messages: [Model.user([{ type: "audio", data: "AAAA", format: "wav" }])] }))
        expect(audio).toBeInstanceOf(ModelError.InvalidContent)
        expect(audio.message).toBe("messages[0].content[0]: the Responses API takes no audio input: use api: chat for this model, or transcribe the audio first")
        const n = yield* Effect.flip(Model.generate({ messages: [Model.user("x")], n: 2 }))
        expect(n).toEqual(new ModelError.InvalidRequest({ status: 0, message: "the Responses API (api: responses) has no n: 2 (one answer per call): leave it out, or use api: chat for this model" }))
        const stop = yield* Effect.flip(Model.generate({ messages: [Model.user("x")], stop: ["\n"] }))
        expect(stop.message).toMatch(/has no stop sequences/)
        expect(posted(server)).toEqual([])
        yield* Model.generate({ prompt: "Once" })
        expect(server.requests.map((r) => r.path)).toEqual(["/v1/completions"])
      })
    ))
})

describe("OpenAiCompatible api: responses — reasoning items sent back", () => {
  it.effect("a tool loop over the four recorded calls: call 1's reasoning item goes back verbatim before its function_call in calls 2-4", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/responses", ...responsesOf("openai-reasoning-encrypted-content.1.chunks.txt").map((lines) => framed(lines)))
        const result = yield* Agent.run(mathAgent, task)
        expect(result.output).toBe("The final result is **570**.")
        const bodies = posted(server)
        expect(bodies).toHaveLength(4)
        const reasoning = recordedReasoning()
        expect(bodies[0].input.filter((item: { type?: string }) => item.type === "reasoning")).toEqual([])
        // Call 2: the history, with the reasoning item as it came (encrypted_content and summary untouched), then the call and its result.
        expect(bodies[1].input).toEqual([
          { role: "system", content: expect.stringContaining("Use the calculator.") },
          { role: "user", content: task },
          reasoning,
          { type: "function_call", call_id: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", name: "calculator", arguments: "{\"a\":12,\"b\":7,\"op\":\"add\"}" },
          { type: "function_call_output", call_id: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", output: "19" }
        ])
        expect(bodies[3].input.filter((item: { type?: string }) => item.type === "reasoning")).toEqual([reasoning])
        expect(bodies[3].input.filter((item: { type?: string }) => item.type === "function_call_output").map((item: { output: string }) => item.output))
          .toEqual(["19", "57", "570"])
      })
    ))

  it.effect("the reasoning items survive a journal: recorded over the server, the run replays with no server (same request hashes)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${yield* fs.makeTempDirectoryScoped({ prefix: "valet-responses-" })}/run.jsonl`
      const server = yield* Server.make()
      server.enqueue("/v1/responses", ...responsesOf("openai-reasoning-encrypted-content.1.chunks.txt").map((lines) => framed(lines)))
      const recorded = yield* Agent.run(mathAgent, task).pipe(
        Effect.provide(Journal.layerRecord(path).pipe(Layer.provide(clientLayer(server)), Layer.provide(NodeServices.layer)))
      )
      const entries = yield* Journal.read(path)
      expect(entries.map((entry) => entry.response?.choices[0]?.reasoningItems?.length ?? 0)).toEqual([1, 0, 0, 0])
      const replayed = yield* Agent.run(mathAgent, task).pipe(
        Effect.provide(Journal.layerReplay(path).pipe(Layer.provide(NodeServices.layer)))
      )
      expect(replayed.output).toBe(recorded.output)
      expect(posted(server)).toHaveLength(4)
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)))
})

describe("OpenAiCompatible api: responses — errors", () => {
  it.effect("the recorded error after HTTP 200 (nested `error` event, insufficient_quota) → ServerError with OpenAI's message", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/responses", framed(responsesOf("openai-error.1.chunks.txt")[0]!))
        const error = yield* Effect.flip(Model.generate({ messages: [Model.user("hi")] }))
        expect(error).toBeInstanceOf(ModelError.ServerError)
        expect(error.message).toMatch(/^You exceeded your current quota/)
      })
    ))

  it.effect("codes map to their errors: flat `error` event rate_limit_exceeded → RateLimited; response.failed context_length_exceeded → ContextLengthExceeded", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const [recorded] = responsesOf("openai-error.1.chunks.txt")
        const created = recorded![0]!
        const failed = JSON.parse(recorded![3]!)
        failed.response.error = { code: "context_length_exceeded", message: "Your input exceeds the context window of this model." }
        server.enqueue(
          "/v1/responses",
          framed([created, JSON.stringify({ type: "error", sequence_number: 1, code: "rate_limit_exceeded", message: "Slow down.", param: null })]),
          framed([created, JSON.stringify(failed)])
        )
        const limited = yield* Effect.flip(Model.generate({ messages: [Model.user("hi")] }))
        expect(limited).toEqual(new ModelError.RateLimited({ message: "Slow down." }))
        const long = yield* Effect.flip(Model.generate({ messages: [Model.user("hi")] }))
        expect(long).toEqual(new ModelError.ContextLengthExceeded({ message: "Your input exceeds the context window of this model." }))
      })
    ))

  it.effect("the recorded HTTP 400 body (temperature not supported) → InvalidRequest with its message, not retried", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/responses", Server.json(fixture("reasoning-model-temperature-error.json"), { status: 400 }))
        const error = yield* Effect.flip(Model.generate({ messages: [Model.user("hi")], temperature: 0.5 }))
        expect(error).toEqual(new ModelError.InvalidRequest({ status: 400, message: "Unsupported parameter: 'temperature' is not supported with this model." }))
        expect(posted(server)).toHaveLength(1)
      }), { maxAttempts: 3 }))

  it.effect("a stream cut before response.completed → Transport (cut socket, and a clean end alike), never a short answer", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const [recorded] = responsesOf("openai-phase.1.chunks.txt")
        server.enqueue("/v1/responses", framed(recorded!, { cutAfter: 6 }), framed(recorded!.slice(0, -1)))
        const seen: Array<Model.Chunk> = []
        const cut = yield* Effect.flip(Model.stream({ messages: [Model.user("hi")] }).pipe(Stream.runForEach((chunk) => Effect.sync(() => seen.push(chunk)))))
        expect(cut._tag).toBe("Transport")
        expect(seen.map((c) => c._tag)).toEqual(["Metadata", "TextDelta", "TextDelta"])
        const ended = yield* Effect.flip(Model.generate({ messages: [Model.user("hi")] }))
        expect(ended).toEqual(new ModelError.Transport({
          message: `the stream from ${server.url}/v1/responses ended before response.completed after ${recorded!.length - 1} events: the connection was cut or the server stopped`
        }))
      })
    ))
})

describe("OpenAiCompatible api: responses — valet.yaml", () => {
  it.effect("models.<name>.api: responses sends the agent's calls to /v1/responses; a bad value names the key", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/responses", framed(responsesOf("openai-phase.1.chunks.txt")[0]!))
      const loaded = yield* Result.match(AgentConfig.parse(`
models:
  codex: { provider: openai-compatible, baseUrl: ${server.url}, model: gpt-5.3-codex, api: responses }
model: codex
agents:
  assistant: { instructions: Be brief. }
`, "valet.yaml"), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const result = yield* Agent.run(agents.get("assistant")!.agent, "AI news?")
      expect(result.output).toBe("Got it\n\nHere are a few **AI")
      expect(server.requests.map((r) => r.path)).toEqual(["/v1/responses"])
      expect(posted(server)[0]).toMatchObject({ model: "gpt-5.3-codex", store: false, stream: true })
      const bad = AgentConfig.parse(`model: { provider: openai-compatible, baseUrl: ${server.url}, model: m, api: completions }\nagents:\n  a: { instructions: x }\n`, "valet.yaml")
      expect(Result.isFailure(bad) && bad.failure.message).toMatch(/^valet\.yaml:1:\d+: model\.api /)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici))))
})
