import { readFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Schema, Stream } from "effect"
import { AiError, Chat, LanguageModel, Prompt, type Response, Tool, Toolkit } from "effect/ai"
import * as EffectAi from "../../src/providers/EffectAi.js"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as ValetTool from "../../src/core/Tool.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as Server from "../support/openAiServer.js"

const SearchGoogle = Tool.make("searchGoogle", {
  description: "Searches the web",
  parameters: Schema.Struct({ query: Schema.String }),
  success: Schema.String
})
const SearchToolkit = Toolkit.make(SearchGoogle)
const searchHandlers = SearchToolkit.toLayer({ searchGoogle: ({ query }) => Effect.succeed(`3 results for ${query}`) })

const client = (server: Server.LoopbackServer) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "m", maxAttempts: 1 }).pipe(
    Layer.provide(NodeHttpClient.layerUndici),
    // Valid options: a failure here is a bug in the test.
    Layer.orDie
  )

/** effect/ai's LanguageModel over valet's OpenAI-compatible client of the loopback server. */
const languageModel = (server: Server.LoopbackServer) => EffectAi.toLanguageModel.pipe(Layer.provide(client(server)))

const toolCallStream = Server.fixture("chat-stream-tool-call-vllm.sse")
const textStream = Server.fixture("chat-stream-usage.sse")

describe("EffectAi.toLanguageModel (valet's client as an effect/ai LanguageModel)", () => {
  it.effect("generateText: a tool call round-trips — the schema goes out, the params come back decoded, the handler runs", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(Server.chatCompletionOfStream(toolCallStream)))
      const response = yield* LanguageModel.generateText({ prompt: "What is new in AI?", toolkit: SearchToolkit }).pipe(
        Effect.provide(Layer.merge(languageModel(server), searchHandlers))
      )
      expect(response.toolCalls.map((call) => [call.id, call.name, call.params])).toEqual([
        ["chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", "searchGoogle", { query: "latest news on ai" }]
      ])
      expect(response.toolResults.map((result) => result.result)).toEqual(["3 results for latest news on ai"])
      expect(response.finishReason).toBe("tool-calls")
      // effect/ai 4 counts tokens per direction (no total).
      expect(response.usage).toMatchObject({ inputTokens: { total: 226 }, outputTokens: { total: 20 } })
      const sent = server.requests[0]!.body
      expect(sent.messages).toEqual([{ role: "user", content: "What is new in AI?" }])
      expect(sent.tools).toEqual([{
        type: "function",
        function: {
          name: "searchGoogle",
          description: "Searches the web",
          // effect 4's JSON Schema of a Struct allows other keys (a Struct ignores them when decoding).
          parameters: { type: "object", required: ["query"], properties: { query: { type: "string" } }, additionalProperties: true }
        }
      }])
      expect(sent.tool_choice).toBe("auto")
    }))

  it.effect("streamText: tool params stream in, then the whole call, the tool's result and the finish with usage 226/20", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.sseText(toolCallStream))
      const parts = yield* LanguageModel.streamText({ prompt: "What is new in AI?", toolkit: SearchToolkit }).pipe(
        Stream.runCollect,
        Effect.provide(Layer.merge(languageModel(server), searchHandlers))
      )
      expect(parts.map((part) => part.type)).toEqual([
        "response-metadata",
        "tool-params-start",
        "tool-params-delta",
        "tool-params-delta",
        "tool-params-delta",
        "tool-params-delta",
        "tool-params-delta",
        "tool-params-end",
        "tool-call",
        "tool-result",
        "finish"
      ])
      const deltas = parts.flatMap((part) => (part.type === "tool-params-delta" ? [part.delta] : []))
      expect(deltas.join("")).toBe("{\"query\": \"latest news on ai\"}")
      const result = parts.find((part) => part.type === "tool-result")
      expect(result).toMatchObject({ name: "searchGoogle", result: "3 results for latest news on ai" })
      const finish = parts.at(-1)
      expect(finish).toMatchObject({ type: "finish", reason: "tool-calls", usage: { inputTokens: { total: 226 }, outputTokens: { total: 20 } } })
    }))

  it.effect("text: streamed as one text block; generateText gives the same text", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.sseText(textStream), Server.json(Server.chatCompletionOfStream(textStream)))
      const program = Effect.gen(function*() {
        const parts = yield* LanguageModel.streamText({ prompt: "Weather?" }).pipe(Stream.runCollect)
        expect(parts[1]).toMatchObject({ type: "text-start" })
        expect(parts.filter((part) => part.type === "text-delta").map((part) => part.delta).join("")).toBe("{\"city\":\"San Francisco\",\"units\":\"f\"}")
        expect(parts.at(-2)).toMatchObject({ type: "text-end" })
        expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { inputTokens: { total: 71 }, outputTokens: { total: 10 } } })
        const response = yield* LanguageModel.generateText({ prompt: "Weather?" })
        expect(response.text).toBe("{\"city\":\"San Francisco\",\"units\":\"f\"}")
      })
      yield* Effect.provide(program, languageModel(server))
      // No toolkit: no tools sent.
      expect(server.requests.map((r) => r.body.tools)).toEqual([undefined, undefined])
    }))

  it.effect("a server error is an AiError carrying the typed ModelError", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json({ error: { message: "bad key" } }, { status: 401 }))
      const error = yield* Effect.flip(LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(languageModel(server))))
      // effect/ai 4 has one AiError whose `reason` says what went wrong.
      expect(error._tag).toBe("AiError")
      expect(error.reason._tag).toBe("AuthenticationError")
      expect(error.message).toMatch(/bad key/)
      expect(EffectAi.modelErrorOf(error)).toEqual(new ModelError.Unauthorized({ status: 401, message: "bad key" }))
    }))
})

