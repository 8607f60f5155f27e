/**
 * A throwaway PostgreSQL for a benchmark's rows: the machine's binaries (as the tests find them), a cluster in a
 * temporary folder, and one database in it. When there are no binaries or the cluster does not start, the rows are
 * left out and `note` says why (a benchmark never fails for want of PostgreSQL).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { findBinaries, startCluster } from "../../test/support/postgresSetup.js"

/** The database `name` on a new cluster (stopped by `stop`, and when the process exits), or `undefined`. */
export const throwawayDatabase = async (
  name: string,
  note: (reason: string) => void
): Promise<{ readonly url: string; readonly stop: () => void } | undefined> => {
  const bin = findBinaries()
  if (bin === undefined) {
    note("no PostgreSQL binaries (initdb, pg_ctl on the PATH or under /usr/lib/postgresql/<version>/bin): the postgres rows are left out")
    return undefined
  }
  const started = await startCluster(bin).catch((error: unknown) => {
    note(`could not start a throwaway PostgreSQL from ${bin} (${error instanceof Error ? error.message.split("\n")[0] : String(error)}): the postgres rows are left out`)
    return undefined
  })
  if (started === undefined) return undefined
  process.on("exit", started.stop)
  const url = new URL(started.url)
  url.pathname = `/${name}`
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(started.url), maxConnections: 1 })
    yield* sql`CREATE DATABASE ${sql(name)}`
  })).pipe(Effect.provide(Reactivity.layer)))
  return { url: url.toString(), stop: started.stop }
}
