/**
 * Option checking shared by the architectures: `decode` (see `./decode.ts`) plus the schemas of options that hold
 * agents and architectures.
 */
import { Schema } from "effect"
import * as Agent from "../Agent.js"
import * as Architecture from "../Architecture.js"

export * from "./decode.js"

/** An `Agent` passed as an option (checked by identity: agents hold functions and layers). */
export const AgentSchema = Schema.declare((u: unknown): u is Agent.Agent<unknown> => Agent.isAgent(u), {
  expected: "an agent made with Agent.make"
})

/** An `Architecture` passed as an option. */
export const ArchitectureSchema = Schema.declare(
  (u: unknown): u is Architecture.Architecture<unknown> => Architecture.isArchitecture(u),
  { expected: "an architecture made with Architecture.make" }
)