describe("EffectAi.fromLanguageModel (any effect/ai LanguageModel as a valet Model)", () => {
  /** valet Model → effect/ai LanguageModel → valet Model → HTTP: the full round trip. */
  const roundTrip = (server: Server.LoopbackServer) => EffectAi.fromLanguageModel(languageModel(server))

  const search: Model.ToolDefinition = {
    name: "searchGoogle",
    description: "Searches the web",
    parameters: { type: "object", properties: { query: { type: "string", description: "the query" } }, required: ["query"] }
  }

  it.effect("a tool call round-trips: the definition's JSON schema reaches the server unchanged, the call comes back", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(Server.chatCompletionOfStream(toolCallStream)), Server.sseText(toolCallStream))
      const program = Effect.gen(function*() {
        const request: Model.Request = { messages: [Model.system("Use tools."), Model.user("What is new in AI?")], tools: [search] }
        const response = yield* Model.generate(request)
        expect(response.choices).toEqual([{
          index: 0,
          text: "",
          toolCalls: [{ id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", name: "searchGoogle", arguments: "{\"query\":\"latest news on ai\"}" }],
          finishReason: "tool_calls"
        }])
        expect(response.usage).toEqual({ inputTokens: 226, outputTokens: 20, totalTokens: 246 })
        expect(response.model).toBe("meta/llama-3.1-8b-instruct:fp8")
        const streamed = yield* Model.accumulate(Model.stream(request))
        expect(streamed).toEqual(response)
      })
      yield* Effect.provide(program, roundTrip(server))
      expect(server.requests[0]!.body.tools).toEqual([{ type: "function", function: search }])
      expect(server.requests[0]!.body.messages).toEqual([
        { role: "system", content: "Use tools." },
        { role: "user", content: "What is new in AI?" }
      ])
    }))

  it.effect("a ReAct agent runs its tool loop on it (the tool runs in valet, its result goes back as a tool message)", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(Server.chatCompletionOfStream(toolCallStream)))
      const searchTool = ValetTool.make({
        name: "searchGoogle",
        description: "Searches the web",
        parameters: Schema.Struct({ query: Schema.String }),
        handler: ({ query }) => Effect.succeed(`3 results for ${query}`)
      })
      const agent = Agent.make({ name: "researcher", instructions: "Use tools.", tools: [searchTool] })
      const result = yield* Agent.run(agent, "What is new in AI?").pipe(Effect.provide(roundTrip(server)))
      expect(result.output).toBe("Word0 word1 word2 word3 word4 word5 word6 word7")
      expect(result.modelCalls).toBe(2)
      const second = server.requests[1]!.body.messages
      expect(second.at(-2)).toEqual({
        role: "assistant",
        content: null,
        tool_calls: [{ id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", type: "function", function: { name: "searchGoogle", arguments: "{\"query\":\"latest news on ai\"}" } }]
      })
      expect(second.at(-1)).toEqual({ role: "tool", tool_call_id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", content: "3 results for latest news on ai" })
    }))

  it.effect("errors come back as the ModelError they started as", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "3" } }))
      const error = yield* Effect.flip(Model.generate({ messages: [Model.user("x")] }).pipe(Effect.provide(roundTrip(server))))
      expect(error).toEqual(new ModelError.RateLimited({ message: "slow down", retryAfterMs: 3000 }))
    }))
})

describe("effect/ai stays out of the root entry", () => {
  it("nothing the main entry point (src/index.ts) loads imports effect/ai", () => {
    const seen = new Set<string>()
    const offenders: Array<string> = []
    const visit = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      const text = readFileSync(file, "utf8")
      for (const match of text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
        const target = match[1] ?? match[2]!
        if (target === "effect/ai" || target.startsWith("effect/ai/")) offenders.push(file)
        if (target.startsWith(".")) visit(resolve(dirname(file), target.replace(/\.js$/, ".ts")))
      }
    }
    visit(resolve("src/index.ts"))
    expect(seen.size).toBeGreaterThan(20)
    expect(seen.has(resolve("src/providers/OpenAiCompatible.ts"))).toBe(true)
    expect(offenders).toEqual([])
    // And the bridge itself does import it (so the check above can fail).
    expect(readFileSync(resolve("src/providers/EffectAi.ts"), "utf8")).toContain("from \"effect/ai\"")
  })
})

