/**
 * The models of `valet.yaml`: where a model's calls go (`provider: openai-compatible | vllm | scripted`), a fallback
 * chain (a list, or `{ fallback: [...], when, breaker }` with the chain's settings), and models by name (`models:`)
 * that an agent's `model`, the file's, or a judge guardrail's may name.
 *
 * ```yaml
 * models:
 *   small: { provider: openai-compatible, baseUrl: http://127.0.0.1:8001/v1, model: Qwen/Qwen2.5-1.5B-Instruct }
 *   reasoner: { provider: openai-compatible, baseUrl: https://api.openai.com/v1, model: gpt-5.1, apiKeyEnv: OPENAI_API_KEY, api: responses }
 *   main:
 *     fallback:
 *       - { provider: openai-compatible, baseUrl: http://127.0.0.1:8000/v1 }
 *       - { provider: openai-compatible, baseUrl: http://127.0.0.1:8002/v1 }
 *     when: [RateLimited, ServerError, Timeout]      # default: the retryable errors, ContextLengthExceeded
 *     breaker: { failures: 3, window: 1 minute, coolDown: 30 seconds }   # or false
 * model: main
 * ```
 */
import { Schema } from "effect"
import { HttpUrl, WireDuration } from "../../../core/internal/decode.js"
import * as ModelError from "../../../core/ModelError.js"

/** An environment variable's name. */
export const EnvName = Schema.String.check(Schema.makeFilter((name: string) =>
  /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || "must be an environment variable name"
))

/** An OpenAI-compatible server (vLLM, Ollama, llama.cpp, OpenAI…). */
export const OpenAiModel = Schema.Struct({
  provider: Schema.Literal("openai-compatible"),
  baseUrl: HttpUrl,
  /** The model name; the server's first model when absent. */
  model: Schema.optional(Schema.String),
  /** The environment variable holding the API key. */
  apiKeyEnv: Schema.optional(EnvName),
  /**
   * The model's context window in tokens, for compaction; else what the server's `/v1/models` says when the file
   * names no model (vLLM's `max_model_len`), else the compaction policy's.
   */
  contextWindow: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  /**
   * Which API chat calls use: `chat` (`/v1/chat/completions`, the default) or `responses` (`/v1/responses`, OpenAI's
   * Responses API: reasoning items sent back between the turns of a tool loop).
   */
  api: Schema.optional(Schema.Literals(["chat", "responses"]))
})

/** The vLLM actor pool of a pool file (relative to `valet.yaml`). */
export const VllmModel = Schema.Struct({
  provider: Schema.Literal("vllm"),
  config: Schema.optional(Schema.String),
  actorName: Schema.optional(Schema.String)
})

const ScriptedToolCall = Schema.Struct({
  name: Schema.String,
  arguments: Schema.optional(Schema.Union([Schema.String, Schema.Record(Schema.String, Schema.Unknown)]))
})

/** One scripted reply: a text, or text / tool calls / reasoning. */
export const ScriptedTurn = Schema.Union([
  Schema.String,
  Schema.Struct({
    text: Schema.optional(Schema.String),
    toolCalls: Schema.optional(Schema.Array(ScriptedToolCall)),
    reasoning: Schema.optional(Schema.String)
  })
])

/**
 * `ScriptedModel` answering with `replies` in order, from the first one again in every run: a server that runs
 * with no model server at all (demos, tests of a front end).
 */
export const ScriptedModelSpec = Schema.Struct({
  provider: Schema.Literal("scripted"),
  replies: Schema.Array(ScriptedTurn).check(Schema.isMinLength(1, { expected: "at least one reply" }))
})

/** Where an agent's model calls go. */
export const ModelSpec = Schema.Union([OpenAiModel, VllmModel, ScriptedModelSpec])
export type ModelSpec = typeof ModelSpec.Type


/** The name of a model of `models:`. */
export const ModelName = Schema.String.check(Schema.makeFilter((name: string) => /^[A-Za-z0-9_.-]+$/.test(name), {
  expected: "the name of a model of models: (letters, digits, _ . -)"
}))

const errorTags = ModelError.ModelError.members.map((member) => member.identifier) as ReadonlyArray<ModelError.ModelError["_tag"]>

/** A circuit breaker's settings (`Model.BreakerOptions`): `failures` within `window`, then no calls for `coolDown`. */
export const BreakerSettings = Schema.Struct({
  failures: Schema.optional(Schema.Number.check(Schema.makeFilter((n: number) => Number.isSafeInteger(n) && n >= 1, { expected: "an integer >= 1" }))),
  window: Schema.optional(WireDuration.check(Schema.makeFilter((d: number | string) => d !== 0, { expected: "a duration above 0" }))),
  coolDown: Schema.optional(WireDuration)
})

const ModelList = Schema.Array(ModelSpec).check(Schema.isMinLength(1, { expected: "a list of at least one model (tried in order)" }))

/** A fallback chain with its settings (`Model.fallback`'s `when` and `breaker`). */
export const FallbackSpec = Schema.Struct({
  fallback: ModelList,
  /** The errors that move on to the next model, by tag. */
  when: Schema.optional(Schema.Array(Schema.Literals(errorTags)).check(Schema.isMinLength(1, { expected: "at least one error tag" }))),
  /** Each model's circuit breaker, or `false` for none. */
  breaker: Schema.optional(Schema.Union([Schema.Literal(false), BreakerSettings]))
})
export type FallbackSpec = typeof FallbackSpec.Type

/** A model written out: one, a list tried in order, or a chain with its settings. */
// Flat (not ModelSpec's union inside): a chain's bad setting is then reported where it is, not as "must be a model".
export const ModelDeclared = Schema.Union([OpenAiModel, VllmModel, ScriptedModelSpec, ModelList, FallbackSpec])
export type ModelDeclared = typeof ModelDeclared.Type

/**
 * A model: written out, or the name of one of `models:` (a fallback list: the next one answers when one is
 * rate-limited, down or too slow, each with its circuit breaker).
 */
export const ModelChoice = Schema.Union([ModelName, OpenAiModel, VllmModel, ScriptedModelSpec, ModelList, FallbackSpec])
export type ModelChoice = typeof ModelChoice.Type

/** `models:`: models by name. */
export const NamedModels = Schema.Record(ModelName, ModelDeclared)
