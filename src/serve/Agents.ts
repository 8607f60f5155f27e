/**
 * The agents a server offers, by name: what `valet serve` routes, the OpenAI facade's models and `valet mcp`'s
 * tools are made from. Build it from agents in code (`Agents.layer([...])`) or from a `valet.yaml`
 * (`AgentConfig.layer(path)`). Each entry may cap the budget of its runs; a caller's budget can only lower the caps.
 *
 * `Agents.layer` takes agents that need services (a `Model`, a `Sandbox`, …) and gives them the services of the
 * context the layer is built in: the same agent values serve on `ScriptedModel` in a test and on a real model in
 * production, by providing another layer.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 *
 * // Agent<Model>: the model comes from the layer that `Agents.layer` is built with.
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief." })
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
 * // In a test, a scripted model; in production, `OpenAiCompatible.layerNode(…)` in its place.
 * const testCatalog = catalog.pipe(Layer.provide(ScriptedModel.layer(["Hi!"])))
 *
 * const program = Effect.gen(function*() {
 *   const agents = yield* Agents.Agents
 *   const careful = agents.get("careful")
 *   // A caller's budget can only lower an entry's caps: a run of `careful` asking for 50 calls gets 5.
 *   const budget = careful === undefined ? undefined : Agents.budgetOf(careful, { maxCalls: 50 })
 *   return { names: agents.list.map((entry) => entry.name), budget }
 * }).pipe(Effect.provide(testCatalog))
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, Scope } from "effect"
import * as Agent from "../core/Agent.js"
import type * as Guardrail from "../core/Guardrail.js"
import * as Budget from "../core/Budget.js"
import * as HumanLoop from "../core/HumanLoop.js"

/**
 * One agent on offer. In the catalog its runs need nothing from the caller (`Entry<never>`): `Agents.layer` gives
 * an agent that needs services `R` those of the context it is built in.
 *
 * @since 0.2.0
 * @category models
 */
export interface Entry<out R = never> {
  readonly name: string
  /** One line about it (MCP tool description, `GET /agents`). */
  readonly description: string
  /** Its architecture's name, for listings. */
  readonly architecture: string
  readonly agent: Agent.Agent<R>
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
  /**
   * Guardrails by name that a run's request may name (`valet.yaml`'s `guardrails:`; `Runs`' `guardrails` option adds
   * to them). Absent: none.
   */
  readonly guardrails?: ReadonlyMap<string, Guardrail.Guardrail> | undefined
}

/**
 * The agents in context.
 *
 * @since 0.2.0
 * @category services
 */
export class Agents extends Context.Service<Agents, Service>()("valet/Agents") {}

/** An agent given as is: its name, its architecture's name, and a description saying so. */
const entryOf = <R>(agent: Agent.Agent<R> | Entry<R>): Entry<R> =>
  "agent" in agent
    ? agent
    : { name: agent.name, description: `${agent.name} (${agent.architecture.name})`, architecture: agent.architecture.name, agent }

/**
 * A catalog of entries, or of agents (named by `Agent.make`'s name), and the guardrails by name its runs' requests
 * may name. A name given twice is a defect.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (
  entries: Iterable<Agent.Agent<never> | Entry>,
  options?: { readonly guardrails?: ReadonlyMap<string, Guardrail.Guardrail> | undefined }
): Service => {
  const list = Array.from(entries, entryOf)
  const byName = new Map<string, Entry>()
  for (const entry of list) {
    if (byName.has(entry.name)) throw new Error(`Agents: two agents are named ${JSON.stringify(entry.name)}`)
    byName.set(entry.name, entry)
  }
  return { list, get: (name) => byName.get(name), ...(options?.guardrails !== undefined ? { guardrails: options.guardrails } : {}) }
}

/**
 * `make` as a layer, for agents that may need services: each agent is given the services of the context the layer
 * is built in (`Agent.provide`), so the layer needs what the agents need. An agent's own model (`Agent.make`'s
 * `model`) still wins over a `Model` in that context. A service built once (a `ScriptedModel.layer`, a client) is
 * shared by every run; a model layer per run is `Agent.make`'s `model`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = <const A extends Agent.Agent<unknown> | Entry<unknown>>(
  entries: Iterable<A>
): Layer.Layer<Agents, never, Exclude<Needs<A>, Scope.Scope>> =>
  Layer.effect(
    Agents,
    Effect.map(Effect.context<never>(), (context) => {
      // `Agent.provide` leaves out what belongs to the running fiber (the scope, the tracing parent, log annotations…):
      // here, the layer builder's. And the `HumanLoop`: who decides a run's waiting calls is the surface's that runs
      // it (`Runs` gives the app's or its own, `McpAgents` asks the calling client), which a captured one would hide.
      const given = Context.omit(HumanLoop.HumanLoop)(context)
      // Nothing to give (agents in code with their own models): runs go as they would without the layer.
      if (given.mapUnsafe.size === 0) return make(entries as Iterable<Agent.Agent<never> | Entry>)
      // Per-request services (the current user, the request) cannot be given here: the layer is built once.
      return make(Array.from(entries, (entry) => {
        const { agent, ...rest } = entryOf(entry)
        return { ...rest, agent: Agent.provide(agent, given) as Agent.Agent<never> }
      }))
    })
  ) as Layer.Layer<Agents, never, Exclude<Needs<A>, Scope.Scope>>

/**
 * What the runs of the agents in a list of agents and entries need.
 *
 * @since 0.2.0
 * @category models
 */
export type Needs<A> = A extends Agent.Agent<infer R> ? R : A extends Entry<infer R> ? R : never

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
