/**
 * The test double of `EmbeddingModel`: a deterministic bag of words, feature-hashed. Each word (lower case, letters
 * and digits) adds ±1 to the dimension its hash picks, and the vector is scaled to length 1. Texts that share words
 * really are near (cosine similarity grows with the words they share), texts that share none are near 0, and the same
 * text always gives the same vector — on every machine, with no model and no network. Like `ScriptedModel`, it
 * records what it was asked (`calls`), and it can be told to fail (`failWith`) to test what happens then.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { EmbeddingModel, HashedEmbeddingModel } from "valet"
 *
 * const test = Effect.gen(function*() {
 *   const [a, b] = yield* EmbeddingModel.embed(["my cat is called Tom", "what is my cat called?"])
 *   const calls = yield* HashedEmbeddingModel.calls // [["my cat is called Tom", "what is my cat called?"]]
 *   return { similar: EmbeddingModel.cosineSimilarity(a!, b!) > 0.5, calls: calls.length } // true, 1
 * }).pipe(Effect.provide(HashedEmbeddingModel.layer({ dimensions: 256 })))
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer } from "effect"
import * as EmbeddingModel from "./EmbeddingModel.js"
import type { ModelError } from "./ModelError.js"

/**
 * How the hashed model embeds.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** The vectors' length (default 256). More dimensions, fewer collisions between words. */
  readonly dimensions?: number | undefined
  /** The model's name (default `hashed-<dimensions>`). */
  readonly model?: string | undefined
  /** Words left out (default: none). Leaving out "the", "is", "a"… makes texts near by what they are about. */
  readonly stopWords?: ReadonlyArray<string> | undefined
  /**
   * Fails a call instead of answering: given the texts and the call's index (0 first), an error, or `undefined` to
   * answer. For testing what a failed embedding does.
   */
  readonly failWith?: ((texts: ReadonlyArray<string>, index: number) => ModelError | undefined) | undefined
}

/**
 * What a test reads back from the hashed model.
 *
 * @since 0.2.0
 * @category models
 */
export interface Service {
  /** The texts of every call, in call order (failed calls included). */
  readonly calls: Effect.Effect<ReadonlyArray<ReadonlyArray<string>>>
}

/**
 * The hashed model's inspection service, provided beside `EmbeddingModel` by `layer`.
 *
 * @since 0.2.0
 * @category services
 */
export class HashedEmbeddingModel extends Context.Service<HashedEmbeddingModel, Service>()("valet/HashedEmbeddingModel") {}

/**
 * The texts of every call the hashed model received, in call order.
 *
 * @since 0.2.0
 * @category inspection
 */
export const calls: Effect.Effect<ReadonlyArray<ReadonlyArray<string>>, never, HashedEmbeddingModel> = Effect.flatMap(
  HashedEmbeddingModel,
  (service) => service.calls
)

/** FNV-1a, 32 bits: stable across runs and machines. */
const fnv1a = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/**
 * The hashed vector of one text (length 1; a text with no word gets a fixed unit vector, so that it can still be
 * stored and compared).
 *
 * @since 0.2.0
 * @category embedding
 */
export const vectorOf = (text: string, dimensions = 256, stopWords: ReadonlySet<string> = new Set()): EmbeddingModel.Vector => {
  const vector = new Array<number>(dimensions).fill(0)
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (stopWords.has(word)) continue
    const hash = fnv1a(word)
    // The low bit picks the sign, so that collisions cancel out as often as they add up.
    vector[(hash >>> 1) % dimensions] += hash & 1 ? 1 : -1
  }
  let sum = 0
  for (const x of vector) sum += x * x
  if (sum === 0) {
    vector[0] = 1
    return vector
  }
  const scale = 1 / Math.sqrt(sum)
  return vector.map((x) => x * scale)
}

/**
 * The hashed `EmbeddingModel`, and the `HashedEmbeddingModel` service that reads back its calls.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<EmbeddingModel.EmbeddingModel | HashedEmbeddingModel> =>
  Layer.effectContext(Effect.sync(() => {
    const dimensions = Math.max(1, Math.floor(options.dimensions ?? 256))
    const stopWords = new Set((options.stopWords ?? []).map((word) => word.toLowerCase()))
    const received: Array<ReadonlyArray<string>> = []
    const model = EmbeddingModel.make({
      model: options.model ?? `hashed-${dimensions}`,
      dimensions,
      maxBatchSize: Number.MAX_SAFE_INTEGER,
      embed: (texts) =>
        Effect.suspend(() => {
          const index = received.push([...texts]) - 1
          const error = options.failWith?.(texts, index)
          return error !== undefined ? Effect.fail(error) : Effect.succeed(texts.map((text) => vectorOf(text, dimensions, stopWords)))
        })
    })
    return Context.make(EmbeddingModel.EmbeddingModel, model).pipe(
      Context.add(HashedEmbeddingModel, { calls: Effect.sync(() => received.slice()) })
    )
  }))
