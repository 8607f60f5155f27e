/**
 * The embedding bridge of `EffectAi`, both ways: valet's `EmbeddingModel` as an `effect/ai` `EmbeddingModel`
 * (`embeddingModel`) and any `effect/ai` `EmbeddingModel` as valet's (`fromEmbeddingModel`); errors round-trip.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { AiError, EmbeddingModel as AiEmbeddingModel } from "effect/ai"
import * as EmbeddingModel from "../../src/core/EmbeddingModel.js"
import * as HashedEmbeddingModel from "../../src/core/HashedEmbeddingModel.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as EffectAi from "../../src/providers/EffectAi.js"

/** An effect/ai provider answering `answer(inputs)`. */
const provider = (answer: (inputs: ReadonlyArray<string>) => Effect.Effect<Array<Array<number>>, AiError.AiError>) =>
  Layer.effect(AiEmbeddingModel.EmbeddingModel, AiEmbeddingModel.make({
    embedMany: ({ inputs }) => Effect.map(answer(inputs), (results) => ({ results, usage: { inputTokens: inputs.length } }))
  }))

describe("EffectAi.embeddingModel (valet's EmbeddingModel as an effect/ai EmbeddingModel)", () => {
  it.effect("embedMany and embed answer valet's vectors; concurrent embed calls are one valet call", () =>
    Effect.gen(function*() {
      const ai = yield* AiEmbeddingModel.EmbeddingModel
      const many = yield* ai.embedMany(["green tea", "black coffee"])
      expect(many.embeddings.map((e) => e.vector)).toEqual([HashedEmbeddingModel.vectorOf("green tea", 32), HashedEmbeddingModel.vectorOf("black coffee", 32)])
      const [a, b] = yield* Effect.all([ai.embed("one"), ai.embed("two")], { concurrency: "unbounded" })
      expect(a!.vector).toEqual(HashedEmbeddingModel.vectorOf("one", 32))
      expect(b!.vector).toEqual(HashedEmbeddingModel.vectorOf("two", 32))
      expect(yield* HashedEmbeddingModel.calls).toEqual([["green tea", "black coffee"], ["one", "two"]])
    }).pipe(Effect.provide(EffectAi.embeddingModel.pipe(Layer.provideMerge(HashedEmbeddingModel.layer({ dimensions: 32 }))))))

  it.effect("a valet failure is the AiError reason that means the same, carrying the ModelError back", () =>
    Effect.gen(function*() {
      const ai = yield* AiEmbeddingModel.EmbeddingModel
      const error = yield* Effect.flip(ai.embedMany(["x"]))
      expect(error.reason._tag).toBe("RateLimitError")
      expect(EffectAi.modelErrorOf(error)).toEqual(new ModelError.RateLimited({ message: "slow down", retryAfterMs: 2000 }))
    }).pipe(Effect.provide(EffectAi.embeddingModel.pipe(Layer.provide(HashedEmbeddingModel.layer({
      failWith: () => new ModelError.RateLimited({ message: "slow down", retryAfterMs: 2000 })
    }))))))
})

describe("EffectAi.fromEmbeddingModel (any effect/ai EmbeddingModel as valet's)", () => {
  it.effect("vectors in order, batched by maxBatchSize, checked: a wrong dimension is a MalformedResponse naming the text", () =>
    Effect.gen(function*() {
      const calls: Array<ReadonlyArray<string>> = []
      const layer = EffectAi.fromEmbeddingModel(
        provider((inputs) => Effect.sync(() => (calls.push(inputs), inputs.map((text) => (text === "bad" ? [1] : [text.length, 1]))))),
        { model: "lengths", dimensions: 2, maxBatchSize: 2 }
      )
      const model = yield* EmbeddingModel.EmbeddingModel.pipe(Effect.provide(layer))
      expect(model).toMatchObject({ model: "lengths", dimensions: 2 })
      expect(yield* model.embed(["a", "bb", "ccc"])).toEqual([[1, 1], [2, 1], [3, 1]])
      expect(calls).toEqual([["a", "bb"], ["ccc"]])
      const error = yield* Effect.flip(model.embed(["a", "bad"]))
      expect(error).toMatchObject({ _tag: "MalformedResponse", message: `EmbeddingModel "lengths": the vector of text 1 has 1 dimensions, not 2 (the model's dimensions)` })
    }))

  it.effect("the provider's errors are ModelErrors (a rate limit with its wait); a valet error crossing both bridges comes back as itself", () =>
    Effect.gen(function*() {
      const limited = EffectAi.fromEmbeddingModel(
        provider(() => Effect.fail(AiError.make({ module: "Test", method: "embedMany", reason: new AiError.RateLimitError({ retryAfter: Duration.seconds(3) }) }))),
        { model: "m" }
      )
      expect(yield* Effect.flip(EmbeddingModel.embed(["x"]).pipe(Effect.provide(limited)))).toMatchObject({ _tag: "RateLimited", retryAfterMs: 3000 })
      // valet → effect/ai → valet.
      const round = EffectAi.fromEmbeddingModel(
        EffectAi.embeddingModel.pipe(Layer.provide(HashedEmbeddingModel.layer({ failWith: (_, i) => (i === 1 ? new ModelError.ServerError({ status: 503, message: "down" }) : undefined) }))),
        { model: "hashed-256", dimensions: 256 }
      )
      yield* Effect.gen(function*() {
        expect(yield* EmbeddingModel.embed(["tea"])).toEqual([HashedEmbeddingModel.vectorOf("tea")])
        expect(yield* Effect.flip(EmbeddingModel.embed(["tea"]))).toEqual(new ModelError.ServerError({ status: 503, message: "down" }))
      }).pipe(Effect.provide(round))
    }))
})
