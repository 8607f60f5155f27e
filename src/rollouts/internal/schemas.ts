/**
 * Small schemas the rollouts' options share: an option with a default (absent or `undefined` → the default, so
 * `{ maxCalls: settings.maxCalls }` works under `exactOptionalPropertyTypes`), and a function option.
 */
import { Effect, Schema } from "effect"

/** `schema`, optional in the options (absent or `undefined`), decoded to `value` when not given. */
export const withDefault = <S extends Schema.Constraint>(value: S["Type"]) => (schema: S) =>
  Schema.withDecodingDefaultType<S>(Effect.succeed(value))(schema)

/** A function passed as an option (checked by `typeof` only: its signature is the caller's promise). */
export const FunctionSchema = <F>(what: string) =>
  Schema.declare((u: unknown): u is F => typeof u === "function", { expected: `a function (${what})` })
