import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { readFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import * as EffectAi from "../../src/providers/EffectAi.js"
import { Agent, Model, ModelError, OpenAiCompatible, Tool as ValetTool } from "../../src/index.js"
import * as Server from "../support/openAiServer.js"

const SearchGoogle = Tool.make("searchGoogle", {
  description: "Searches the web",
  parameters: { query: Schema.String },
  success: Schema.String
})
const SearchToolkit = Toolkit.make(SearchGoogle)
const searchHandlers = SearchToolkit.toLayer({ searchGoogle: ({ query }) => Effect.succeed(`3 results for ${query}`) })

const client = (server: Server.LoopbackServer) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "m", maxAttempts: 1 }).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** `@effect/ai`'s LanguageModel over valet's OpenAI-compatible client of the loopback server. */
const languageModel = (server: Server.LoopbackServer) => EffectAi.toLanguageModel.pipe(Layer.provide(client(server)))

const toolCallStream = Server.fixture("chat-stream-tool-call-vllm.sse")
const textStream = Server.fixture("chat-stream-usage.sse")

describe("EffectAi.toLanguageModel (valet's client as an @effect/ai LanguageModel)", () => {
  it.scoped("generateText: a tool call round-trips — the schema goes out, the params come back decoded, the handler runs", () =>
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
      expect(response.usage).toMatchObject({ inputTokens: 226, outputTokens: 20, totalTokens: 246 })
      const sent = server.requests[0]!.body
      expect(sent.messages).toEqual([{ role: "user", content: "What is new in AI?" }])
      expect(sent.tools).toEqual([{
        type: "function",
        function: {
          name: "searchGoogle",
          description: "Searches the web",
          parameters: { type: "object", required: ["query"], properties: { query: { type: "string" } }, additionalProperties: false }
        }
      }])
      expect(sent.tool_choice).toBe("auto")
    }))

  it.scoped("streamText: tool params stream in, then the whole call, the tool's result and the finish with usage 226/20/246", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.sseText(toolCallStream))
      const parts = yield* LanguageModel.streamText({ prompt: "What is new in AI?", toolkit: SearchToolkit }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toArray),
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
      expect(finish).toMatchObject({ type: "finish", reason: "tool-calls", usage: { inputTokens: 226, outputTokens: 20, totalTokens: 246 } })
    }))

  it.scoped("text: streamed as one text block; generateText gives the same text", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.sseText(textStream), Server.json(Server.chatCompletionOfStream(textStream)))
      const program = Effect.gen(function*() {
        const parts = yield* LanguageModel.streamText({ prompt: "Weather?" }).pipe(Stream.runCollect, Effect.map(Chunk.toArray))
        expect(parts[1]).toMatchObject({ type: "text-start" })
        expect(parts.filter((part) => part.type === "text-delta").map((part) => part.delta).join("")).toBe("{\"city\":\"San Francisco\",\"units\":\"f\"}")
        expect(parts.at(-2)).toMatchObject({ type: "text-end" })
        expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { inputTokens: 71, outputTokens: 10, totalTokens: 81 } })
        const response = yield* LanguageModel.generateText({ prompt: "Weather?" })
        expect(response.text).toBe("{\"city\":\"San Francisco\",\"units\":\"f\"}")
      })
      yield* Effect.provide(program, languageModel(server))
      // No toolkit: no tools sent.
      expect(server.requests.map((r) => r.body.tools)).toEqual([undefined, undefined])
    }))

  it.scoped("a server error is an AiError carrying the typed ModelError", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json({ error: { message: "bad key" } }, { status: 401 }))
      const error = yield* Effect.flip(LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(languageModel(server))))
      expect(error._tag).toBe("UnknownError")
      expect(error.message).toMatch(/Unauthorized: bad key/)
      expect((error as { cause?: unknown }).cause).toEqual(new ModelError.Unauthorized({ status: 401, message: "bad key" }))
    }))
})

describe("EffectAi.fromLanguageModel (any @effect/ai LanguageModel as a valet Model)", () => {
  /** valet Model → @effect/ai LanguageModel → valet Model → HTTP: the full round trip. */
  const roundTrip = (server: Server.LoopbackServer) => EffectAi.fromLanguageModel(languageModel(server))

  const search: Model.ToolDefinition = {
    name: "searchGoogle",
    description: "Searches the web",
    parameters: { type: "object", properties: { query: { type: "string", description: "the query" } }, required: ["query"] }
  }

  it.scoped("a tool call round-trips: the definition's JSON schema reaches the server unchanged, the call comes back", () =>
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

  it.scoped("a ReAct agent runs its tool loop on it (the tool runs in valet, its result goes back as a tool message)", () =>
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

  it.scoped("errors come back as the ModelError they started as", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "3" } }))
      const error = yield* Effect.flip(Model.generate({ messages: [Model.user("x")] }).pipe(Effect.provide(roundTrip(server))))
      expect(error).toEqual(new ModelError.RateLimited({ message: "slow down", retryAfterMs: 3000 }))
    }))
})

describe("@effect/ai stays optional", () => {
  it("nothing the main entry point (src/index.ts) loads imports @effect/ai", () => {
    const seen = new Set<string>()
    const offenders: Array<string> = []
    const visit = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      const text = readFileSync(file, "utf8")
      for (const match of text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
        const target = match[1] ?? match[2]!
        if (target.startsWith("@effect/ai")) offenders.push(file)
        if (target.startsWith(".")) visit(resolve(dirname(file), target.replace(/\.js$/, ".ts")))
      }
    }
    visit(resolve("src/index.ts"))
    expect(seen.size).toBeGreaterThan(20)
    expect(seen.has(resolve("src/OpenAiCompatible.ts"))).toBe(true)
    expect(offenders).toEqual([])
    // And the bridge itself does import it (so the check above can fail).
    expect(readFileSync(resolve("src/EffectAi.ts"), "utf8")).toContain("from \"@effect/ai\"")
  })
})
