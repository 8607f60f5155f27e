/**
 * The bridge to `@effect/ai` (an optional peer dependency: import this module as `valet/EffectAi`; the main
 * entry point never loads it).
 *
 * - `toLanguageModel`: any valet `Model` — the `OpenAiCompatible` client of vLLM, llama.cpp, Ollama, SGLang…, the
 *   `Vllm` pool, a `Journal` replay — offered as an `@effect/ai` `LanguageModel` (text, streaming, tool calls),
 *   since `@effect/ai`'s own OpenAI provider speaks only the Responses API, which those servers do not fully serve.
 * - `fromLanguageModel`: any `@effect/ai` `LanguageModel` (Anthropic, Google, Bedrock, OpenAI Responses…) as a
 *   valet `Model`, so architectures run on it. Tool calls come back to the architecture (valet runs the tools);
 *   what the generic `LanguageModel` interface has no room for — sampling options, `n` within one call, `stop`,
 *   `seed`, log-probabilities, raw prompts as such — is configured on the provider instead (its `Config`).
 *
 * @since 0.1.0
 */
import { LanguageModel } from "@effect/ai"
import { type Effect, Layer } from "effect"
import * as From from "./internal/effectAi/fromLanguageModel.js"
import * as To from "./internal/effectAi/toLanguageModel.js"
import * as Model from "../core/Model.js"

/** The `LanguageModel` service over the valet `Model` in context. */
export const makeLanguageModel: Effect.Effect<LanguageModel.Service, never, Model.Model> = To.makeLanguageModel

/**
 * An `@effect/ai` `LanguageModel` over the valet `Model` in context: e.g.
 * `EffectAi.toLanguageModel.pipe(Layer.provide(OpenAiCompatible.layerNode({ baseUrl, model })))` reaches vLLM.
 */
export const toLanguageModel: Layer.Layer<LanguageModel.LanguageModel, never, Model.Model> = Layer.effect(
  LanguageModel.LanguageModel,
  To.makeLanguageModel
)

/** The valet `Model` service over the `LanguageModel` in context. */
export const makeModel: Effect.Effect<Model.Service, never, LanguageModel.LanguageModel> = From.makeModel

/** A valet `Model` backed by an `@effect/ai` `LanguageModel` layer (Anthropic, Google, Bedrock, OpenAI…). */
export const fromLanguageModel = <E, R>(layer: Layer.Layer<LanguageModel.LanguageModel, E, R>): Layer.Layer<Model.Model, E, R> =>
  Layer.effect(Model.Model, From.makeModel).pipe(Layer.provide(layer))
