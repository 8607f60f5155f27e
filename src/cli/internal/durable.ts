/**
 * What the commands need for durable work (`valet eval --durable`, `valet runner`): the store a `--durable` /
 * `--store` value names (a `postgres://` URL, else a SQLite file), the engine for it, and agents that cross processes
 * by name — an evaluation's agent is named after its settings (`valet-eval:{"architecture":"ensemble",...}`), which
 * any runner turns back into the same agent.
 */
import { type Config, Effect, Layer, Option, Schema, SchemaGetter } from "effect"
import type { SqlError } from "effect/sql"
import type { WorkflowEngine } from "effect/workflow"
import { Flag } from "effect/cli"
import type * as Agent from "../../core/Agent.js"
import type * as Model from "../../core/Model.js"
import type * as Sandbox from "../../environment/Sandbox.js"
import * as Durable from "../../rollouts/Durable.js"
import { acceptedNames, agentFor, architectureOf, architectures, type Settings } from "./evalAgents.js"

/** Where durable work is stored. */
export type Store =
  | { readonly _tag: "Postgres"; readonly url: string }
  | { readonly _tag: "Sqlite"; readonly file: string }

/** The store a `--durable` / `--store` value names: a `postgres://` (or `postgresql://`) URL, else a SQLite file. */
export const storeOf = (value: string): Store =>
  /^postgres(ql)?:\/\//i.test(value) ? { _tag: "Postgres", url: value } : { _tag: "Sqlite", file: value }

/** A store for messages: the SQLite file, or the PostgreSQL server without its credentials. */
export const describeStore = (store: Store): string => (store._tag === "Sqlite" ? store.file : Durable.describePostgres(store.url))

/**
 * `effect` with a durable store that failed during the work — which the SQLite engine reports as a
 * `DurableStoreError` defect, the engine's error channel being each workflow's own — as the command's typed error,
 * so that it is the one line `valet: DurableStoreError: sqlite <file>: …`, not an "unexpected error".
 */
export const storeFailureAsError = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Durable.DurableStoreError, R> =>
  Effect.catchDefect(effect, (defect) => defect instanceof Durable.DurableStoreError ? Effect.fail(defect) : Effect.die(defect))

/** `--durable <sqlite file | postgres url>`. */
export const durableFlag = Flag.String("durable").pipe(
  Flag.filter((value) => value.trim() !== "", () => "a SQLite file or a postgres:// URL"),
  Flag.withDescription(
    "Make every problem or step a durable workflow: a SQLite file (this process does the work; kill it and run the same " +
      "command again to go on) or a postgres:// URL (runners started with `valet runner --store <url>` do the work)."
  ),
  Flag.optional
)

const prefix = "valet-eval:"

// The settings that shape an agent; the others (out, concurrency…) are the evaluation's, not the agent's.
const AgentSettings = Schema.Struct({
  // A name valet 0.x wrote (`self-refine`) stands for the same agent: a runner serves older clients too.
  architecture: Schema.Literals(acceptedNames).pipe(
    Schema.decodeTo(Schema.Literals(architectures), {
      decode: SchemaGetter.transform(architectureOf),
      encode: SchemaGetter.transform((name: typeof architectures[number]): string => name)
    })
  ),
  maxCalls: Schema.optional(Schema.Int),
  maxRounds: Schema.optional(Schema.Int),
  maxConcurrency: Schema.optional(Schema.Int),
  n: Schema.optional(Schema.Int),
  attempts: Schema.optional(Schema.Int),
  earlyStop: Schema.optional(Schema.Int)
})
const decodeAgentSettings = Schema.decodeUnknownOption(Schema.fromJsonString(AgentSettings))

/** The name an evaluation's agent crosses processes under: its settings. */
export const agentNameOf = (settings: Settings): string => {
  const { architecture, maxCalls, maxRounds, maxConcurrency, n, attempts, earlyStop } = settings
  const knobs = Object.fromEntries(
    Object.entries({ maxCalls, maxRounds, maxConcurrency, n, attempts, earlyStop }).filter(([, value]) => value !== undefined)
  )
  return `${prefix}${JSON.stringify({ architecture, ...knobs })}`
}

/** The agent a name stands for on a runner: an evaluation's agent rebuilt from its settings, else none. */
export const resolveAgent = (name: string): Effect.Effect<Option.Option<Agent.Agent<Model.Model | Sandbox.Sandbox>>> => {
  if (!name.startsWith(prefix)) return Effect.succeedNone
  const settings = decodeAgentSettings(name.slice(prefix.length))
  if (Option.isNone(settings)) return Effect.succeedNone
  return agentFor(settings.value).pipe(
    Effect.map((built) => Option.some(built.agent as Agent.Agent<Model.Model | Sandbox.Sandbox>)),
    Effect.orElseSucceed(() => Option.none())
  )
}

/**
 * The engine an evaluation runs on: on SQLite this process is the runner too (the handlers on `model`, and on
 * `sandbox` when the architecture runs commands); on PostgreSQL it is a client, and the model and sandbox are the
 * runners'.
 */
export const engineFor = <E1, E2>(
  store: Store,
  layers: { readonly model: Layer.Layer<Model.Model, E1>; readonly sandbox: Layer.Layer<Sandbox.Sandbox, E2> },
  needsSandbox: boolean
): Layer.Layer<WorkflowEngine.WorkflowEngine, E1 | E2 | Durable.DurableStoreError | Config.ConfigError | SqlError.SqlError> => {
  if (store._tag === "Postgres") return Durable.layerPostgresClient({ url: store.url })
  const handlers = Durable.layer(resolveAgent)
  // An architecture that runs no command never asks for the sandbox (the handlers read it optionally).
  const provided = needsSandbox
    ? handlers.pipe(Layer.provide(Layer.merge(layers.model, layers.sandbox)))
    : handlers.pipe(Layer.provide(layers.model)) as Layer.Layer<never, E1, WorkflowEngine.WorkflowEngine>
  return provided.pipe(Layer.provideMerge(Durable.layerSqlite(store.file)))
}
