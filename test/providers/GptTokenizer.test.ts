/**
 * GptTokenizer: `effect/ai`'s `Tokenizer` on gpt-tokenizer's encodings — its counts are the library's, and compaction
 * measures with it when it is in context (see also test/core/Compaction.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { AiError, Prompt, Tokenizer } from "effect/ai"
import * as cl100k from "gpt-tokenizer/encoding/cl100k_base"
import * as o200k from "gpt-tokenizer/encoding/o200k_base"
import * as Agent from "../../src/core/Agent.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Compaction from "../../src/core/Compaction.js"
import * as Model from "../../src/core/Model.js"
import * as Compact from "../../src/core/internal/compact.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as GptTokenizer from "../../src/providers/GptTokenizer.js"

const texts = [
  "Hello, world!",
  "def f(x):\n    return [i ** 2 for i in range(x)]  # squares",
  "Grüße aus Zürich — 東京からこんにちは 😀",
  "a <|endoftext|> b"
]

describe("GptTokenizer", () => {
  it.effect("its counts are the library's, per encoding; special tokens in a text count as text", () =>
    Effect.gen(function*() {
      for (const [encoding, library] of [["o200k_base", o200k], ["cl100k_base", cl100k]] as const) {
        const tokenizer = yield* GptTokenizer.make({ encoding })
        for (const text of texts) {
          const tokens = yield* tokenizer.tokenize(text)
          expect(tokens).toEqual(library.encode(text, { disallowedSpecial: new Set() }))
        }
      }
      // A prompt of several messages and parts: each text counted, one after the other.
      const tokenizer = yield* GptTokenizer.make()
      const prompt = Prompt.make([
        { role: "system", content: texts[0]! },
        { role: "user", content: [{ type: "text", text: texts[1]! }] },
        { role: "assistant", content: [{ type: "text", text: texts[2]! }] }
      ])
      expect((yield* tokenizer.tokenize(prompt)).length).toBe(texts.slice(0, 3).reduce((sum, text) => sum + o200k.countTokens(text), 0))
    }))

  it.effect("an encoding not offered is InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(GptTokenizer.layer({ encoding: "p50k" as GptTokenizer.Encoding })))
      expect(error).toMatchObject({
        _tag: "InvalidOptions",
        message: `GptTokenizer: encoding must be one of "o200k_base", "cl100k_base", got "p50k"`
      })
    }).pipe(Effect.scoped))

  it.effect("compaction measures with it: ContextCompacted's tokens are o200k's count of the messages (+4 each)", () =>
    Effect.gen(function*() {
      const history: Array<Model.Message> = Array.from({ length: 12 }, (_, i): Model.Message =>
        i % 2 === 0 ? { role: "user", content: `question ${i}: ${"x y ".repeat(60)}` } : { role: "assistant", content: `answer ${i}: ${"1 2 ".repeat(60)}` }
      )
      const agent = Agent.make({ name: "a", instructions: "Be brief." })
      const events = Array.from(yield* Stream.runCollect(Agent.stream(agent, "THE TASK", { history }).pipe(
        Stream.provide(ScriptedModel.layer((request) =>
          request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions ? "Earlier: questions asked." : "Done."
        )),
        Stream.provide(Compaction.layer({ contextWindow: 2000, keepLastMessages: 2 })),
        Stream.provide(GptTokenizer.layer())
      )))
      const compacted = events.find((event): event is AgentEvent.Of<"ContextCompacted"> => event._tag === "ContextCompacted")!
      const messages: ReadonlyArray<Model.Message> = [{ role: "system", content: "Be brief." }, ...history, { role: "user", content: "THE TASK" }]
      expect(compacted.tokensBefore).toBe(messages.reduce((sum, message) => sum + o200k.countTokens(Model.textOf(message.content)) + 4, 0))
      expect(compacted.strategy).toBe("summary")
    }))
})

describe("Compaction with a Tokenizer in context", () => {
  // Each message of ~250 characters: the estimate says ~66 tokens, o200k ~125 ("x y " is two tokens per 4 characters).
  const history: ReadonlyArray<Model.Message> = Array.from({ length: 12 }, (_, i): Model.Message =>
    i % 2 === 0 ? { role: "user", content: `question ${i}: ${"x y ".repeat(60)}` } : { role: "assistant", content: `answer ${i}: ${"1 2 ".repeat(60)}` }
  )
  const agent = Agent.make({ name: "a", instructions: "Be brief." })
  const compactions = (layer: Layer.Layer<never, unknown>) =>
    Effect.map(
      Stream.runCollect(Agent.stream(agent, "THE TASK", { history }).pipe(
        Stream.provide(ScriptedModel.layer((request) =>
          request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions ? "Earlier: questions asked." : "Done."
        )),
        Stream.provide(Compaction.layer({ contextWindow: 1500, keepLastMessages: 2 })),
        Stream.provide(layer)
      )),
      (events) => Array.from(events).filter((event) => event._tag === "ContextCompacted")
    )

  it.effect("compaction triggers on the tokenizer's count, not the estimate", () =>
    Effect.gen(function*() {
      // Core looks effect/ai's Tokenizer up by its key, without importing effect/ai: the same key.
      expect(Compact.Tokenizer.key).toBe(Tokenizer.Tokenizer.key)
      // ~840 estimated tokens: under 80 % of 1,500, so no compaction by the estimate.
      expect(yield* compactions(Layer.empty)).toHaveLength(0)
      // ~1,560 by o200k: over it.
      const counted = yield* compactions(GptTokenizer.layer())
      expect(counted).toHaveLength(1)
      expect(counted[0]).toMatchObject({ strategy: "summary" })
      // Any effect/ai Tokenizer: one that counts a token per character compacts too.
      const perChar = Layer.succeed(Tokenizer.Tokenizer, Tokenizer.make({
        tokenize: (prompt) =>
          Effect.succeed(Array.from(prompt.content.flatMap((message) =>
            typeof message.content === "string" ? [message.content] : message.content.flatMap((part) => part.type === "text" ? [part.text] : [])
          ).join(""), (_, i) => i))
      }))
      expect(yield* compactions(perChar)).toHaveLength(1)
    }))

  it.effect("a tokenizer that fails: the estimate counts, and the run goes on", () =>
    Effect.gen(function*() {
      const failing = Layer.succeed(Tokenizer.Tokenizer, Tokenizer.make({
        tokenize: () => Effect.fail(AiError.make({ module: "test", method: "tokenize", reason: new AiError.UnknownError({ description: "no" }) }))
      }))
      expect(yield* compactions(failing)).toHaveLength(0)
    }))
})
