/**
 * Where durable runs live: `effect/cluster`'s workflow engine over SQL storage.
 *
 * - SQLite: one process (`SingleRunner`), its state in a file (valet's `node:sqlite` client).
 * - PostgreSQL: any number of runner processes, each serving a share of the workflows' shards on a socket
 *   (`NodeClusterSocket`), and clients (the process that starts an evaluation) that only send. Shard locks are
 *   PostgreSQL advisory locks, released by the server the moment a killed runner's connection closes; the other
 *   runners notice the dead one by pinging it, take its shards and resume its workflows from the stored messages;
 *   when none notices, its registration expires after `shardLockExpiration` (10 s here: see
 *   `defaultShardLockExpiration`).
 *
 * `@effect/sql-pg` is an optional peer: it is loaded when a PostgreSQL engine is built, so a user on SQLite does not
 * need it.
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import { ClusterWorkflowEngine, RunnerAddress, SingleRunner } from "effect/cluster"
import { SqlClient } from "effect/sql"
import * as SqliteClient from "../../../environment/SqliteClient.js"

/** The store of a durable engine could not be opened. */
export class DurableStoreError extends Schema.TaggedError<DurableStoreError>()("DurableStoreError", {
  store: Schema.String,
  message: Schema.String
}) {}

/** A one-process engine on a SQLite file. */
export const layerSqlite = (filename: string) =>
  ClusterWorkflowEngine.layer.pipe(
    // One process: shard locks need not outlive it (with "sql", a restarted process waits for the old locks to expire).
    Layer.provideMerge(SingleRunner.layer({ runnerStorage: "memory" })),
    Layer.provide(SqliteClient.layer({ filename })),
    Layer.provide(NodeCrypto.layerDigest)
  )

/** How a PostgreSQL runner or client is set up. */
export interface PostgresOptions {
  /** `postgres://user:password@host:port/database`. */
  readonly url: string
  /** Connections in the pool (default 8). */
  readonly maxConnections?: number | undefined
}

/** How a runner is set up. */
export interface RunnerOptions extends PostgresOptions {
  /** The address other runners and clients reach this one at (default `127.0.0.1`). */
  readonly host?: string | undefined
  /** The port this runner listens on (default 34431). */
  readonly port?: number | undefined
  /** How often a runner pings the others, to take over a dead one's work (default 1 s). */
  readonly healthCheckInterval?: Duration.Input | undefined
  /** How often stored messages are looked for, the latest a taken-over workflow resumes (default 1 s). */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * How long a runner that stopped (killed, frozen, cut off from PostgreSQL) keeps its workflows at most before the
   * others take them over (default 10 s; effect/cluster's own default is 35 s). Its registration expires this long
   * after its last heartbeat, and PostgreSQL ends its lock session after this long idle; it refreshes both every
   * third of it. Shorter moves work sooner, but a runner whose process stalls that long loses its shards.
   */
  readonly shardLockExpiration?: Duration.Input | undefined
}

/** The default port of a runner. */
export const defaultRunnerPort = 34431

/**
 * How long a stopped runner keeps its workflows at most, by default. A runner that is killed usually has its work
 * taken over within about 3 s: its connections close, so PostgreSQL releases its shard locks at once, and another
 * runner, pinging it every second, finds it gone. But the runner that does the pinging is itself one of them (a
 * cluster singleton): when nobody notices, the dead runner stays registered until its last heartbeat is older than
 * the shard lock expiration — effect/cluster's 35 s, measured here in half of the kills. 10 s bounds that case to
 * about 12 s (expiry, then the next assignment refresh and message poll, 1 s each) while leaving a live runner
 * three heartbeats (every 3.3 s) to miss before it loses its shards.
 */
export const defaultShardLockExpiration: Duration.Duration = Duration.seconds(10)

// Connected and asked once here: effect/cluster's storage treats a failed query as a defect, so a server that is not
// there would otherwise end the process with "unexpected error" instead of this one line naming it.
const pgClient = (options: PostgresOptions): Layer.Layer<SqlClient.SqlClient, DurableStoreError> =>
  Layer.effectContext(Effect.gen(function*() {
    const where = serverOf(options.url)
    const failed = (message: string) => new DurableStoreError({ store: "postgres", message: `${where}: ${message}` })
    const { PgClient } = yield* Effect.tryPromise({
      try: () => import("@effect/sql-pg"),
      catch: () => failed("a PostgreSQL store needs the optional package @effect/sql-pg: npm install @effect/sql-pg")
    })
    const context = yield* Layer.build(
      PgClient.layer({ url: Redacted.make(options.url), maxConnections: options.maxConnections ?? 8 })
    ).pipe(Effect.mapError((error) => failed(`cannot connect: ${error.message}`)))
    yield* Context.get(context, SqlClient.SqlClient)`SELECT 1`.pipe(
      Effect.mapError((error) => failed(`cannot connect: ${error.message}`))
    )
    return context
  }))

/** The server of a PostgreSQL URL, without its credentials: `postgres host:port/database`. */
export const serverOf = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `postgres ${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
  } catch {
    return "postgres (an unreadable URL)"
  }
}

const intervals = (options: RunnerOptions) => ({
  runnerHealthCheckInterval: options.healthCheckInterval ?? Duration.seconds(1),
  entityMessagePollInterval: options.pollInterval ?? Duration.seconds(1),
  refreshAssignmentsInterval: Duration.seconds(1),
  // The refresh follows: effect/cluster refreshes every third of the expiration when that is sooner than
  // shardLockRefreshInterval (10 s).
  shardLockExpiration: options.shardLockExpiration ?? defaultShardLockExpiration
})

/**
 * A runner: serves its share of the workflows (those registered by the handler layers it is given) on
 * `host:port`, its state in PostgreSQL. Its `SqlClient` is provided too, for stores that live beside it (the
 * actor loop's task states).
 */
export const layerPostgresRunner = (options: RunnerOptions) =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(NodeClusterSocket.layer({
      storage: "sql",
      shardingConfig: {
        runnerAddress: Option.some(RunnerAddress.make(options.host ?? "127.0.0.1", options.port ?? defaultRunnerPort)),
        ...intervals(options)
      }
    })),
    Layer.provideMerge(pgClient(options)),
    Layer.provide(NodeCrypto.layerDigest)
  )

/** A client: starts workflows and awaits their results; the runners do the work. */
export const layerPostgresClient = (options: PostgresOptions) =>
  ClusterWorkflowEngine.layer.pipe(
    Layer.provideMerge(NodeClusterSocket.layer({
      clientOnly: true,
      storage: "sql",
      shardingConfig: { entityReplyPollInterval: Duration.millis(200) }
    })),
    Layer.provide(pgClient(options)),
    Layer.provide(NodeCrypto.layerDigest)
  )
