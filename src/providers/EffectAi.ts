/**
 * The bridge to `effect/ai` (part of `effect` 4: import this module as `valet/EffectAi`; the root entry never loads
 * it, so a user who only runs agents does not load `effect/ai`).
 *
 * - `languageModel` / `toLanguageModel`: any valet `Model` — the `OpenAiCompatible` client of vLLM, llama.cpp,
 *   Ollama, SGLang…, the `Vllm` pool, a `Journal` replay — offered as an `effect/ai` `LanguageModel` (text,
 *   streaming, tool calls, `generateObject`). Effect 4 ships no stable OpenAI-compatible chat-completions provider,
 *   so this is one an `effect/ai` user can pick up alone. Sampling options come from `Config`, read on every call
 *   from the calling context (`withConfigOverride`), as `effect/ai`'s own providers read theirs. A `LanguageModel`
 *   answers one choice and has no parts for log-probabilities, so `n` and `logprobs` have no place there.
 * - `fromLanguageModel`: any `effect/ai` `LanguageModel` (OpenAI, Anthropic, OpenRouter…) as a valet `Model`, so
 *   architectures run on it. Tool calls come back to the architecture (valet runs the tools). The generic
 *   `LanguageModel` interface has no place for sampling options: each provider reads its own `Config` service.
 *   Pass `sampling` to say how (typically the provider's `withConfigOverride`); without it they are not sent.
 *   What no provider config can express — `n` within one call (valet makes `n` calls), log-probabilities, stop
 *   reasons, raw prompts as such (a raw `prompt` is sent as one user message), `responseFormat` — is not passed.
 * - `toolsOf`: the tools of an `effect/ai` `Toolkit` (its handlers in context) as valet tools, for any
 *   architecture: the model sees `effect/ai`'s JSON schema, and each call goes through the toolkit's own `handle`
 *   (parameters decoded, handler run, result encoded), so a tool behaves alike in a `Chat` and in an agent. A
 *   handler failure (or a `failureMode: "return"` failure) is an `ERROR:` / error result the model reads.
 * - `modelErrorOf` reads back the valet `ModelError` inside an `AiError` that started as one; errors crossing both
 *   bridges come back as the `ModelError` they started as.
 *
 * @example
 * ```ts
 * import { Effect, Layer, Schema } from "effect"
 * import { LanguageModel, Tool, Toolkit } from "effect/ai"
 * import { Agent, ScriptedModel } from "valet"
 * import * as EffectAi from "valet/EffectAi"
 *
 * // A valet Model (scripted here; `OpenAiCompatible` for vLLM) as an effect/ai LanguageModel, at temperature 0.
 * const Llm = EffectAi.languageModel({ config: { temperature: 0 } }).pipe(Layer.provide(ScriptedModel.layer(["Paris"])))
 *
 * const capital = LanguageModel.generateText({ prompt: "The capital of France?" }).pipe(
 *   Effect.map((response) => response.text), // "Paris"
 *   Effect.provide(Llm)
 * )
 *
 * // The tools of an effect/ai toolkit, run by its own handlers, for a valet agent.
 * const Now = Tool.make("now", { description: "The time now", success: Schema.String })
 * const toolkit = Toolkit.make(Now)
 * const agent = EffectAi.toolsOf(toolkit).pipe(
 *   Effect.map((tools) => Agent.make({ name: "timekeeper", instructions: "Tell the time.", tools })),
 *   Effect.provide(toolkit.toLayer({ now: () => Effect.succeed("12:00") }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Layer } from "effect"
import { type AiError, EmbeddingModel as AiEmbeddingModel, LanguageModel } from "effect/ai"
import * as EmbeddingModel from "../core/EmbeddingModel.js"
import * as Model from "../core/Model.js"
import type * as ModelError from "../core/ModelError.js"
import * as Config_ from "./internal/effectAi/config.js"
import * as Embeddings from "./internal/effectAi/embeddings.js"
import * as Errors from "./internal/effectAi/errors.js"
import * as From from "./internal/effectAi/fromLanguageModel.js"
import * as To from "./internal/effectAi/toLanguageModel.js"
import * as Tools from "./internal/effectAi/tools.js"

// ---------------------------------------------------------------------------------------------------------
// Sampling options
// ---------------------------------------------------------------------------------------------------------

/**
 * The sampling options of a valet request that cross the bridge: `temperature`, `topP`, `maxTokens`, `stop`, `seed`, `extra`.
 *
 * @since 0.2.0
 * @category sampling
 */
