/**
 * Sampling options an architecture passes on every model call it makes (Ensemble roles, ToolVote attempts), checked
 * like the rest of its options.
 */
import { Schema } from "effect"
import * as Model from "../../core/Model.js"

/** `temperature`, `topP`, `maxTokens`, `stop`, `seed` and server-specific `extra` fields. */
export const RequestOptions = Schema.Struct({
  temperature: Schema.optional(Schema.Number.check(Schema.isGreaterThanOrEqualTo(0))),
  topP: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 }))),
  maxTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  stop: Schema.optional(Schema.Array(Schema.String)),
  seed: Schema.optional(Schema.Int),
  extra: Schema.optional(Model.JsonObject)
})
/** Sampling options of a model call. */
export type RequestOptions = typeof RequestOptions.Type