// ---------------------------------------------------------------------------------------------------------
// A stand-in for an effect/ai provider: it reads its own `Config` service on every call, as OpenAiLanguageModel,
// AnthropicLanguageModel… do, and answers from a list of response parts.
// ---------------------------------------------------------------------------------------------------------

interface FakeConfig {
  readonly temperature?: number
  readonly top_p?: number
  readonly max_output_tokens?: number
  readonly stop?: ReadonlyArray<string>
  readonly seed?: number
  readonly [x: string]: unknown
}
const FakeConfig = Context.Reference<FakeConfig>("test/FakeProvider/Config", { defaultValue: () => ({}) })
const fakeWithConfigOverride = (overrides: FakeConfig) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(FakeConfig, (config) => Effect.provideService(self, FakeConfig, { ...config, ...overrides }))

/** What the fake provider saw on each call: the options `LanguageModel` prepared and its `Config`. */
interface Seen {
  readonly options: LanguageModel.ProviderOptions
  readonly config: FakeConfig
}

const fakeProvider = (
  answers: ReadonlyArray<ReadonlyArray<Response.PartEncoded>>,
  seen: Array<Seen>,
  /** The layer's own configuration, under the `Config` of each call (as `OpenAiLanguageModel.layer({ config })`). */
  defaults: FakeConfig = {}
) => {
  let call = 0
  const next = (options: LanguageModel.ProviderOptions) =>
    Effect.map(FakeConfig, (config) => {
      seen.push({ options, config: { ...defaults, ...config } })
      return answers[Math.min(call++, answers.length - 1)]!
    })
  return Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (options) => Effect.map(next(options), (parts) => [...parts]),
      streamText: (options) =>
        Stream.unwrap(Effect.map(next(options), (parts) =>
          Stream.fromIterable(parts.flatMap((part): Array<Response.StreamPartEncoded> =>
            part.type === "text"
              ? [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: part.text }, { type: "text-end", id: "t" }]
              : part.type === "reasoning" || part.type === "reasoning-delta" || part.type === "reasoning-end" || part.type === "tool-result"
              ? []
              : [part as Response.StreamPartEncoded]
          ))))
    })
  )
}

const finish = (reason: Response.FinishReason, input: number, output: number): Response.PartEncoded => ({
  type: "finish",
  reason,
  usage: { inputTokens: { total: input }, outputTokens: { total: output } }
})

const toOpenAi = (s: EffectAi.Sampling): FakeConfig => ({
  ...(s.temperature !== undefined ? { temperature: s.temperature } : {}),
  ...(s.topP !== undefined ? { top_p: s.topP } : {}),
  ...(s.maxTokens !== undefined ? { max_output_tokens: s.maxTokens } : {}),
  ...(s.stop !== undefined ? { stop: s.stop } : {}),
  ...(s.seed !== undefined ? { seed: s.seed } : {}),
  ...s.extra
})

