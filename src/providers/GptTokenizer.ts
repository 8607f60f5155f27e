/**
 * Token counts by OpenAI's BPE encodings (`o200k_base`: GPT-4o, GPT-4.1, GPT-5, the o-series; `cl100k_base`: GPT-4,
 * GPT-3.5), from the pure-JavaScript `gpt-tokenizer` package, as `effect/ai`'s `Tokenizer` service. With it in
 * context, compaction (`Compaction`) measures a call's messages with the model's own tokens rather than the budget's
 * estimate of four characters a token, which is off by half and more on code, numbers and most languages other than
 * English.
 *
 * `gpt-tokenizer` is an optional peer dependency (`npm i gpt-tokenizer`), and this module its only importer: import
 * it as `valet/GptTokenizer`; the root entry (`valet`) never loads it, nor its rank tables (a few megabytes, read
 * when the layer is built, only the encoding asked for).
 *
 * Any other `Tokenizer` works the same way (`Tokenizer.make({ tokenize })` from `effect/ai`): compaction looks the
 * service up, not this module.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Compaction, ScriptedModel } from "valet"
 * import * as GptTokenizer from "valet/GptTokenizer"
 *
 * const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
 *
 * // Compaction at 80 % of 16,384 tokens, counted with o200k_base.
 * const program = Agent.run(agent, "Hello").pipe(
 *   Effect.provide(Compaction.layer({ contextWindow: 16_384 })),
 *   Effect.provide(GptTokenizer.layer({ encoding: "o200k_base" })),
 *   Effect.provide(ScriptedModel.layer(["Hi!"]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Layer } from "effect"
import { type Prompt, Tokenizer } from "effect/ai"
import { InvalidOptions } from "../core/AgentError.js"

/**
 * The encodings offered: `o200k_base` (the default) and `cl100k_base`.
 *
 * @since 0.2.0
 * @category models
 */
export type Encoding = "o200k_base" | "cl100k_base"

/**
 * Options of `make` / `layer`.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** The encoding (default `o200k_base`). */
  readonly encoding?: Encoding | undefined
}

/** One encoding's `encode`; special tokens in the text (`<|endoftext|>`) are counted as the text they are. */
type Encode = (text: string) => Array<number>

const noSpecial = { disallowedSpecial: new Set<string>() }

// Each encoding is its own module of the package, loaded when asked for: its rank table is most of its weight.
const loaders: Record<Encoding, () => Promise<Encode>> = {
  o200k_base: () => import("gpt-tokenizer/encoding/o200k_base").then((module) => (text) => module.encode(text, noSpecial)),
  cl100k_base: () => import("gpt-tokenizer/encoding/cl100k_base").then((module) => (text) => module.encode(text, noSpecial))
}

/** The texts of a prompt as the model reads them: texts, reasoning, tool calls' parameters and results (as JSON). */
const textsOf = (prompt: Prompt.Prompt): Array<string> => {
  const texts: Array<string> = []
  for (const message of prompt.content) {
    if (typeof message.content === "string") {
      texts.push(message.content)
      continue
    }
    for (const part of message.content) {
      switch (part.type) {
        case "text":
        case "reasoning":
          texts.push(part.text)
          break
        case "tool-call":
          texts.push(part.name, JSON.stringify(part.params) ?? "")
          break
        case "tool-result":
          texts.push(JSON.stringify(part.result) ?? "")
          break
        default:
          // Files and approvals: no text to count.
          break
      }
    }
  }
  return texts
}

/**
 * A `Tokenizer` on an encoding: `tokenize` answers the tokens of each text of the prompt, one after the other.
 * An encoding not offered is `InvalidOptions` naming it.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (options?: Options): Effect.Effect<Tokenizer.Service, InvalidOptions> => {
  const encoding = options?.encoding ?? "o200k_base"
  const load = Object.hasOwn(loaders, encoding) ? loaders[encoding] : undefined
  if (load === undefined) {
    return Effect.fail(new InvalidOptions({
      module: "GptTokenizer",
      message: `GptTokenizer: encoding must be one of ${Object.keys(loaders).map((name) => JSON.stringify(name)).join(", ")}, got ${JSON.stringify(encoding)}`
    }))
  }
  return Effect.map(Effect.promise(load), (encode) =>
    Tokenizer.make({
      tokenize: (prompt) =>
        Effect.sync(() => {
          const tokens: Array<number> = []
          for (const text of textsOf(prompt)) for (const token of encode(text)) tokens.push(token)
          return tokens
        })
    }))
}

/**
 * `make` as a layer of `effect/ai`'s `Tokenizer`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Tokenizer.Tokenizer, InvalidOptions> => Layer.effect(Tokenizer.Tokenizer, make(options))
