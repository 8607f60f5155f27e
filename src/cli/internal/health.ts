/**
 * `valet health [--config]`: every actor of the vLLM pool with its state (`GET /health`) and its API (configured
 * or detected now).
 */
import { Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Vllm from "../../providers/Vllm.js"
import { type Printer, stdoutPrinter } from "./run.js"

/** No actor of the pool is healthy. */
export class NoHealthyActor extends Schema.TaggedError<NoHealthyActor>()("NoHealthyActor", {
  path: Schema.String
}) {
  override get message(): string {
    return `no healthy actor in ${this.path}`
  }
}

/** The table `valet health` prints, one row per actor. */
export const healthTable = (config: Vllm.PoolConfig, statuses: ReadonlyArray<Vllm.ActorStatus>): Array<string> => {
  const rows = [["actor", "base_url", "state", "api", "model"]]
  for (const status of statuses) {
    rows.push([
      status.name,
      status.baseUrl,
      status.healthy ? "healthy" : `unhealthy (${status.detail})`,
      status.api ?? "unknown",
      status.model ?? "-"
    ])
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)))
  const lines = rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd())
  const source = config.fromFile ? config.path : `${config.path} not found: the default single actor`
  return [`pool: ${source}`, ...lines]
}

/** Checks every actor of the pool in context and prints the table; fails when none is healthy. */
export const checkHealth = (printer: Printer): Effect.Effect<ReadonlyArray<Vllm.ActorStatus>, NoHealthyActor, Vllm.Vllm> =>
  Effect.gen(function*() {
    const pool = yield* Vllm.Vllm
    // Every actor of the pool: `health()` without a name cannot fail with UnknownActor.
    const statuses = yield* Effect.orDie(pool.health())
    for (const line of healthTable(pool.config, statuses)) yield* printer.line(line)
    if (!statuses.some((status) => status.healthy)) return yield* new NoHealthyActor({ path: pool.config.path })
    return statuses
  })

/** `valet health [--config]`. */
export const healthCommand = Command.make(
  "health",
  {
    config: Flag.File("config").pipe(
      Flag.withDescription(`The vLLM pool file (default ${Vllm.defaultConfigPath}; without it, one actor at http://127.0.0.1:8000).`),
      Flag.optional
    )
  },
  ({ config }) =>
    checkHealth(stdoutPrinter).pipe(
      Effect.provide(Vllm.layerNode({ configPath: Option.getOrUndefined(config) })),
      Effect.asVoid
    )
).pipe(
  Command.withDescription(
    "Lists each actor of the vLLM pool with its state (GET /health) and its API (openai for `vllm serve`, generate " +
      "for the legacy demo server; detected when the file does not say). Fails when no actor is healthy."
  )
)
