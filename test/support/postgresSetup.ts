/**
 * vitest globalSetup: a throwaway PostgreSQL server for the test run (DESIGN §8), provided to test files as
 * `inject("valet.postgres")` (read it through `./postgres.ts`).
 *
 * - `VALET_TEST_POSTGRES_URL` set: that server is used as is (nothing is started).
 * - Otherwise `initdb` / `pg_ctl` are looked for in `VALET_TEST_POSTGRES_BIN` when set, else on the PATH, then
 *   under `/usr/lib/postgresql/<version>/bin` (where Debian's `postgresql` package puts them); a cluster is made
 *   in a temp dir and started on a free loopback port (durability off: it is thrown away), and both are removed
 *   after the run, also when the run exits early. `initdb` and `pg_ctl` refuse to run as root: as root they run
 *   as the `postgres` user (which owns the temp dir).
 * - No binaries (or a server that will not start): the PostgreSQL suites are skipped, their names saying why —
 *   unless `VALET_REQUIRE_POSTGRES=1` (CI), which fails the run instead.
 * - A run whose selected test files do not use PostgreSQL starts nothing.
 */
import { execFile, execFileSync } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import type { TestProject } from "vitest/node"
import { selectedFilesInclude } from "./selection.js"
import { freePort } from "./valetProcess.js"

/** What the setup tells test files: a server's URL, or why there is none. */
export type PostgresServer =
  | {
    readonly _tag: "Available"
    /** A superuser connection URL (database `postgres`). */
    readonly url: string
    /** Where the server came from: the binaries' directory, or `VALET_TEST_POSTGRES_URL`. */
    readonly source: string
    /** How long making and starting the cluster took. */
    readonly setupMs: number
  }
  | { readonly _tag: "Unavailable"; readonly reason: string }

declare module "vitest" {
  export interface ProvidedContext {
    "valet.postgres": PostgresServer
  }
}

const run = (file: string, args: ReadonlyArray<string>): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(file, args, { encoding: "utf8", timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${[file, ...args].join(" ")} failed: ${stderr.trim() || error.message}`))
      else resolve(stdout)
    })
  })

const onPath = (name: string): string | undefined => {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir !== "" && existsSync(join(dir, name))) return join(dir, name)
  }
  return undefined
}

/**
 * The directory holding `initdb` and `pg_ctl`: `VALET_TEST_POSTGRES_BIN` when set, else the PATH, then Debian's
 * versioned directories, newest first.
 */
export const findBinaries = (): string | undefined => {
  const given = process.env["VALET_TEST_POSTGRES_BIN"]
  if (given !== undefined && given !== "") {
    return existsSync(join(given, "initdb")) && existsSync(join(given, "pg_ctl")) ? given : undefined
  }
  const initdb = onPath("initdb")
  if (initdb !== undefined && onPath("pg_ctl") !== undefined) return join(initdb, "..")
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))
  for (const version of versions) {
    const bin = join(root, version, "bin")
    if (existsSync(join(bin, "initdb")) && existsSync(join(bin, "pg_ctl"))) return bin
  }
  return undefined
}

/** A throwaway server: its superuser URL, and how to stop it (synchronous; removes its files). */
export interface Cluster {
  readonly url: string
  readonly stop: () => void
}

/** Makes a cluster in a temp dir and starts it on a free loopback port (as the `postgres` user when root). */
export const startCluster = async (bin: string): Promise<Cluster> => {
  const asRoot = process.getuid?.() === 0
  let runAs: (file: string, args: ReadonlyArray<string>) => Promise<string> = run
  let owner: { uid: number; gid: number } | undefined
  if (asRoot) {
    const runuser = onPath("runuser") ?? ["/usr/sbin/runuser", "/sbin/runuser"].find(existsSync)
    if (runuser === undefined) throw new Error("running as root, and runuser (to run initdb as postgres) is missing")
    try {
      owner = {
        uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
        gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
      }
    } catch {
      throw new Error("running as root, and there is no postgres user to run initdb and pg_ctl as")
    }
    runAs = (file, args) => run(runuser, ["-u", "postgres", "--", file, ...args])
  }
  const dir = mkdtempSync(join(tmpdir(), "valet-pg-"))
  if (owner !== undefined) chownSync(dir, owner.uid, owner.gid)
  const data = join(dir, "data")
  const pgCtl = join(bin, "pg_ctl")
  let started = false
  const stop = () => {
    try {
      // Synchronous, so that it also runs from a process "exit" handler.
      if (started) {
        const args = ["-D", data, "-m", "immediate", "-w", "stop"]
        if (asRoot) execFileSync(onPath("runuser") ?? "/usr/sbin/runuser", ["-u", "postgres", "--", pgCtl, ...args], { stdio: "ignore" })
        else execFileSync(pgCtl, args, { stdio: "ignore" })
      }
    } catch {
      // Already stopped.
    } finally {
      started = false
      rmSync(dir, { recursive: true, force: true })
    }
  }
  try {
    await runAs(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "valet", "-E", "UTF8", "--locale=C", "-N"])
    // A port taken between choosing it and the server binding it fails the start: try another.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort()
      const settings = [
        `-p ${port}`,
        `-k ${dir}`,
        "-c listen_addresses=127.0.0.1",
        // A throwaway server: durability buys nothing here and costs time.
        "-c fsync=off",
        "-c synchronous_commit=off",
        "-c full_page_writes=off",
        "-c max_connections=200"
      ].join(" ")
      try {
        await runAs(pgCtl, ["-D", data, "-o", settings, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"])
        started = true
        return { url: `postgres://valet@127.0.0.1:${port}/postgres`, stop }
      } catch (error) {
        if (attempt >= 3) {
          const log = existsSync(join(dir, "server.log")) ? readFileSync(join(dir, "server.log"), "utf8").trim() : ""
          throw new Error(`${error instanceof Error ? error.message : String(error)}${log === "" ? "" : `\n${log}`}`)
        }
      }
    }
  } catch (error) {
    stop()
    throw error
  }
}