describe("EffectAi.fromLanguageModel: sampling options", () => {
  const sampling = { temperature: 0.2, topP: 0.9, maxTokens: 64, stop: ["END"], seed: 7, extra: { top_k: 5 } }

  it.effect("reach the provider's own Config through the adapter, for generate and for stream", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const model = EffectAi.fromLanguageModel(
        // The provider's defaults: an override wins over them, keys the request leaves unset keep them.
        fakeProvider([[{ type: "text", text: "hi" }, finish("stop", 3, 1)]], seen, { temperature: 1, presence_penalty: 0.5 }),
        { sampling: (s) => fakeWithConfigOverride(toOpenAi(s)) }
      )
      const program = Effect.gen(function*() {
        const request: Model.Request = { messages: [Model.user("hello")], ...sampling }
        const response = yield* Model.generate(request)
        expect(Model.text(response)).toBe("hi")
        const streamed = yield* Model.accumulate(Model.stream(request))
        expect(Model.text(streamed)).toBe("hi")
        yield* Model.generate({ messages: [Model.user("no options")] })
      })
      yield* Effect.provide(program, model)
      const expected = { temperature: 0.2, top_p: 0.9, max_output_tokens: 64, stop: ["END"], seed: 7, top_k: 5, presence_penalty: 0.5 }
      expect(seen.map((s) => s.config)).toEqual([expected, expected, { temperature: 1, presence_penalty: 0.5 }])
    }))

  it.effect("without an adapter they are not sent (the LanguageModel interface has no place for them)", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const response = yield* Model.generate({ messages: [Model.user("hello")], ...sampling }).pipe(
        Effect.provide(EffectAi.fromLanguageModel(fakeProvider([[{ type: "text", text: "hi" }, finish("stop", 3, 1)]], seen)))
      )
      expect(Model.text(response)).toBe("hi")
      expect(seen.map((s) => s.config)).toEqual([{}])
    }))

  it.effect("both ways: valet's own LanguageModel reads them from EffectAi.Config, over the layer's defaults", () =>
    Effect.gen(function*() {
      const scripted = ScriptedModel.layer(["one", "two", "three"])
      const language = EffectAi.languageModel({ config: { temperature: 1, maxTokens: 10 } })
      const model = EffectAi.fromLanguageModel(language, { sampling: EffectAi.withConfigOverride })
      const calls = yield* Effect.gen(function*() {
        yield* Model.generate({ messages: [Model.user("a")], ...sampling })
        yield* Model.accumulate(Model.stream({ messages: [Model.user("b")], temperature: 0, seed: 1 }))
        yield* Model.generate({ messages: [Model.user("c")] })
        return yield* ScriptedModel.calls
      }).pipe(Effect.provide(Layer.provideMerge(model, scripted)))
      expect(calls.map(({ messages: _, ...options }) => options)).toEqual([
        { temperature: 0.2, topP: 0.9, maxTokens: 64, stop: ["END"], seed: 7, extra: { top_k: 5 } },
        { temperature: 0, maxTokens: 10, seed: 1 },
        { temperature: 1, maxTokens: 10 }
      ])
    }))
})

describe("EffectAi.languageModel: sampling options", () => {
  it.effect("withConfigOverride (effects) and Stream.provideService (streams) set them per call", () =>
    Effect.gen(function*() {
      const calls = yield* Effect.gen(function*() {
        yield* LanguageModel.generateText({ prompt: "a" })
        yield* LanguageModel.generateText({ prompt: "b" }).pipe(EffectAi.withConfigOverride({ temperature: 0, seed: 3, stop: ["\n"] }))
        yield* LanguageModel.streamText({ prompt: "c" }).pipe(
          Stream.provideService(EffectAi.Config, { topP: 0.5, extra: { min_p: 0.1 } }),
          Stream.runDrain
        )
        return yield* ScriptedModel.calls
      }).pipe(Effect.provide(EffectAi.languageModel({ config: { maxTokens: 32 } }).pipe(Layer.provideMerge(ScriptedModel.layer(["1", "2", "3"])))))
      expect(calls.map(({ messages: _, ...options }) => options)).toEqual([
        { maxTokens: 32 },
        { maxTokens: 32, temperature: 0, seed: 3, stop: ["\n"] },
        { maxTokens: 32, topP: 0.5, extra: { min_p: 0.1 } }
      ])
    }))
})

