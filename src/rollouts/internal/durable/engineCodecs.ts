/**
 * How Durable's SQLite engine (`engine.ts`) writes what it stores as JSON text and reads it back: activity and
 * deferred exits (their values already encoded by their own schemas), suspensions, and each workflow's payload and
 * result through the workflow's schemas (built once per workflow).
 */
import { Effect, Exit, Schema } from "effect"
import { Workflow } from "effect/workflow"

/** A workflow's result, as the engine holds it. */
export type Result = Workflow.Result<unknown, unknown>

/** An encoded exit (its values already JSON) as JSON text, and back. */
const ExitJson = Schema.toCodecJson(Schema.Exit(Schema.Unknown, Schema.Unknown, Schema.Defect()))
const encodeExit = Schema.encodeUnknownEffect(ExitJson)
const decodeExit = Schema.decodeUnknownEffect(ExitJson)
// As effect/workflow's own `toJsonExit`: an activity or deferred that succeeds with nothing is stored as `null`.
const toJsonExit = Exit.map((value: unknown) => value ?? null)

/** A suspension (with why, when the run failed), as a client's poll reads it. */
const SuspendedJson = Schema.toCodecJson(Workflow.Suspended)
export const encodeSuspended = Schema.encodeUnknownEffect(SuspendedJson)
export const decodeSuspended = Schema.decodeUnknownEffect(SuspendedJson)
/** JSON text, parsed (a defect when it is not JSON: the engine wrote it). */
export const parseJson = (text: string) => Effect.try({ try: () => JSON.parse(text) as unknown, catch: (cause) => cause })

/** An activity's or a deferred's exit as the text of its row. */
export const exitText = (exit: Exit.Exit<unknown, unknown>): Effect.Effect<string> =>
  Effect.map(Effect.orDie(encodeExit(toJsonExit(exit))), (encoded) => JSON.stringify(encoded))
/** The exit a row's text holds. */
export const exitOf = (text: string): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Effect.orDie(Effect.flatMap(parseJson(text), decodeExit))

/** A workflow's result codec, JSON text on the wire of the table (built once per workflow). */
const resultCodecs = new WeakMap<Workflow.Any, Schema.Codec<Result, unknown, never, never>>()
export const resultCodec = (workflow: Workflow.Any): Schema.Codec<Result, unknown, never, never> => {
  let codec = resultCodecs.get(workflow)
  if (codec === undefined) {
    codec = Schema.toCodecJson(Workflow.Result({ success: workflow.successSchema, error: workflow.errorSchema })) as unknown as Schema.Codec<Result, unknown, never, never>
    resultCodecs.set(workflow, codec)
  }
  return codec
}
const payloadCodecs = new WeakMap<Workflow.Any, Schema.Codec<object, unknown, never, never>>()
export const payloadCodec = (workflow: Workflow.Any): Schema.Codec<object, unknown, never, never> => {
  let codec = payloadCodecs.get(workflow)
  if (codec === undefined) {
    codec = Schema.toCodecJson(workflow.payloadSchema) as unknown as Schema.Codec<object, unknown, never, never>
    payloadCodecs.set(workflow, codec)
  }
  return codec
}