export type Sampling = Config_.Sampling

/**
 * The sampling options of the `LanguageModel` that `languageModel` offers, read on every call from the calling
 * context and laid over the layer's `config` (a `Context.Reference`, empty by default).
 *
 * @since 0.2.0
 * @category sampling
 */
export const Config: typeof Config_.Config = Config_.Config

/**
 * Runs an effect with these sampling options laid over the `Config` in context (streams: `Stream.provideService(Config, …)`).
 *
 * @since 0.2.0
 * @category sampling
 */
export const withConfigOverride: typeof Config_.withConfigOverride = Config_.withConfigOverride

/**
 * How the `LanguageModel` behind `fromLanguageModel` takes sampling options: given the options a request sets (only
 * those), a function that runs a call with them in force, e.g.
 * `(s) => OpenAiLanguageModel.withConfigOverride({ temperature: s.temperature, top_p: s.topP, max_output_tokens: s.maxTokens })`
 * (drop the undefined ones if the provider spreads its overrides), or `EffectAi.withConfigOverride` for a
 * `LanguageModel` that valet itself offers.
 *
 * @since 0.2.0
 * @category sampling
 */
export type SamplingAdapter = Config_.SamplingAdapter

// ---------------------------------------------------------------------------------------------------------
// valet Model → effect/ai LanguageModel
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `languageModel`.
 *
 * @since 0.2.0
 * @category to LanguageModel
 */
export type LanguageModelOptions = To.Options

/**
 * The `LanguageModel` service over the valet `Model` in context, with these defaults.
 *
 * @since 0.2.0
 * @category to LanguageModel
 */
export const makeLanguageModelWith: (
  options?: LanguageModelOptions
) => Effect.Effect<LanguageModel.LanguageModel, never, Model.Model> = To.makeLanguageModel

/**
 * The `LanguageModel` service over the valet `Model` in context.
 *
 * @since 0.1.0
 * @category to LanguageModel
 */
export const makeLanguageModel: Effect.Effect<LanguageModel.LanguageModel, never, Model.Model> = To.makeLanguageModel()

/**
 * An `effect/ai` `LanguageModel` layer over the valet `Model` in context, with default sampling options under any
 * `Config` of the call: `EffectAi.languageModel({ config: { temperature: 0 } }).pipe(Layer.provide(OpenAiCompatible.layerNode({ baseUrl, model })))`
 * reaches vLLM.
 *
 * @since 0.2.0
 * @category to LanguageModel
 */
export const languageModel = (options?: LanguageModelOptions): Layer.Layer<LanguageModel.LanguageModel, never, Model.Model> =>
  Layer.effect(LanguageModel.LanguageModel, To.makeLanguageModel(options))

/**
 * `languageModel()`: the name this layer had before `languageModel` took options.
 *
 * @since 0.1.0
 * @category to LanguageModel
 */
export const toLanguageModel: Layer.Layer<LanguageModel.LanguageModel, never, Model.Model> = languageModel()

// ---------------------------------------------------------------------------------------------------------
// effect/ai LanguageModel → valet Model
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `fromLanguageModel`.
 *
 * @since 0.2.0
 * @category from LanguageModel
 */
export type FromLanguageModelOptions = From.Options

/**
 * The valet `Model` service over the `LanguageModel` in context, with these options.
 *
 * @since 0.2.0
 * @category from LanguageModel
 */
export const makeModelWith: (
  options?: FromLanguageModelOptions
) => Effect.Effect<Model.Service, never, LanguageModel.LanguageModel> = From.makeModel

/**
 * The valet `Model` service over the `LanguageModel` in context (sampling options not sent).
 *
 * @since 0.1.0
 * @category from LanguageModel
 */
export const makeModel: Effect.Effect<Model.Service, never, LanguageModel.LanguageModel> = From.makeModel()

/**
 * A valet `Model` backed by an `effect/ai` `LanguageModel` layer (OpenAI, Anthropic, OpenRouter…).
 *
 * @since 0.1.0
 * @category from LanguageModel
 */