describe("EffectAi: a tool-call round trip both ways", () => {

  it.effect("effect/ai on valet: the toolkit's handler runs on valet's tool call, its result goes back as a tool message", () =>
    Effect.gen(function*() {
      const scripted = ScriptedModel.layer([
        { toolCalls: [{ id: "call_1", name: "searchGoogle", arguments: { query: "effect 4" } }] },
        "Effect 4 is out."
      ])
      const program = Effect.gen(function*() {
        const first = yield* LanguageModel.generateText({ prompt: "What is new?", toolkit: SearchToolkit })
        expect(first.toolCalls.map((call) => [call.id, call.name, call.params])).toEqual([["call_1", "searchGoogle", { query: "effect 4" }]])
        expect(first.toolResults.map((result) => result.result)).toEqual(["3 results for effect 4"])
        expect(first.finishReason).toBe("tool-calls")
        const prompt = Prompt.concat(Prompt.make("What is new?"), Prompt.fromResponseParts(first.content))
        const second = yield* LanguageModel.generateText({ prompt, toolkit: SearchToolkit })
        expect(second.text).toBe("Effect 4 is out.")
        return yield* ScriptedModel.calls
      })
      const calls = yield* program.pipe(Effect.provide(Layer.mergeAll(EffectAi.toLanguageModel.pipe(Layer.provideMerge(scripted)), searchHandlers)))
      expect(calls[0]!.tools).toEqual([{
        name: "searchGoogle",
        description: "Searches the web",
        parameters: Tool.getJsonSchema(SearchGoogle)
      }])
      expect(calls[0]!.toolChoice).toBe("auto")
      expect(calls[1]!.messages).toEqual([
        Model.user("What is new?"),
        Model.assistant("", [{ id: "call_1", name: "searchGoogle", arguments: "{\"query\":\"effect 4\"}" }]),
        Model.toolResult("call_1", "searchGoogle", "3 results for effect 4")
      ])
    }))

  it.effect("valet on effect/ai: a ReAct agent runs the provider's tool call in valet and sends the result back", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const provider = fakeProvider([
        [{ type: "response-metadata", id: "resp_1", modelId: "fake-1" }, { type: "tool-call", id: "call_9", name: "searchGoogle", params: { query: "effect 4" } }, finish("tool-calls", 10, 5)],
        [{ type: "text", text: "Effect 4 is out." }, finish("stop", 20, 4)]
      ], seen)
      const searchTool = ValetTool.make({
        name: "searchGoogle",
        description: "Searches the web",
        parameters: Schema.Struct({ query: Schema.String }),
        handler: ({ query }) => Effect.succeed(`3 results for ${query}`)
      })
      const agent = Agent.make({ name: "researcher", instructions: "Use tools.", tools: [searchTool] })
      const result = yield* Agent.run(agent, "What is new?").pipe(Effect.provide(EffectAi.fromLanguageModel(provider)))
      expect(result.output).toBe("Effect 4 is out.")
      expect(result.modelCalls).toBe(2)
      expect(result.usage).toEqual({ inputTokens: 30, outputTokens: 9, totalTokens: 39 })
      // The tool's JSON schema went out unchanged, as a tool of the provider's options.
      expect(seen[0]!.options.tools.map((tool) => [tool.name, Tool.getDescription(tool), Tool.getJsonSchema(tool)])).toEqual([
        ["searchGoogle", "Searches the web", searchTool.definition.parameters]
      ])
      expect(seen[1]!.options.prompt.content.slice(-2).map((message) => [message.role, message.content])).toEqual([
        ["assistant", [expect.objectContaining({ type: "tool-call", id: "call_9", name: "searchGoogle", params: { query: "effect 4" } })]],
        ["tool", [expect.objectContaining({ type: "tool-result", id: "call_9", name: "searchGoogle", result: "3 results for effect 4", isFailure: false })]]
      ])
    }))

  it.effect("a call to a tool the request does not declare still comes back (valet answers it with an error result)", () =>
    Effect.gen(function*() {
      const provider = fakeProvider([[{ type: "tool-call", id: "call_1", name: "rm_rf", params: { path: "/" } }, finish("tool-calls", 1, 1)]], [])
      const response = yield* Model.generate({ messages: [Model.user("x")], tools: [{ name: "ls", description: "lists", parameters: { type: "object" } }] }).pipe(
        Effect.provide(EffectAi.fromLanguageModel(provider))
      )
      expect(Model.toolCalls(response)).toEqual([{ id: "call_1", name: "rm_rf", arguments: "{\"path\":\"/\"}" }])
    }))
})

describe("EffectAi: errors", () => {
  it.effect("a valet error is the AiError reason that means the same, and comes back as itself across both bridges", () =>
    Effect.gen(function*() {
      const limited = new ModelError.RateLimited({ message: "slow down", retryAfterMs: 3000 })
      const error = yield* Effect.flip(LanguageModel.generateText({ prompt: "x" }).pipe(
        Effect.provide(EffectAi.toLanguageModel.pipe(Layer.provide(ScriptedModel.layer([{ error: limited }]))))
      ))
      expect(error._tag).toBe("AiError")
      expect(error.reason._tag).toBe("RateLimitError")
      expect(error.isRetryable).toBe(true)
      expect(error.retryAfter).toEqual(Duration.millis(3000))
      expect(EffectAi.modelErrorOf(error)).toEqual(limited)
      const back = yield* Effect.flip(Model.generate({ messages: [Model.user("x")] }).pipe(
        Effect.provide(EffectAi.fromLanguageModel(EffectAi.toLanguageModel.pipe(Layer.provide(ScriptedModel.layer([{ error: limited }])))))
      ))
      expect(back).toEqual(limited)
    }))

  it.effect("a foreign AiError is the ModelError its reason means", () =>
    Effect.gen(function*() {
      const failing = (reason: AiError.AiErrorReason) =>
        Layer.effect(
          LanguageModel.LanguageModel,
          LanguageModel.make({
            generateText: () => Effect.fail(AiError.make({ module: "Fake", method: "generateText", reason })),
            streamText: () => Stream.fail(AiError.make({ module: "Fake", method: "streamText", reason }))
          })
        )
      const errorOf = (reason: AiError.AiErrorReason) =>
        Effect.flip(Model.generate({ messages: [Model.user("x")] }).pipe(Effect.provide(EffectAi.fromLanguageModel(failing(reason)))))
      expect(yield* errorOf(new AiError.RateLimitError({ retryAfter: Duration.seconds(2) }))).toMatchObject({ _tag: "RateLimited", retryAfterMs: 2000 })
      expect(yield* errorOf(new AiError.AuthenticationError({ kind: "InvalidKey", http: { response: { status: 403, headers: {} } } })))
        .toMatchObject({ _tag: "Unauthorized", status: 403 })
      expect(yield* errorOf(new AiError.InvalidRequestError({ description: "This model's maximum context length is 8192 tokens" })))
        .toMatchObject({ _tag: "ContextLengthExceeded" })
      expect(yield* errorOf(new AiError.InternalProviderError({ description: "overloaded", http: { response: { status: 529, headers: {} } } })))
        .toMatchObject({ _tag: "ServerError", status: 529, message: "overloaded" })
      expect(yield* errorOf(new AiError.NetworkError({ reason: "TransportError", method: "POST", url: "https://x", description: "reset" })))
        .toMatchObject({ _tag: "Transport" })
      expect(yield* errorOf(new AiError.InvalidOutputError({ description: "not JSON" }))).toMatchObject({ _tag: "MalformedResponse" })
      const streamed = yield* Effect.flip(Model.accumulate(Model.stream({ messages: [Model.user("x")] })).pipe(
        Effect.provide(EffectAi.fromLanguageModel(failing(new AiError.RateLimitError({}))))
      ))
      expect(streamed._tag).toBe("RateLimited")
    }))

  it.effect("an error part inside a stream fails the stream with the ModelError it means", () =>
    Effect.gen(function*() {
      const provider = fakeProvider([[{ type: "text", text: "par" }, { type: "error", error: { message: "Rate limit reached", type: "rate_limit_error" } } as unknown as Response.PartEncoded]], [])
      const error = yield* Effect.flip(Model.accumulate(Model.stream({ messages: [Model.user("x")] })).pipe(Effect.provide(EffectAi.fromLanguageModel(provider))))
      expect(error).toMatchObject({ _tag: "RateLimited", message: "Rate limit reached" })
    }))
})

