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


const agentNamePattern = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/

/**
 * A non-empty list of agents whose names can be part of a session id (letters and digits joined by single `-` or
 * `_`, at most 48 characters) and are all different: the agents of a Swarm or a Blackboard.
 */
export const NamedAgents = Schema.Array(AgentSchema).check(
  Schema.isMinLength(1, { expected: "at least one agent" }),
  Schema.makeFilter((agents: ReadonlyArray<Agent.Agent<unknown>>) => {
    const bad = agents.find((agent) => !agentNamePattern.test(agent.name) || agent.name.length > 48)
    if (bad !== undefined) {
      return `agent names must be letters and digits joined by single - or _ (at most 48 characters), got ${JSON.stringify(bad.name)}`
    }
    const names = agents.map((agent) => agent.name)
    const twice = names.find((n, i) => names.indexOf(n) !== i)
    return twice === undefined || `two agents are named ${JSON.stringify(twice)}`
  })
)
