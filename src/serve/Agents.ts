/**
 * The agents a server offers, by name: what `valet serve` routes, the OpenAI facade's models and `valet mcp`'s
 * tools are made from. Build it from agents in code (`Agents.layer([...])`) or from a `valet.yaml`
 * (`AgentConfig.layer(path)`). Each entry may cap the budget of its runs; a caller's budget can only lower the caps.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 *
 * // Each agent brings its own model, so that a server's runs need nothing from the caller.
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * const catalog = Agents.layer([
 *   assistant,
 *   {
 *     name: "careful",
 *     description: "The assistant, at most 5 model calls a run",
 *     architecture: "react",
 *     agent: assistant,
 *     budget: { maxCalls: 5 }
 *   }
 * ])
 *
 * const program = Effect.gen(function*() {
 *   const agents = yield* Agents.Agents
 *   const careful = agents.get("careful")
 *   // A caller's budget can only lower an entry's caps: a run of `careful` asking for 50 calls gets 5.
 *   const budget = careful === undefined ? undefined : Agents.budgetOf(careful, { maxCalls: 50 })
 *   return { names: agents.list.map((entry) => entry.name), budget }
 * }).pipe(Effect.provide(catalog))
 * ```
 *
 * @since 0.2.0
 */
import { Context, Layer } from "effect"
import type * as Agent from "../core/Agent.js"
import * as Budget from "../core/Budget.js"

/**
 * One agent on offer. Its runs need nothing from the caller: its model is its own.
 *
 * @since 0.2.0
 * @category models
 */
export interface Entry {
  readonly name: string
  /** One line about it (MCP tool description, `GET /agents`). */
  readonly description: string
  /** Its architecture's name, for listings. */
  readonly architecture: string
  readonly agent: Agent.Agent<never>
  /** Caps on each run. */
  readonly budget?: Budget.Limits | undefined
}

/**
 * The catalog.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /** In the order they were given. */
  readonly list: ReadonlyArray<Entry>
  readonly get: (name: string) => Entry | undefined
}

/**
 * The agents in context.
 *
 * @since 0.2.0
 * @category services
 */
export class Agents extends Context.Service<Agents, Service>()("valet/Agents") {}

/** An agent given as is: its name, its architecture's name, and a description saying so. */
const entryOf = (agent: Agent.Agent<never> | Entry): Entry =>
  "agent" in agent
    ? agent
    : { name: agent.name, description: `${agent.name} (${agent.architecture.name})`, architecture: agent.architecture.name, agent }

/**
 * A catalog of entries, or of agents (named by `Agent.make`'s name). A name given twice is a defect.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (entries: Iterable<Agent.Agent<never> | Entry>): Service => {
  const list = Array.from(entries, entryOf)
  const byName = new Map<string, Entry>()
  for (const entry of list) {
    if (byName.has(entry.name)) throw new Error(`Agents: two agents are named ${JSON.stringify(entry.name)}`)
    byName.set(entry.name, entry)
  }
  return { list, get: (name) => byName.get(name) }
}

/**
 * `make` as a layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (entries: Iterable<Agent.Agent<never> | Entry>): Layer.Layer<Agents> =>
  Layer.sync(Agents, () => make(entries))

const capKeys = ["maxCalls", "maxInputTokens", "maxOutputTokens", "maxTotalTokens", "maxCost"] as const

/**
 * The budget of one run: each limit the lower of the entry's cap and the caller's request; the entry's other
 * settings (pricing, warnings) kept. `undefined` when neither sets anything.
 *
 * @since 0.2.0
 * @category utils
 */
export const budgetOf = (entry: Entry, requested: Budget.Limits | undefined): Budget.Limits | undefined => {
  if (entry.budget === undefined) return requested
  if (requested === undefined) return entry.budget
  const limits: Record<string, unknown> = { ...requested, ...entry.budget }
  for (const key of capKeys) {
    const cap = entry.budget[key]
    const asked = requested[key]
    limits[key] = cap === undefined ? asked : asked === undefined ? cap : Math.min(cap, asked)
    if (limits[key] === undefined) delete limits[key]
  }
  // The wall clock, whichever name and unit each side used, as one `maxDuration` in milliseconds.
  const cap = Budget.durationMsOf(entry.budget)
  const asked = Budget.durationMsOf(requested)
  delete limits.maxDurationMs
  const duration = cap === undefined ? asked : asked === undefined ? cap : Math.min(cap, asked)
  if (duration === undefined) delete limits.maxDuration
  else limits.maxDuration = duration
  return limits as Budget.Limits
}