describe("EffectAi.fromLanguageModel: choices", () => {
  it.effect("n choices: one call each; generate and the accumulated stream agree", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const provider = fakeProvider([
        [{ type: "response-metadata", id: "r", modelId: "m" }, { type: "text", text: "same" }, finish("stop", 2, 1)]
      ], seen)
      const request: Model.Request = { messages: [Model.user("x")], n: 3 }
      const [generated, streamed] = yield* Effect.all([Model.generate(request), Model.accumulate(Model.stream(request))]).pipe(
        Effect.provide(EffectAi.fromLanguageModel(provider))
      )
      expect(generated.choices.map((choice) => [choice.index, choice.text, choice.finishReason])).toEqual([[0, "same", "stop"], [1, "same", "stop"], [2, "same", "stop"]])
      expect(generated.usage).toEqual({ inputTokens: 6, outputTokens: 3, totalTokens: 9 })
      expect(streamed).toEqual(generated)
      expect(seen.length).toBe(6)
    }))
})

describe("EffectAi.languageModel: structured output", () => {
  it.effect("generateObject sends the schema as a json_schema response format and decodes the answer", () =>
    Effect.gen(function*() {
      const Event = Schema.Struct({ title: Schema.String, year: Schema.Number })
      const [response, calls] = yield* Effect.all([
        LanguageModel.generateObject({ prompt: "Extract the event", schema: Event, objectName: "event" }),
        ScriptedModel.calls
      ]).pipe(Effect.provide(EffectAi.toLanguageModel.pipe(Layer.provideMerge(ScriptedModel.layer(["{\"title\":\"Effect Days\",\"year\":2026}"])))))
      expect(response.value).toEqual({ title: "Effect Days", year: 2026 })
      expect(calls[0]!.responseFormat).toEqual({
        type: "json_schema",
        name: "event",
        schema: LanguageModel.defaultCodecTransformer(Event).jsonSchema
      })
    }))
})

describe("EffectAi.toolsOf (effect/ai toolkits as valet tools)", () => {
  const Population = Tool.make("population", {
    description: "The population of a city",
    parameters: Schema.Struct({ city: Schema.String }),
    success: Schema.Number,
    failure: Schema.String,
    failureMode: "return"
  })
  const toolkit = Toolkit.make(Population)
  const handlers = toolkit.toLayer({
    population: ({ city }) => (city === "Paris" ? Effect.succeed(2100000) : Effect.fail(`no data for ${city}`))
  })

  it.effect("a ReAct agent calls the toolkit's tool through its handler; failures reach the model as results", () =>
    Effect.gen(function*() {
      const tools = yield* EffectAi.toolsOf(toolkit)
      expect(tools.map((tool) => tool.definition.name)).toEqual(["population"])
      expect(tools[0]!.definition.parameters).toMatchObject({ type: "object", properties: { city: { type: "string" } } })
      const agent = Agent.make({ name: "geo", instructions: "", tools })
      const result = yield* Agent.run(agent, "Population of Paris and of Atlantis?")
      expect(result.output).toBe("Paris: 2.1 million; Atlantis: unknown")
      const [, second] = yield* ScriptedModel.calls
      const results = second!.messages!.filter((m) => m.role === "tool").map((m) => m.content)
      expect(results).toEqual(["2100000", "no data for Atlantis"])
      expect(yield* tools[0]!.call(`{"city": "Atlantis"}`)).toEqual({ content: "no data for Atlantis", isError: true })
      // Bad JSON from the model is an error result too, not a failure of the run.
      const bad = yield* tools[0]!.call("{city:")
      expect(bad).toMatchObject({ isError: true, content: expect.stringMatching(/^ERROR: the arguments of tool "population" are not valid JSON/) })
      const undecodable = yield* tools[0]!.call(`{"city": 42}`)
      expect(undecodable.isError).toBe(true)
    }).pipe(
      Effect.provide(handlers),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { name: "population", arguments: { city: "Paris" } },
            { name: "population", arguments: { city: "Atlantis" } }
          ]
        },
        "Paris: 2.1 million; Atlantis: unknown"
      ]))
    ))
})

