/**
 * Structured output asked for over HTTP (`POST /runs`' `output`, OpenAI's `response_format`): a JSON Schema, imported
 * as the Effect schema a run decodes its answer with (`Agent.stream`'s `output`) by effect's own importer.
 */
import { JsonSchema, Result, type Schema, SchemaRepresentation } from "effect"

// Draft-07 documents (zod-to-json-schema, older tools) keep their definitions under `definitions`; the importer
// resolves only `#/$defs/…` once a document is read as draft 2020-12, so those are read as draft-07.
const isDraft07 = (schema: Readonly<Record<string, unknown>>): boolean =>
  (typeof schema.$schema === "string" && /draft-0[4-7]/.test(schema.$schema)) ||
  (schema.definitions !== undefined && schema.$defs === undefined)

/**
 * The schema an answer is decoded with, or one line saying why `schema` cannot be one (an unsupported keyword or
 * reference, with where it is). `pattern` keywords are ignored: a regular expression from a request, run on the
 * server against a model's text, could hang it (catastrophic backtracking).
 */
export const fromJsonSchema = (
  schema: Readonly<Record<string, unknown>>
): Result.Result<Schema.Codec<unknown, unknown>, string> => {
  try {
    const raw = schema as JsonSchema.JsonSchema
    const document = isDraft07(schema) ? JsonSchema.fromSchemaDraft07(raw) : JsonSchema.fromSchemaDraft2020_12(raw)
    // A JSON Schema describes JSON values, which are what they decode to: no services, `unknown` both ways.
    return Result.succeed(
      SchemaRepresentation.fromJsonSchemaDocument(document, { patterns: "ignore" }) as unknown as Schema.Codec<unknown, unknown>
    )
  } catch (error) {
    return Result.fail((error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, " "))
  }
}
