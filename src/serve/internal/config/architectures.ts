/**
 * The architectures a `valet.yaml` agent can have: the `Catalog`'s, by their names (and the names valet 0.x read), with
 * where their options hold agents (each declaration's `agentOptions`). In the file such an option names another agent
 * of the file (`critic: reviewer`, `workers: [coder, tester]`); `references` finds those names, `make` puts the built
 * agents in their place before the architecture's own check of the options. ToolVote and ActorLoop are not here: they
 * need a sandbox and stores that a config file does not set up.
 */
import { Effect } from "effect"
import * as Catalog from "../../../architectures/Catalog.js"
import type * as Agent from "../../../core/Agent.js"
import type { InvalidOptions } from "../../../core/AgentError.js"
import type * as Architecture from "../../../core/Architecture.js"
import type * as Model from "../../../core/Model.js"

/** A path into the options where an agent's name goes; `*` is every element of a list. */
type Pattern = ReadonlyArray<string>

/** The architecture names a config may use: the catalog's names, and the names valet 0.x read (deprecated). */
export const architectureNames: ReadonlyArray<string> = Catalog.knownNames
export type ArchitectureName = string

/** The architectures' one names, for messages. */
export const canonicalNames: ReadonlyArray<string> = Catalog.names

const definitionOf = (architecture: ArchitectureName): Architecture.AnyDefinition => Catalog.find(architecture)!.definition

const patternsOf = (architecture: ArchitectureName): ReadonlyArray<Pattern> =>
  definitionOf(architecture).agentOptions.map((path) => path.split("."))

/**
 * The tools an architecture adds whose calls its `approvals` option can hold (DeepAgent's file tools and `execute`):
 * an agent's `approvals:` may name them, and its rules for them go to that option.
 */
export const approvalToolsOf = (architecture: ArchitectureName): ReadonlyArray<string> => definitionOf(architecture).approvalTools

const said = new Set<string>()

/** Says once per process that a config file names an architecture the way valet 0.x did. */
export const noteDeprecatedName = (path: string, architecture: ArchitectureName): Effect.Effect<void> =>
  Effect.suspend(() => {
    const found = Catalog.find(architecture)
    if (found?.deprecatedName === undefined || said.has(architecture)) return Effect.void
    said.add(architecture)
    return Effect.logWarning(`${path}: the architecture name ${architecture} is deprecated, use ${found.definition.name} (valet 0.x reads both)`)
  })

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
  for (const pattern of patternsOf(architecture)) walk(options, pattern, [], found)
  return found
}

const replaced = (value: unknown, path: ReadonlyArray<string | number>, agent: unknown): unknown => {
  if (path.length === 0) return agent
  const [head, ...rest] = path
  if (Array.isArray(value)) return value.map((item, i) => i === head ? replaced(item, rest, agent) : item)
  const record = value as Record<string, unknown>
  return { ...record, [head!]: replaced(record[head!], rest, agent) }
}

/**
 * The options with each path option of the architecture (its declaration's `pathOptions`: a deep_agent's `skills`)
 * resolved by `resolve` when it is a string; anything else is left for the architecture's own check to refuse.
 */
export const resolvePaths = (
  architecture: ArchitectureName,
  options: Readonly<Record<string, unknown>>,
  resolve: (path: string) => string
): Readonly<Record<string, unknown>> => {
  let resolved = options
  for (const key of definitionOf(architecture).pathOptions) {
    const value = options[key]
    if (typeof value === "string") resolved = { ...resolved, [key]: resolve(value) }
  }
  return resolved
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
  return definitionOf(architecture).build(resolved) as Effect.Effect<Architecture.Architecture<Model.Model>, InvalidOptions>
}