describe("effect/ai Chat on valet's languageModel", () => {
  it.effect("two turns with a tool against the recorded payloads: the history crosses the bridge whole", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(Server.chatCompletionOfStream(toolCallStream)))
      server.enqueue("/v1/chat/completions", Server.json(Server.chatCompletionOfStream(textStream)))
      const chat = yield* Chat.empty
      const model = languageModel(server)
      const first = yield* chat.generateText({ prompt: "What is new in AI?", toolkit: SearchToolkit }).pipe(
        Effect.provide(model)
      )
      expect(first.toolResults.map((result) => result.result)).toEqual(["3 results for latest news on ai"])
      const second = yield* chat.generateText({ prompt: "Summarize that in one line." }).pipe(Effect.provide(model))
      const recorded = Server.chatCompletionOfStream(textStream) as { choices: ReadonlyArray<{ message: { content: string } }> }
      expect(second.text).toBe(recorded.choices[0]!.message.content)

      // The second request carries the whole conversation: the question, the tool call, its result, the follow-up.
      const sent = server.requests[1]!.body.messages as ReadonlyArray<Record<string, any>>
      expect(sent.map((message) => message.role)).toEqual(["user", "assistant", "tool", "user"])
      expect(sent[1]!.tool_calls[0]).toMatchObject({ id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", function: { name: "searchGoogle" } })
      expect(sent[2]).toMatchObject({ tool_call_id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa" })
      expect(sent[2]!.content).toContain("3 results for latest news on ai")
      expect(sent[3]).toEqual({ role: "user", content: "Summarize that in one line." })
    }).pipe(Effect.provide(searchHandlers)))
})

describe("EffectAi: prompt-cache counts cross both bridges", () => {
  it.effect("effect/ai's cacheRead / cacheWrite are valet's cachedInputTokens / cacheWriteTokens (generate and stream)", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const finishCached: Response.PartEncoded = {
        type: "finish",
        reason: "stop",
        usage: { inputTokens: { total: 2006, uncached: 86, cacheRead: 1920, cacheWrite: 0 }, outputTokens: { total: 300 } }
      }
      const model = EffectAi.fromLanguageModel(fakeProvider([[{ type: "text", text: "hi" }, finishCached]], seen))
      const program = Effect.gen(function*() {
        const request: Model.Request = { messages: [Model.user("hello")] }
        const expected = { inputTokens: 2006, outputTokens: 300, totalTokens: 2306, cachedInputTokens: 1920, cacheWriteTokens: 0 }
        expect((yield* Model.generate(request)).usage).toEqual(expected)
        expect((yield* Model.accumulate(Model.stream(request))).usage).toEqual(expected)
      })
      yield* Effect.provide(program, model)
    }))

  it.effect("valet's client as a LanguageModel: the server's cached_tokens is the finish part's cacheRead", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const answer = { ...JSON.parse(Server.fixture("openai-chat-text.json")), usage: JSON.parse(Server.fixture("openai-usage-cached.json")) }
      server.enqueue("/v1/chat/completions", Server.json(answer))
      const response = yield* LanguageModel.generateText({ prompt: "A holiday?" }).pipe(Effect.provide(languageModel(server)))
      expect(response.usage.inputTokens).toMatchObject({ total: 2006, uncached: 86, cacheRead: 1920 })
    }))
})

