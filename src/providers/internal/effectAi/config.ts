/**
 * Sampling options across the bridge. `effect/ai`'s `LanguageModel` interface carries none: each provider reads
 * its own `Config` service from the calling fiber's context (`OpenAiLanguageModel.withConfigOverride`, …). valet's
 * side follows the same convention (`Config` + `withConfigOverride`), so the two bridges fit into each other.
 */
import { Context, Effect, Stream } from "effect"
import { dual } from "effect/Function"
import type * as Model from "../../../core/Model.js"

/** The sampling options of a valet `Model.Request` that a provider's configuration can take. */
export interface Sampling {
  readonly temperature?: number | undefined
  readonly topP?: number | undefined
  readonly maxTokens?: number | undefined
  readonly stop?: ReadonlyArray<string> | undefined
  readonly seed?: number | undefined
  /** Fields passed to the server untouched (vLLM's `top_k`, `min_p`, `chat_template_kwargs`…). */
  readonly extra?: Model.JsonObject | undefined
}

const keys = ["temperature", "topP", "maxTokens", "stop", "seed", "extra"] as const

/**
 * Only the options that are set: spreading the result over a provider's defaults never overwrites one of them
 * with `undefined`. Undefined when nothing is set.
 */
export const samplingOf = (options: Sampling): Sampling | undefined => {
  let out: { -readonly [K in keyof Sampling]: Sampling[K] } | undefined = undefined
  for (const key of keys) {
    const value = options[key]
    if (value !== undefined) {
      out ??= {}
      ;(out as Record<string, unknown>)[key] = value
    }
  }
  return out
}

/** `options` over `base`, keys by key (`undefined` in `options` keeps the base value). */
export const mergeSampling = (base: Sampling, options: Sampling): Sampling => {
  const set = samplingOf(options)
  return set === undefined ? base : { ...base, ...set }
}

/**
 * The sampling options of the `LanguageModel` that `EffectAi.languageModel` offers, read on every call from the
 * calling fiber's context and laid over the layer's defaults: the `Config` convention of `effect/ai`'s own
 * providers. Empty by default.
 */
export const Config: Context.Reference<Sampling> = Context.Reference<Sampling>("valet/EffectAi/Config", {
  defaultValue: () => ({})
})

/**
 * Runs an effect with these sampling options laid over the `Config` in context (for a stream:
 * `Stream.provideService(EffectAi.Config, …)`).
 */
export const withConfigOverride: {
  (overrides: Sampling): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, overrides: Sampling): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, overrides: Sampling): Effect.Effect<A, E, R> =>
    Effect.flatMap(Config, (config) => Effect.provideService(self, Config, mergeSampling(config, overrides)))
)

/**
 * How the `LanguageModel` behind `EffectAi.fromLanguageModel` takes sampling options: given the options a request
 * sets, a function that runs an effect with them in force — typically the provider's `withConfigOverride`.
 */
export type SamplingAdapter = (sampling: Sampling) => Override

/** Runs an effect with something in force (a provider's `withConfigOverride(…)`). */
export type Override = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/**
 * A stream run under an effect transformer: the transformer runs around the capture of the context, and the stream
 * runs in the context it produced (an override of a `Config` service reaches the stream's provider that way).
 */
export const streamWith = <A, E, R>(
  transform: Override,
  stream: Stream.Stream<A, E, R>
): Stream.Stream<A, E, R> =>
  Stream.unwrap(transform(Effect.map(Effect.context<R>(), (context) => Stream.provideContext(stream, context))))
