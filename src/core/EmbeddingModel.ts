/**
 * The one interface between valet and text-embedding models: `embed(texts)` answers one vector per text, in order.
 * Semantic recall (`Threads`' `recall` turn option) embeds messages with it and finds the past messages nearest a
 * new task.
 *
 * A model is not trusted to be well-behaved: every answer is checked — one vector per text, every vector of the
 * model's dimensions (or of one length within a call when the dimensions are not known up front), finite numbers,
 * not all zeros — and a bad one is a `MalformedResponse` naming what was wrong and where. Large inputs are sent in
 * batches (`maxBatchSize` texts a call). Failures are the `ModelError`s of `Model` calls (rate limits, timeouts,
 * refusals…), so retries are chosen per error kind the same way.
 *
 * Layers: `OpenAiCompatible.layerEmbeddingModel` (`POST /v1/embeddings` of vLLM, OpenAI, llama.cpp, Ollama, TEI…),
 * `EffectAi.fromEmbeddingModel` (any `effect/ai` `EmbeddingModel`), and `HashedEmbeddingModel` for tests.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { EmbeddingModel, HashedEmbeddingModel } from "valet"
 *
 * const program = Effect.gen(function*() {
 *   const [tea, coffee, taxes] = yield* EmbeddingModel.embed(["I like green tea", "I like black coffee", "Tax forms are due"])
 *   // Texts that share words are nearer than texts that do not.
 *   return EmbeddingModel.cosineSimilarity(tea!, coffee!) > EmbeddingModel.cosineSimilarity(tea!, taxes!) // true
 * }).pipe(Effect.provide(HashedEmbeddingModel.layer()))
 *
 * // Your own model: a function from a batch of texts to vectors, checked and batched by `make`.
 * const custom = EmbeddingModel.make({
 *   model: "my-model",
 *   dimensions: 3,
 *   embed: (texts) => Effect.succeed(texts.map((text) => [text.length, 1, 0]))
 * })
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer } from "effect"
import * as Vectors from "./internal/vectors.js"
import { MalformedResponse, type ModelError } from "./ModelError.js"

/**
 * A vector: the embedding of one text.
 *
 * @since 0.2.0
 * @category models
 */
export type Vector = ReadonlyArray<number>

/**
 * An embedding model.
 *
 * @since 0.2.0
 * @category models
 */
export interface Service {
  /**
   * The model's name. Vectors of different models are never compared: the stores keep the name with each vector and
   * recall only among vectors of the same name.
   */
  readonly model: string
  /** The length of every vector, when known up front (configured, or said by the provider). */
  readonly dimensions?: number | undefined
  /** One vector per text, in the order of the texts. An empty list answers an empty list without a call. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Vector>, ModelError>
}

/**
 * The embedding model in context.
 *
 * @since 0.2.0
 * @category services
 */
export class EmbeddingModel extends Context.Service<EmbeddingModel, Service>()("valet/EmbeddingModel") {}

/**
 * Embeds texts with the model in context: one vector per text, in order.
 *
 * @since 0.2.0
 * @category calls
 */
export const embed = (texts: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Vector>, ModelError, EmbeddingModel> =>
  Effect.flatMap(EmbeddingModel, (model) => model.embed(texts))

/**
 * How `make` builds a model from a function that embeds one batch.
 *
 * @since 0.2.0
 * @category options
 */
export interface MakeOptions {
  readonly model: string
  /** Every vector must have this length; without it, every vector of one call must have the same length. */
  readonly dimensions?: number | undefined
  /** At most this many texts per call of `embed` below (default 256); larger inputs are sent in batches. */
  readonly maxBatchSize?: number | undefined
  /** How many batches are in flight at once (default 1: one after the other). */
  readonly concurrency?: number | undefined
  /** Embeds one batch (at most `maxBatchSize` texts): one vector per text, in order. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Vector>, ModelError>
}

const malformed = (model: string, message: string) =>
  new MalformedResponse({ message: `EmbeddingModel ${JSON.stringify(model)}: ${message}`, body: "" })

/**
 * Checks one batch's answer: as many vectors as texts, each of `dimensions` (or of the batch's first length), each
 * a vector that can be compared. `offset` is the batch's first text in the whole input, for the message;
 * `configured` says whether `dimensions` are the model's own or those of an earlier answer.
 */
const checkVectors = (
  model: string,
  texts: number,
  vectors: ReadonlyArray<Vector>,
  dimensions: number | undefined,
  offset: number,
  configured: boolean
): ModelError | undefined => {
  if (vectors.length !== texts) return malformed(model, `${texts} texts were sent, ${vectors.length} vectors came back`)
  const expected = dimensions ?? vectors[0]?.length
  for (let i = 0; i < vectors.length; i++) {
    const vector = vectors[i]!
    if (!Array.isArray(vector) && !(vector instanceof Float32Array) && !(vector instanceof Float64Array)) {
      return malformed(model, `the vector of text ${offset + i} is not a list of numbers`)
    }
    if (vector.length !== expected) {
      return malformed(
        model,
        `the vector of text ${offset + i} has ${vector.length} dimensions, not ${expected}${configured ? " (the model's dimensions)" : " (as the first vector)"}`
      )
    }
    const problem = Vectors.vectorProblem(vector)
    if (problem !== undefined) return malformed(model, `the vector of text ${offset + i} cannot be compared: ${problem}`)
  }
  return undefined
}

/**
 * A model from a function that embeds one batch: empty inputs answer at once, larger ones are cut into batches of
 * `maxBatchSize`, and every answer is checked (`MalformedResponse` naming the text and what was wrong).
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (options: MakeOptions): Service => {
  const size = Math.max(1, Math.floor(options.maxBatchSize ?? 256))
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? 1))
  // The dimensions seen first when none were configured: every later call must agree (a store cannot mix them).
  let learnt = options.dimensions
  const batch = (texts: ReadonlyArray<string>, offset: number) =>
    Effect.flatMap(options.embed(texts), (vectors) => {
      const problem = checkVectors(options.model, texts.length, vectors, learnt, offset, options.dimensions !== undefined)
      if (problem !== undefined) return Effect.fail(problem)
      if (learnt === undefined && vectors.length > 0) learnt = vectors[0]!.length
      return Effect.succeed(vectors)
    })
  return {
    model: options.model,
    ...(options.dimensions !== undefined ? { dimensions: options.dimensions } : {}),
    embed: (texts) => {
      if (texts.length === 0) return Effect.succeed([])
      if (texts.length <= size) return batch(texts, 0)
      const starts = Array.from({ length: Math.ceil(texts.length / size) }, (_, i) => i * size)
      return Effect.map(
        Effect.forEach(starts, (start) => batch(texts.slice(start, start + size), start), { concurrency }),
        (batches) => batches.flat()
      )
    }
  }
}

/**
 * `make` as a layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: MakeOptions): Layer.Layer<EmbeddingModel> => Layer.succeed(EmbeddingModel, make(options))

/**
 * Cosine similarity of two vectors, in [-1, 1]: what recall ranks by (0 when the lengths differ or one is all zeros).
 *
 * @since 0.2.0
 * @category vectors
 */
export const cosineSimilarity: (a: Vector, b: Vector) => number = Vectors.cosine
