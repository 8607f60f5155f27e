/**
 * The architectures a `valet.yaml` agent can have, by name, with where their options hold agents. In the file
 * such an option names another agent of the file (`critic: reviewer`, `workers: [coder, tester]`); `references`
 * finds those names, `resolve` puts the built agents in their place before the architecture's `make` checks the
 * options. ToolVote and ActorLoop are not here: they need a sandbox and stores that a config file does not set up.
 */
import type { Effect } from "effect"
import * as ActorCritic from "../../../architectures/ActorCritic.js"
import * as Blackboard from "../../../architectures/Blackboard.js"
import * as MultiAgentDebate from "../../../architectures/MultiAgentDebate.js"
import * as PlanAndExecute from "../../../architectures/PlanAndExecute.js"
import * as ReAct from "../../../architectures/ReAct.js"
import * as Reflexion from "../../../architectures/Reflexion.js"
import * as ReWOO from "../../../architectures/ReWOO.js"
import * as Router from "../../../architectures/Router.js"
import * as SelfRefine from "../../../architectures/SelfRefine.js"
import * as Supervisor from "../../../architectures/Supervisor.js"
import * as Swarm from "../../../architectures/Swarm.js"
import * as TreeOfThoughts from "../../../architectures/TreeOfThoughts.js"
import type * as Agent from "../../../core/Agent.js"
import type { InvalidOptions } from "../../../core/AgentError.js"
import type * as Architecture from "../../../core/Architecture.js"
import type * as Model from "../../../core/Model.js"
import * as Ensemble from "../../../architectures/Ensemble.js"

/** A path into the options where an agent's name goes; `*` is every element of a list. */
type Pattern = ReadonlyArray<string>

interface Entry {
  /** Where the options name agents. */
  readonly agentPaths: ReadonlyArray<Pattern>
  // The options are checked by `make` itself (unknown keys and bad values are `InvalidOptions`).
  readonly make: (options: never) => Effect.Effect<Architecture.Architecture<Model.Model>, InvalidOptions>
}

const table = {
  react: { agentPaths: [], make: ReAct.make },
  "self-refine": { agentPaths: [["critic"], ["refiner"]], make: SelfRefine.make },
  "plan-and-execute": { agentPaths: [["planner"], ["executor"], ["synthesizer"]], make: PlanAndExecute.make },
  reflexion: { agentPaths: [["evaluator"], ["reflector"]], make: Reflexion.make },
  "actor-critic": { agentPaths: [["actor"], ["critic"]], make: ActorCritic.make },
  supervisor: { agentPaths: [["workers", "*"]], make: Supervisor.make },
  router: { agentPaths: [["routes", "*", "agent"]], make: Router.make },
  debate: { agentPaths: [["debaters", "*"], ["judge"]], make: MultiAgentDebate.make },
  rewoo: { agentPaths: [], make: ReWOO.make },
  swarm: { agentPaths: [["agents", "*"]], make: Swarm.make },
  blackboard: { agentPaths: [["agents", "*"], ["coordinator"], ["decider"]], make: Blackboard.make },
  "tree-of-thoughts": { agentPaths: [["proposer"], ["evaluator"], ["synthesizer"]], make: TreeOfThoughts.make },
  ensemble: { agentPaths: [["critic"], ["judge"], ["solvers", "*", "agent"]], make: Ensemble.make }
} satisfies Record<string, Entry>

/** The architecture names a config may use. */
export const architectureNames = Object.keys(table) as Array<keyof typeof table>
export type ArchitectureName = keyof typeof table

/** A reference to another agent: where it is in the options, and the name. */
export interface Reference {
  readonly path: ReadonlyArray<string | number>
  readonly name: unknown
}

const walk = (
  value: unknown,
  pattern: Pattern,
  at: ReadonlyArray<string | number>,
  found: Array<Reference>
): void => {
  if (pattern.length === 0) {
    found.push({ path: at, name: value })
    return
  }
  const [head, ...rest] = pattern
  if (head === "*") {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, rest, [...at, i], found))
    return
  }
  if (value !== null && typeof value === "object" && !Array.isArray(value) && head! in value) {
    walk((value as Record<string, unknown>)[head!], rest, [...at, head!], found)
  }
}

/** The agents the options of an architecture name (values that are not strings are reported by the caller). */
export const references = (architecture: ArchitectureName, options: unknown): ReadonlyArray<Reference> => {
  const found: Array<Reference> = []
  for (const pattern of table[architecture].agentPaths) walk(options, pattern, [], found)
  return found
}

const replaced = (value: unknown, path: ReadonlyArray<string | number>, agent: unknown): unknown => {
  if (path.length === 0) return agent
  const [head, ...rest] = path
  if (Array.isArray(value)) return value.map((item, i) => i === head ? replaced(item, rest, agent) : item)
  const record = value as Record<string, unknown>
  return { ...record, [head!]: replaced(record[head!], rest, agent) }
}

/** Builds the architecture with the referenced agents in the places of their names. */
export const make = (
  architecture: ArchitectureName,
  options: Readonly<Record<string, unknown>>,
  agentOf: (name: string) => Agent.Agent<never>
): Effect.Effect<Architecture.Architecture<Model.Model>, InvalidOptions> => {
  let resolved: unknown = options
  for (const reference of references(architecture, options)) {
    resolved = replaced(resolved, reference.path, agentOf(reference.name as string))
  }
  return (table[architecture] as Entry).make(resolved as never)
}