const notSelected = "no selected test file uses PostgreSQL"

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const provide = (server: PostgresServer) => {
    // Said once here as well as in every skipped suite's name, so a default (non-verbose) report shows it too.
    if (server._tag === "Unavailable" && server.reason !== notSelected) {
      console.warn(`valet: the PostgreSQL suites are skipped: ${server.reason}`)
    }
    project.provide("valet.postgres", server)
  }
  const external = process.env["VALET_TEST_POSTGRES_URL"]
  if (external !== undefined && external !== "") {
    provide({ _tag: "Available", url: external, source: "VALET_TEST_POSTGRES_URL", setupMs: 0 })
    return undefined
  }
  const required = process.env["VALET_REQUIRE_POSTGRES"] === "1"
  if (!(await selectedFilesInclude(project, ["support/postgres"]))) {
    provide({ _tag: "Unavailable", reason: notSelected })
    return undefined
  }
  const bin = findBinaries()
  if (bin === undefined) {
    const where = process.env["VALET_TEST_POSTGRES_BIN"]
      ? `in VALET_TEST_POSTGRES_BIN=${process.env["VALET_TEST_POSTGRES_BIN"]}`
      : "on the PATH or under /usr/lib/postgresql/<version>/bin"
    const reason = `PostgreSQL binaries not found (initdb and pg_ctl ${where}; Debian: apt-get install -y postgresql)`
    if (required) throw new Error(`VALET_REQUIRE_POSTGRES=1 but ${reason}`)
    provide({ _tag: "Unavailable", reason })
    return undefined
  }
  const startedAt = performance.now()
  let cluster: Cluster
  try {
    cluster = await startCluster(bin)
  } catch (error) {
    const reason = `could not start a throwaway PostgreSQL from ${bin}: ${error instanceof Error ? error.message : String(error)}`
    if (required) throw new Error(reason)
    provide({ _tag: "Unavailable", reason })
    return undefined
  }
  const setupMs = Math.round(performance.now() - startedAt)
  provide({ _tag: "Available", url: cluster.url, source: bin, setupMs })
  // A run killed before its teardown still stops the server and removes its files.
  process.once("exit", cluster.stop)
  return () => {
    process.removeListener("exit", cluster.stop)
    cluster.stop()
  }
}
