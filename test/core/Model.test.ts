import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const responses: ReadonlyArray<Model.Response> = [
  {
    id: "r1",
    model: "m",
    choices: [{ index: 0, text: "Hello there, world.", toolCalls: [], finishReason: "stop" }],
    usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 }
  },
  {
    id: "r2",
    model: "m",
    choices: [
      {
        index: 0,
        text: "",
        reasoning: "I should look it up",
        toolCalls: [
          { id: "t1", name: "lookup", arguments: '{"q":"weather in Paris"}' },
          { id: "t2", name: "time", arguments: "" }
        ],
        finishReason: "tool_calls"
      },
      {
        index: 1,
        text: "No tools needed.",
        toolCalls: [],
        finishReason: "length",
        stopReason: "</answer>",
        logprobs: [{ token: "No", logprob: -0.1 }, { token: " tools", logprob: -0.2, topLogprobs: [{ token: " way", logprob: -2 }] }]
      }
    ],
    usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 }
  }
]

describe("Model", () => {
  it.effect("accumulate(toChunks(response)) gives the response back", () =>
    Effect.gen(function*() {
      for (const response of responses) {
        expect(yield* Model.accumulate(Stream.fromIterable(Model.toChunks(response)))).toEqual(response)
      }
    }))

  it.effect("accumulate assembles interleaved choices and tool-call fragments by index", () =>
    Effect.gen(function*() {
      const chunks: Array<Model.Chunk> = [
        { _tag: "Metadata", id: "x", model: "m" },
        { _tag: "TextDelta", index: 1, text: "B1" },
        { _tag: "ToolCallDelta", index: 0, toolIndex: 1, id: "second", name: "g", arguments: "" },
        { _tag: "ToolCallDelta", index: 0, toolIndex: 0, id: "first", name: "f", arguments: '{"a":' },
        { _tag: "TextDelta", index: 1, text: " B2" },
        { _tag: "ToolCallDelta", index: 0, toolIndex: 0, arguments: "1}" },
        { _tag: "ToolCallDelta", index: 0, toolIndex: 1, arguments: "{}" },
        // An empty trailing fragment, as vLLM sends in its finish chunk.
        { _tag: "ToolCallDelta", index: 0, toolIndex: 0, arguments: "" },
        { _tag: "Finish", index: 1, finishReason: "stop" },
        { _tag: "Finish", index: 0, finishReason: "tool_calls", stopReason: 128009 },
        { _tag: "Usage", usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 } }
      ]
      const response = yield* Model.accumulate(Stream.fromIterable(chunks))
      expect(response).toEqual({
        id: "x",
        model: "m",
        choices: [
          {
            index: 0,
            text: "",
            toolCalls: [{ id: "first", name: "f", arguments: '{"a":1}' }, { id: "second", name: "g", arguments: "{}" }],
            finishReason: "tool_calls",
            stopReason: 128009
          },
          { index: 1, text: "B1 B2", toolCalls: [], finishReason: "stop" }
        ],
        usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 }
      })
    }))

  it("a request has messages or a prompt, exactly one", () => {
    const decode = Schema.decodeUnknownResult(Model.Request)
    expect(decode({ messages: [{ role: "user", content: "hi" }] })._tag).toBe("Success")
    expect(decode({ prompt: "Once upon", maxTokens: 5, stop: ["\n"], extra: { top_k: 20 } })._tag).toBe("Success")
    const both = decode({ prompt: "x", messages: [] })
    expect(both._tag === "Failure" && both.failure.message).toContain("either `messages` or `prompt`")
    expect(decode({})._tag).toBe("Failure")
    expect(decode({ prompt: "x", maxTokens: 0 })._tag).toBe("Failure")
  })

  it("model errors say whether they are retryable and survive JSON", () => {
    const errors: ReadonlyArray<ModelError.ModelError> = [
      new ModelError.RateLimited({ message: "slow down", retryAfterMs: 2000 }),
      new ModelError.ServerError({ status: 503, message: "overloaded" }),
      new ModelError.Timeout({ message: "no answer", timeoutMs: 30_000 }),
      new ModelError.Transport({ message: "ECONNRESET" }),
      new ModelError.InvalidRequest({ status: 400, message: "bad temperature" }),
      new ModelError.ContextLengthExceeded({ message: "too long" }),
      new ModelError.Unauthorized({ status: 401, message: "no key" }),
      new ModelError.ModelNotFound({ model: "gpt-9", message: "no such model" }),
      new ModelError.MalformedResponse({ message: "not JSON", body: "<html>" }),
      new ModelError.ScriptExhausted({ callIndex: 2, scriptLength: 2 }),
      new ModelError.ReplayMiss({ key: "root/call/abc#0", path: "c.jsonl" })
    ]
    expect(errors.map(ModelError.isRetryable)).toEqual([true, true, true, true, false, false, false, false, false, false, false])
    for (const error of errors) {
      expect(ModelError.isModelError(error)).toBe(true)
      const json = JSON.parse(JSON.stringify(Schema.encodeSync(ModelError.ModelError)(error)))
      const back = Schema.decodeUnknownSync(ModelError.ModelError)(json)
      expect(back).toEqual(error)
      expect(back.retryable).toBe(error.retryable)
    }
    expect(ModelError.isModelError(new Error("x"))).toBe(false)
    expect(ModelError.isModelError({ _tag: "Other" })).toBe(false)
  })
})

