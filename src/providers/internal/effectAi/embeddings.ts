/**
 * valet `EmbeddingModel` ⇄ `effect/ai` `EmbeddingModel` (see `providers/EffectAi.ts`). Errors cross as the chat
 * bridge's do (`./errors.ts`): a valet error round-trips to itself. Only `EffectAi.ts` imports this file.
 */
import { Clock, Effect } from "effect"
import { EmbeddingModel as AiEmbeddingModel } from "effect/ai"
import * as EmbeddingModel from "../../../core/EmbeddingModel.js"
import { fromAiError, toAiError } from "./errors.js"

/** The `effect/ai` service over a valet model: `embedMany` is one valet `embed` (batched and checked there). */
export const toAiEmbeddingModel = (model: EmbeddingModel.Service): Effect.Effect<AiEmbeddingModel.EmbeddingModel> =>
  AiEmbeddingModel.make({
    embedMany: ({ inputs }) =>
      model.embed(inputs).pipe(
        Effect.map((vectors) => ({ results: vectors.map((vector) => [...vector]), usage: { inputTokens: undefined } })),
        Effect.mapError(toAiError("embedMany"))
      )
  })

/** How a valet model is made over an `effect/ai` one, which names neither its model nor its dimensions. */
export interface Options {
  /** The name vectors are stored under (recall compares only vectors of one name): the provider's model name. */
  readonly model: string
  /** The vectors' length when known; else every answer must agree with the first. */
  readonly dimensions?: number | undefined
  /** At most this many texts per `embedMany` (default 256). */
  readonly maxBatchSize?: number | undefined
}

/** A valet model over an `effect/ai` service: answers checked by `EmbeddingModel.make`, errors as `ModelError`s. */
export const fromAiEmbeddingModel = (ai: AiEmbeddingModel.EmbeddingModel, options: Options): EmbeddingModel.Service =>
  EmbeddingModel.make({
    model: options.model,
    ...(options.dimensions !== undefined ? { dimensions: options.dimensions } : {}),
    ...(options.maxBatchSize !== undefined ? { maxBatchSize: options.maxBatchSize } : {}),
    embed: (texts) =>
      ai.embedMany(texts).pipe(
        Effect.map((response) => response.embeddings.map((embedding) => embedding.vector)),
        Effect.catch((error) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(fromAiError(error, now))))
      )
  })
