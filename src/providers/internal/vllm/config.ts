/**
 * `configs/vllm_actors.yaml`: parsed with `yaml` (keeping line numbers) and decoded with a schema, so a bad file
 * fails with the field and the line that are wrong. A missing file is the single-actor default.
 */
import { Effect, type Result, Schema } from "effect"
import { HttpUrl } from "../../../core/internal/decode.js"
import * as YamlDocument from "../yamlDocument.js"

/** How an actor is served: `vllm serve` (OpenAI-compatible paths) or the legacy demo server's `POST /generate`. */
export const Api = Schema.Literals(["openai", "generate"])
export type Api = typeof Api.Type


const ActorName = Schema.String.check(Schema.makeFilter((name: string) =>
  /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name) || "an actor name is letters, digits, '_', '.' and '-'"
))

/** A whole number > 0. */
const PositiveInt = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isInteger(n) && n > 0, { expected: "an integer > 0" })
)

/** A whole number >= 0. */
const NonNegativeInt = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isInteger(n) && n >= 0, { expected: "an integer >= 0" })
)

const Positive = Schema.Number.check(Schema.makeFilter((n: number) => n > 0, { expected: "a number > 0" }))

/** A key that may be left out, and then decodes to `value`. */
const orDefault = <S extends Schema.Codec<number, number>>(schema: S, value: number) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(value)))

/** One actor, as written in the file (snake_case). */
export const ActorEntry = Schema.Struct({
  name: ActorName,
  base_url: HttpUrl,
  /** The served model name; detected from `GET /v1/models` when absent (api `openai`). */
  model: Schema.optional(Schema.String),
  tensor_parallel_size: orDefault(PositiveInt, 1),
  gpu_id: orDefault(NonNegativeInt, 0),
  api: Schema.optional(Api),
  /** At most this many requests in flight to the actor. */
  max_in_flight: Schema.optional(PositiveInt)
})
export type ActorEntry = typeof ActorEntry.Type

/** The whole file. */
export const PoolFile = Schema.Struct({
  actors: Schema.Array(ActorEntry).check(
    Schema.makeFilter((actors: ReadonlyArray<ActorEntry>) => actors.length >= 1 || "needs at least one actor"),
    Schema.makeFilter((actors: ReadonlyArray<ActorEntry>) => {
      const seen = new Set<string>()
      for (let i = 0; i < actors.length; i++) {
        const name = actors[i]!.name
        if (seen.has(name)) return { path: [i, "name"], issue: `the actor name ${JSON.stringify(name)} is used twice` }
        seen.add(name)
      }
      return true
    })
  ),
  timeout_sec: orDefault(Positive, 60),
  max_tokens: orDefault(PositiveInt, 512),
  /** Attempts per call, the first included. */
  max_attempts: orDefault(PositiveInt, 3)
})
export type PoolFile = typeof PoolFile.Type

/** The pool when there is no file: one actor `default` at `http://127.0.0.1:8000`. */
export const defaultPool: PoolFile = {
  actors: [{ name: "default", base_url: "http://127.0.0.1:8000", tensor_parallel_size: 1, gpu_id: 0 }],
  timeout_sec: 60,
  max_tokens: 512,
  max_attempts: 3
}

/** Why a file was refused: what, which field (`actors[1].base_url`) and where (1-based line and column). */
export type Problem = YamlDocument.Problem

/** Parses and decodes the text of a pool file. */
export const parse = (text: string): Result.Result<PoolFile, Problem> => YamlDocument.parseAndDecode(PoolFile, text)