describe("Model.streamInto", () => {
  const turns = [{ text: "Hello there  world", toolCalls: [{ name: "f", arguments: { x: 1 } }], reasoning: "hmm" }]
  const collect = (service: Model.Service) =>
    Effect.gen(function*() {
      const chunks: Array<Model.Chunk> = []
      const response = yield* Model.streamInto(
        { messages: [Model.user("hi")] },
        (chunk) => Effect.sync(() => void chunks.push(chunk))
      ).pipe(Effect.provideService(Model.Model, service))
      return { chunks, response }
    })

  it.effect("a provider's native streamInto and the stream-based fallback deliver the same chunks and response", () =>
    Effect.gen(function*() {
      const native = yield* Model.Model.pipe(Effect.provide(ScriptedModel.layer(turns)))
      expect(native.streamInto).toBeDefined()
      const viaNative = yield* collect(native)
      const streamOnly = yield* Model.Model.pipe(Effect.provide(ScriptedModel.layer(turns)))
      const viaStream = yield* collect({ generate: streamOnly.generate, stream: streamOnly.stream })
      expect(viaNative.chunks).toEqual(viaStream.chunks)
      expect(viaNative.response).toEqual(viaStream.response)
      expect(viaNative.chunks.filter((chunk) => chunk._tag === "TextDelta").map((chunk) => chunk.text)).toEqual([
        "Hello",
        " there",
        "  world"
      ])
      expect(viaNative.response.choices[0]!.toolCalls[0]!.arguments).toBe('{"x":1}')
    }))
})

describe("Model.addUsage: prompt-cache counts", () => {
  it("sums them when either side reported them, and leaves them out when neither did", () => {
    const plain: Model.Usage = { inputTokens: 10, outputTokens: 2, totalTokens: 12 }
    const cached: Model.Usage = { inputTokens: 100, outputTokens: 5, totalTokens: 105, cachedInputTokens: 64, cacheWriteTokens: 8 }
    expect(Model.addUsage(plain, plain)).toEqual({ inputTokens: 20, outputTokens: 4, totalTokens: 24 })
    expect(Model.addUsage(plain, cached)).toEqual({
      inputTokens: 110,
      outputTokens: 7,
      totalTokens: 117,
      cachedInputTokens: 64,
      cacheWriteTokens: 8
    })
    expect(Model.addUsage(cached, cached)).toMatchObject({ cachedInputTokens: 128, cacheWriteTokens: 16 })
  })
})
