/**
 * The agents of `valet solve`, `valet eval` and `valet runner`: an architecture and the flags that shape it
 * (`Settings`), and the agent they make.
 */
import { Effect } from "effect"
import * as Agent from "../../core/Agent.js"
import type { InvalidOptions } from "../../core/AgentError.js"
import type * as Model from "../../core/Model.js"
import type * as Sandbox from "../../environment/Sandbox.js"
import * as SelfRefine from "../../architectures/SelfRefine.js"
import * as Ensemble from "../../architectures/Ensemble.js"
import * as ToolVote from "../../architectures/ToolVote.js"

/** The architectures the commands run, by their one name. */
export const architectures = ["ensemble", "tool_vote", "self_refine"] as const
/** An architecture the commands run. */
export type ArchitectureName = typeof architectures[number]

/** The names `--architecture` also takes, as valet 0.x spelled them (deprecated). */
export const deprecatedNames: Readonly<Record<string, ArchitectureName>> = { "tool-vote": "tool_vote", "self-refine": "self_refine" }

/** Every name `--architecture` takes. */
export const acceptedNames: ReadonlyArray<string> = [...architectures, ...Object.keys(deprecatedNames)]

/** The architecture a name `--architecture` took stands for. */
export const architectureOf = (name: string): ArchitectureName =>
  (architectures as ReadonlyArray<string>).includes(name) ? (name as ArchitectureName) : deprecatedNames[name]!

/** The flags of `solve` and `eval` that shape the run (absent: the architecture's default). */
export interface Settings {
  readonly architecture: ArchitectureName
  readonly maxCalls?: number | undefined
  readonly maxRounds?: number | undefined
  readonly maxConcurrency?: number | undefined
  readonly n?: number | undefined
  readonly attempts?: number | undefined
  readonly earlyStop?: number | undefined
  /** Problems at once. */
  readonly concurrency?: number | undefined
  readonly shareReference?: boolean | undefined
  readonly out?: string | undefined
  /** `--durable`: every problem a workflow on this store (a SQLite file or a postgres:// URL). */
  readonly durable?: string | undefined
}

/** The instructions of the agent that runs Self-Refine: its base answers in the shape `Evaluate` reads. */
const selfRefineInstructions = "Solve the problem. End your reply with one line of the form FINAL: <answer>."

const defined = <A extends Record<string, unknown>>(object: A): { [K in keyof A]: Exclude<A[K], undefined> } =>
  Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as {
    [K in keyof A]: Exclude<A[K], undefined>
  }

/** The agent for `settings`, and whether it needs a `Sandbox` (ToolVote runs Python). */
export type Built =
  | { readonly sandbox: false; readonly agent: Agent.Agent<Model.Model> }
  | { readonly sandbox: true; readonly agent: Agent.Agent<Model.Model | Sandbox.Sandbox> }

/**
 * The agent for `settings`. `--max-calls` is the Ensemble's own hard cap; for the others it is a per-problem
 * budget (see `budgetOf`).
 */
export const agentFor = (settings: Settings): Effect.Effect<Built, InvalidOptions> => {
  switch (settings.architecture) {
    case "ensemble":
      return Effect.map(
        Ensemble.make(defined({
          maxCalls: settings.maxCalls,
          maxRounds: settings.maxRounds,
          concurrency: settings.maxConcurrency,
          n: settings.n
        })),
        (architecture) => ({ sandbox: false, agent: Agent.make({ name: "valet-ensemble", instructions: "", architecture }) })
      )
    case "tool_vote":
      return Effect.map(
        ToolVote.make(defined({ attempts: settings.attempts, earlyStop: settings.earlyStop, concurrency: settings.maxConcurrency })),
        (architecture) => ({ sandbox: true, agent: Agent.make({ name: "valet-tool-vote", instructions: "", architecture }) })
      )
    case "self_refine":
      return Effect.map(
        SelfRefine.make(defined({ maxRounds: settings.maxRounds })),
        (architecture) => ({
          sandbox: false,
          agent: Agent.make({ name: "valet-self-refine", instructions: selfRefineInstructions, architecture })
        })
      )
  }
}

/** The per-problem budget: `--max-calls` for the architectures without a cap of their own. */
export const budgetOf = (settings: Settings) =>
  settings.architecture !== "ensemble" && settings.maxCalls !== undefined ? { maxCalls: settings.maxCalls } : undefined

