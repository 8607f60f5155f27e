/**
 * Option checking shared by the architectures: `decode` (see `./decode.ts`) plus the schemas of options that hold
 * agents and architectures.
 */
import { Schema } from "effect"
import * as Agent from "../Agent.js"
import { DurationInput, FunctionSchema, IntAtLeast, UnitInterval, withDefault } from "./decode.js"
import { Name, nameProblem } from "./names.js"
import * as Architecture from "./runtime.js"
import * as Template from "./template.js"

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


/**
 * A non-empty list of agents whose names can be part of a session id (letters and digits joined by single `-` or
 * `_`, at most 48 characters) and are all different: the agents of a Swarm or a Blackboard.
 */
export const NamedAgents = Schema.Array(AgentSchema).check(
  Schema.isMinLength(1, { expected: "at least one agent" }),
  Schema.makeFilter((agents: ReadonlyArray<Agent.Agent<unknown>>) => {
    const bad = agents.find((agent) => nameProblem(agent.name) !== undefined)
    if (bad !== undefined) return `agent name ${nameProblem(bad.name)!}`
    const names = agents.map((agent) => agent.name)
    const twice = names.find((n, i) => names.indexOf(n) !== i)
    return twice === undefined || `two agents are named ${JSON.stringify(twice)}`
  })
)

/** How many at once: a whole number >= 1, or `"unbounded"` (Effect's own word). */
export const Concurrency = Schema.Union([IntAtLeast(1), Schema.Literal("unbounded")])

/** The option schemas of `Architecture.option`. */
export const option = {
  /** An agent made with `Agent.make` (a role's agent). */
  agent: AgentSchema,
  /** Agents with usable, distinct names (a Swarm's, a Blackboard's). */
  agents: NamedAgents,
  /** A name that can be part of a session id (a worker's, a route's): letters and digits joined by single - or _. */
  name: Name,
  /** An architecture (a base run's). */
  architecture: ArchitectureSchema,
  /** A whole number >= `min`. */
  int: IntAtLeast,
  /** A number in [0, 1] (thresholds, confidences). */
  unit: UnitInterval,
  /** A `Duration.Input`: milliseconds, `"5 seconds"`, a `Duration`. */
  duration: DurationInput,
  /** How many at once: an integer >= 1 or `"unbounded"`. */
  concurrency: Concurrency,
  /** A prompt template that may use only these `{placeholders}`. */
  template: Template.Template,
  /** A function (checked by `typeof`: its signature is the caller's promise). */
  function: FunctionSchema,
  /** The option's default when it is absent or `undefined`. */
  withDefault,
  /** The option may be absent. */
  optional: <S extends Schema.Constraint>(schema: S): Schema.optional<S> => Schema.optional(schema)
} as const
