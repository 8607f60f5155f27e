/**
 * Structured output (`Agent.run(…, { output: schema })`): what a run needs to know of the schema — how to decode
 * an answer, the JSON schema to ask natively with (`response_format`), how many repairs to try — and the repair
 * prompt that feeds a decode error back to the model.
 */
import { Result, Schema } from "effect"
import type * as Model from "../Model.js"
import { describeIssue } from "./decode.js"
import { parametersSchema } from "./jsonSchema.js"
import { decodeJson } from "./parse.js"

/** The default number of repair attempts after the first answer. */
export const defaultRetries = 2

/** What a run asked to return: how to decode its answer, and how to ask for it. */
export interface OutputSpec {
  /** The decoded value, or why the text is not one (a line naming the field and the rule). */
  readonly decode: (text: string) => Result.Result<unknown, string>
  /** `response_format` for calls that produce the answer. */
  readonly responseFormat: Model.ResponseFormat
  /** The JSON schema, as the repair prompt shows it. */
  readonly jsonSchemaText: string
  /** Repair calls after the first answer. */
  readonly retries: number
}

/** The spec of `schema`. */
export const make = <A, I>(schema: Schema.Codec<A, I>, retries: number = defaultRetries): OutputSpec => {
  const decodeValue = Schema.decodeUnknownResult(schema)
  const jsonSchema = parametersSchema(schema)
  return {
    decode: (text) => {
      // The whole answer as JSON (also a bare string, number or boolean), else JSON inside it (a fence, prose).
      const trimmed = text.trim()
      let whole: unknown
      let parsed = false
      try {
        whole = JSON.parse(trimmed)
        parsed = true
      } catch {
        // Not JSON as a whole: look inside.
      }
      if (parsed) {
        const direct = decodeValue(whole)
        if (Result.isSuccess(direct)) return Result.succeed(direct.success)
        if (whole !== null && typeof whole === "object") return Result.fail(describeIssue(direct.failure.issue, whole))
      }
      return decodeJson(schema, text) as Result.Result<unknown, string>
    },
    responseFormat: { type: "json_schema", name: "output", schema: jsonSchema },
    jsonSchemaText: JSON.stringify(jsonSchema),
    retries
  }
}

/** The request that shows the model its last answer and why it did not decode, asking for the value alone. */
export const repairRequest = (
  spec: OutputSpec,
  instructions: string,
  prompt: string,
  answer: string,
  error: string
): Model.Request => ({
  messages: [
    ...(instructions !== "" ? [{ role: "system" as const, content: instructions }] : []),
    { role: "user" as const, content: prompt },
    { role: "assistant" as const, content: answer },
    {
      role: "user" as const,
      content: `That answer does not match the required output: ${error}.\n` +
        `Reply with only a JSON value matching this JSON Schema, nothing else:\n${spec.jsonSchemaText}`
    }
  ],
  responseFormat: spec.responseFormat
})