describe("EffectAi: prompt-cache breakpoints cross both bridges", () => {
  const ephemeral = { cacheControl: { type: "ephemeral" } }

  it.effect("valet → effect/ai: a marked system message and text part carry anthropic and openrouter cacheControl options", () =>
    Effect.gen(function*() {
      const seen: Array<Seen> = []
      const model = EffectAi.fromLanguageModel(fakeProvider([[{ type: "text", text: "ok" }, finish("stop", 1, 1)]], seen))
      const request: Model.Request = {
        messages: [
          Model.system("Shared rules.", { cacheControl: "ephemeral" }),
          Model.user([Model.textPart("Shared document.", { cacheControl: "ephemeral" }), Model.textPart("Question?")])
        ]
      }
      yield* Effect.provide(Model.generate(request), model)
      const [system, user] = seen[0]!.options.prompt.content
      expect(system!.options).toEqual({ anthropic: ephemeral, openrouter: ephemeral })
      const parts = user!.role === "user" ? user!.content : []
      expect(parts.map((part) => part.options)).toEqual([{ anthropic: ephemeral, openrouter: ephemeral }, {}])
    }))

  it.effect("effect/ai → valet: either provider's cacheControl option reaches the wire as cache_control", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(JSON.parse(Server.fixture("openai-chat-text.json"))))
      const prompt = Prompt.make([
        { role: "system", content: "Shared rules.", options: { anthropic: ephemeral } },
        { role: "user", content: [{ type: "text", text: "Shared document.", options: { openrouter: ephemeral } }, { type: "text", text: "Question?" }] }
      ])
      yield* LanguageModel.generateText({ prompt }).pipe(Effect.provide(languageModel(server)))
      expect(server.requests[0]!.body.messages).toEqual([
        { role: "system", content: [{ type: "text", text: "Shared rules.", cache_control: { type: "ephemeral" } }] },
        {
          role: "user",
          content: [{ type: "text", text: "Shared document.", cache_control: { type: "ephemeral" } }, { type: "text", text: "Question?" }]
        }
      ])
    }))
})

describe("EffectAi: content parts both ways", () => {
  // A real 1×1 PNG; a PDF header; a WAV header: where the bytes go is what is checked.
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
  const pdf = "JVBERi0xLjQKJcfsj6IK"
  const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
  const wire = [
    { type: "text", text: "Compare" },
    { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
    { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
    { type: "input_audio", input_audio: { data: wav, format: "wav" } },
    { type: "file", file: { file_data: `data:application/pdf;base64,${pdf}`, filename: "report.pdf" } }
  ]

  it.effect("valet parts → effect/ai file parts → valet parts: the wire body is the one valet sends directly", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const request: Model.Request = {
        messages: [Model.user([
          Model.textPart("Compare"),
          Model.imagePart({ url: "https://example.com/cat.png" }),
          Model.imagePart({ data: png, mediaType: "image/png" }),
          Model.audioPart(wav, "wav"),
          Model.filePart({ data: pdf, mediaType: "application/pdf", name: "report.pdf" })
        ])]
      }
      yield* Effect.provide(Model.generate(request), EffectAi.fromLanguageModel(languageModel(server)))
      expect(server.requests[0]!.body.messages).toEqual([{ role: "user", content: wire }])
      // A bad part is refused before the provider sees it, generating or streaming, naming the part.
      const bad: Model.Request = { messages: [Model.user([Model.imagePart({ url: "ftp://example.com/a.png" })])] }
      const refused = yield* Effect.flip(Model.generate(bad)).pipe(Effect.provide(EffectAi.fromLanguageModel(languageModel(server))))
      expect(refused.message).toBe("messages[0].content[0]: the URL scheme \"ftp:\" is not allowed (only http:, https: and data:)")
      const streamed = yield* Effect.flip(Stream.runDrain(Model.stream(bad))).pipe(Effect.provide(EffectAi.fromLanguageModel(languageModel(server))))
      expect(streamed._tag).toBe("InvalidContent")
      expect(server.requests).toHaveLength(1)
    }))

  it.effect("an effect/ai prompt's file parts reach the server as content parts; an unknown media type is refused naming the part", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const prompt = Prompt.make([{
        role: "user",
        content: [
          { type: "text", text: "Compare" },
          { type: "file", mediaType: "image/*", data: new URL("https://example.com/cat.png") },
          { type: "file", mediaType: "image/png", data: Buffer.from(png, "base64") },
          { type: "file", mediaType: "audio/wav", data: Buffer.from(wav, "base64") },
          { type: "file", mediaType: "application/pdf", fileName: "report.pdf", data: Buffer.from(pdf, "base64") }
        ]
      }])
      const refused = yield* Effect.gen(function*() {
        yield* LanguageModel.generateText({ prompt })
        return yield* Effect.flip(LanguageModel.generateText({
          prompt: Prompt.make([{ role: "user", content: [{ type: "file", mediaType: "application/x-msdownload", data: new Uint8Array(4) }] }])
        }))
      }).pipe(Effect.provide(languageModel(server)))
      expect(server.requests[0]!.body.messages).toEqual([{ role: "user", content: wire }])
      expect(refused.reason._tag).toBe("InvalidRequestError")
      expect(refused.message).toContain("message 0, part 0: unknown file media type \"application/x-msdownload\"")
      expect(server.requests).toHaveLength(1)
    }))
})
