/**
 * `EmbeddingModel.make` (checks and batches any model's answers) and `HashedEmbeddingModel` (the test double:
 * deterministic, texts that share words are near).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as EmbeddingModel from "../../src/core/EmbeddingModel.js"
import * as HashedEmbeddingModel from "../../src/core/HashedEmbeddingModel.js"

describe("EmbeddingModel.make", () => {
  it.effect("dimensions learnt from the first answer hold for later calls; NaN is refused naming the text", () =>
    Effect.gen(function*() {
      let answer: ReadonlyArray<ReadonlyArray<number>> = [[1, 0, 0]]
      const model = EmbeddingModel.make({ model: "m", embed: () => Effect.succeed(answer) })
      expect(yield* model.embed(["a"])).toEqual([[1, 0, 0]])
      answer = [[1, 0]]
      expect((yield* Effect.flip(model.embed(["b"]))).message).toBe(`EmbeddingModel "m": the vector of text 0 has 2 dimensions, not 3 (as the first vector)`)
      answer = [[1, Number.NaN, 0]]
      expect((yield* Effect.flip(model.embed(["c"]))).message).toBe(`EmbeddingModel "m": the vector of text 0 cannot be compared: its element 1 is NaN, not a finite number`)
    }))
})

describe("HashedEmbeddingModel", () => {
  it.effect("the same text, the same unit vector; shared words make texts near, none makes them far", () =>
    Effect.gen(function*() {
      const [cat, cat2, catAgain, tax] = yield* EmbeddingModel.embed(["My cat is called Tom", "Tom is my cat's name", "My cat is called Tom", "Quarterly tax forms"])
      expect(catAgain).toEqual(cat)
      expect(EmbeddingModel.cosineSimilarity(cat!, cat!)).toBeCloseTo(1, 10)
      expect(EmbeddingModel.cosineSimilarity(cat!, cat2!)).toBeGreaterThan(0.5)
      expect(Math.abs(EmbeddingModel.cosineSimilarity(cat!, tax!))).toBeLessThan(0.3)
      expect(yield* HashedEmbeddingModel.calls).toHaveLength(1)
    }).pipe(Effect.provide(HashedEmbeddingModel.layer({ dimensions: 512 }))))
})
