/**
 * Option checking shared by the architectures: options are decoded with a `Schema` (defaults applied, unknown
 * keys refused so a typo such as `maxRound` is not silently ignored), and a failure becomes `InvalidOptions`
 * whose message names the field.
 */
import { Effect, ParseResult, Schema } from "effect"
import * as Agent from "../Agent.js"
import { InvalidOptions } from "../AgentError.js"
import * as Architecture from "../Architecture.js"

/** An `Agent` passed as an option (checked by identity: agents hold functions and layers). */
export const AgentSchema = Schema.declare((u: unknown): u is Agent.Agent<unknown> => Agent.isAgent(u), {
  identifier: "Agent",
  description: "an agent made with Agent.make"
})

/** An `Architecture` passed as an option. */
export const ArchitectureSchema = Schema.declare(
  (u: unknown): u is Architecture.Architecture<unknown> => Architecture.isArchitecture(u),
  { identifier: "Architecture", description: "an architecture made with Architecture.make" }
)

/** A whole number ≥ `min`. */
export const IntAtLeast = (min: number) => Schema.Int.pipe(Schema.greaterThanOrEqualTo(min))

/** A number in [0, 1]. */
export const UnitInterval = Schema.Number.pipe(Schema.between(0, 1))

/** Decodes `options` with `schema`; a failure is `InvalidOptions` for `module`, naming the offending field. */
export const decode = <A, I>(module: string, schema: Schema.Schema<A, I>, options: unknown): Effect.Effect<A, InvalidOptions> =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error" })(options).pipe(
    Effect.mapError((error) => new InvalidOptions({ module, message: ParseResult.TreeFormatter.formatErrorSync(error) }))
  )