export const fromLanguageModel = <E, R>(
  layer: Layer.Layer<LanguageModel.LanguageModel, E, R>,
  options?: FromLanguageModelOptions
): Layer.Layer<Model.Model, E, R> => Layer.effect(Model.Model, From.makeModel(options)).pipe(Layer.provide(layer))

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

/**
 * The valet `ModelError` an `AiError` carries when it started as one (from `languageModel`), else undefined.
 *
 * @since 0.2.0
 * @category errors
 */
export const modelErrorOf: (error: AiError.AiError) => ModelError.ModelError | undefined = Errors.modelErrorOf

// ---------------------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------------------

/**
 * The tools of an `effect/ai` toolkit as valet tools (the toolkit's handlers come from context, e.g.
 * `toolkit.toLayer({ … })`): `Agent.make({ tools: yield* EffectAi.toolsOf(toolkit) })`.
 *
 * @since 0.2.0
 * @category tools
 */
export const toolsOf = Tools.toolsOf

// ---------------------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------------------

/**
 * The `effect/ai` `EmbeddingModel` service over the valet `EmbeddingModel` in context.
 *
 * @since 0.2.0
 * @category embeddings
 */
export const makeAiEmbeddingModel: Effect.Effect<AiEmbeddingModel.EmbeddingModel, never, EmbeddingModel.EmbeddingModel> = Effect.flatMap(
  EmbeddingModel.EmbeddingModel,
  Embeddings.toAiEmbeddingModel
)

/**
 * An `effect/ai` `EmbeddingModel` layer over the valet `EmbeddingModel` in context:
 * `EffectAi.embeddingModel.pipe(Layer.provide(OpenAiCompatible.layerEmbeddingModelNode({ baseUrl, model })))` reaches
 * vLLM's `/v1/embeddings` from `effect/ai` (`EmbeddingModel.embed`, `embedMany`, batched `embed` calls).
 *
 * @since 0.2.0
 * @category embeddings
 */
export const embeddingModel: Layer.Layer<AiEmbeddingModel.EmbeddingModel, never, EmbeddingModel.EmbeddingModel> = Layer.effect(
  AiEmbeddingModel.EmbeddingModel,
  makeAiEmbeddingModel
)

/**
 * Options of `fromEmbeddingModel`: the `model` name vectors are stored under (an `effect/ai` model does not say
 * its own), its `dimensions` when known, `maxBatchSize`.
 *
 * @since 0.2.0
 * @category embeddings
 */
export type FromEmbeddingModelOptions = Embeddings.Options

/**
 * A valet `EmbeddingModel` backed by an `effect/ai` `EmbeddingModel` layer (OpenAI, Gemini…): answers checked (one
 * vector per text, the dimensions), failures as `ModelError`s.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { EmbeddingModel as AiEmbeddingModel } from "effect/ai"
 * import { EmbeddingModel } from "valet"
 * import * as EffectAi from "valet/EffectAi"
 *
 * // Any effect/ai embedding provider; here one made in place.
 * const provider = Layer.effect(AiEmbeddingModel.EmbeddingModel, AiEmbeddingModel.make({
 *   embedMany: ({ inputs }) => Effect.succeed({ results: inputs.map((text) => [text.length, 1]), usage: { inputTokens: undefined } })
 * }))
 * const Embeddings = EffectAi.fromEmbeddingModel(provider, { model: "lengths", dimensions: 2 })
 * const vectors = EmbeddingModel.embed(["a", "bb"]).pipe(Effect.provide(Embeddings)) // [[1, 1], [2, 1]]
 * ```
 *
 * @since 0.2.0
 * @category embeddings
 */
export const fromEmbeddingModel = <E, R>(
  layer: Layer.Layer<AiEmbeddingModel.EmbeddingModel, E, R>,
  options: FromEmbeddingModelOptions
): Layer.Layer<EmbeddingModel.EmbeddingModel, E, R> =>
  Layer.effect(
    EmbeddingModel.EmbeddingModel,
    Effect.map(Effect.service(AiEmbeddingModel.EmbeddingModel), (ai) => Embeddings.fromAiEmbeddingModel(ai, options))
  ).pipe(Layer.provide(layer))
