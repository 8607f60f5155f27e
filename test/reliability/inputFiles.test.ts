/**
 * Files from outside — a `valet.yaml`, a durable SQLite store — that are wrong: each is one line on stderr naming the
 * file (and the field or the server), with the exit code that says whose fault it is (2 for a bad valet.yaml, 1 for
 * a store or a server that failed), soon: no stack traces, no heap exhausted, no retry loop.
 *
 * On aa650ea: `server.port: 99999` was accepted, a "billion laughs" file was exit 1 "unexpected error", a 200 MB
 * file ran V8 out of memory, an MCP server that could not start named neither its command nor the file, and a
 * durable store with damaged pages logged a stack trace per retry and ended in "unexpected error:
 * PersistenceError" (or hung, retrying forever).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { truncateSync } from "node:fs"
import { join } from "node:path"
import { storeFailureAsError } from "../../src/cli/internal/durable.js"
import { describeFailure } from "../../src/cli/internal/main.js"
import * as Durable from "../../src/rollouts/Durable.js"
import { valet } from "../support/cli.js"
import * as LoopbackServer from "../support/openAiServer.js"
import { damageMiddlePages } from "../support/sqliteFiles.js"
import { tempDir as makeTempDir } from "../support/tempDir.js"

const tempDir = makeTempDir("valet-input-files-")

const agents = "model: { provider: scripted, replies: [hi] }\nagents:\n  a: { instructions: x }\n"

/** Nine anchors, each a list of nine aliases of the one before: 9^9 strings once expanded. */
const billionLaughs = [
  "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
  ..."bcdefghi".split("").map((name, i) => `${name}: &${name} [${Array(9).fill(`*${"abcdefgh"[i]}`).join(", ")}]`),
  "model: { provider: scripted, replies: [hi] }",
  "agents:\n  x: { instructions: *i }"
].join("\n")

describe("reliability: a bad valet.yaml is exit 2 and one line naming the file and the field", () => {
  it.live("serve, mcp and run --agents: a port out of range, a billion laughs, 200 MB", () =>
    Effect.gen(function*() {
      const { write } = yield* tempDir
      const port = write("port.yaml", `${agents}server: { port: 99999 }\n`)
      const laughs = write("laughs.yaml", `${billionLaughs}\n`)
      const huge = write("huge.yaml", "")
      // 200 MB on no disk: a sparse file.
      truncateSync(huge, 200_000_000)
      const cases: ReadonlyArray<readonly [args: ReadonlyArray<string>, line: string]> = [
        [["serve", "--config", port], `valet serve: ${port}:4:17: server.port must be an integer 0-65535, got 99999`],
        [["mcp", "--config", port, "--http"], `valet mcp: ${port}:4:17: server.port must be an integer 0-65535, got 99999`],
        [
          ["serve", "--config", laughs],
          `valet serve: ${laughs}: refused: its aliases (*name) expand more than 100 times in all (a "billion laughs" file expands them billions of times)`
        ],
        [
          ["run", "--agents", laughs, "hi"],
          `valet run: ${laughs}: refused: its aliases (*name) expand more than 100 times in all (a "billion laughs" file expands them billions of times)`
        ],
        [["serve", "--config", huge], `valet serve: ${huge}: is 200000000 bytes, more than the 1 MiB (1048576 bytes) a valet.yaml may hold`],
        [["mcp", "--config", huge], `valet mcp: ${huge}: is 200000000 bytes, more than the 1 MiB (1048576 bytes) a valet.yaml may hold`]
      ]
      for (const [args, line] of cases) {
        const { code, errors } = yield* valet(args)
        expect({ args, code, errors }).toEqual({ args, code: 2, errors: [line] })
      }
    }).pipe(Effect.scoped))

  it.live("an MCP server that cannot start: exit 1, one line with the file and line, the server, its command, why", () =>
    Effect.gen(function*() {
      const { write } = yield* tempDir
      const file = write(
        "valet.yaml",
        "model: { provider: scripted, replies: [hi] }\nmcpServers:\n  files:\n    command: /no/such/mcp-server\n    args: [--root, /srv]\n" +
          "agents:\n  a: { instructions: x, tools: [files] }\n"
      )
      const { code, errors } = yield* valet(["run", "--agents", file, "hi"])
      expect({ code, errors }).toEqual({
        code: 1,
        errors: [
          `valet run: McpError: ${file}:4:5: MCP server "files" (/no/such/mcp-server --root /srv) cannot start: ` +
          "Cannot spawn MCP server: spawn /no/such/mcp-server ENOENT"
        ]
      })
    }).pipe(Effect.scoped))
})

describe("reliability: a durable store that is damaged or not SQLite is exit 1 and one line naming the file", () => {
  it.effect("a store that fails during the work (the engine's DurableStoreError defect) is the same kind of line", () =>
    Effect.gen(function*() {
      // What `Durable.layerSqlite`'s engine dies with when the file fails mid-run (see test/rollouts/Durable.test.ts).
      const failed = new Durable.DurableStoreError({ store: "sqlite", message: "sqlite runs.db: storage failed: disk I/O error" })
      const exit = yield* Effect.exit(storeFailureAsError(Effect.die(failed)))
      expect(exit._tag === "Failure" && describeFailure(exit.cause, "valet eval")).toEqual({
        line: "valet eval: DurableStoreError: sqlite runs.db: storage failed: disk I/O error",
        exitCode: 1
      })
      // Other defects stay defects.
      const other = yield* Effect.exit(storeFailureAsError(Effect.die(new Error("bug"))))
      expect(other._tag === "Failure" && describeFailure(other.cause, "valet eval").line).toMatch(/^valet eval: unexpected error: bug/)
    }))

  it.live("eval and actor-loop --durable on a store with damaged pages; eval on a file that is not SQLite", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir
      const pool = write("pool.yaml", `actors:\n  - name: one\n    base_url: ${server.url}\n    model: m\n    api: openai\n`)
      const problems = (prefix: string) =>
        Array.from({ length: 8 }, (_, i) => JSON.stringify({ id: `${prefix}${i}`, problem: `What is ${i} + 1?`, reference: `${i + 1}` }))
          .join("\n")
      const store = join(dir, "runs.db")
      const evaluate = (dataset: string, durable: string) =>
        valet([
          "eval", dataset, "--architecture", "self_refine", "--max-rounds", "1", "--config", pool,
          "--out", `${dataset}.results`, "--durable", durable
        ])
      // A store as a durable evaluation leaves it, then damaged in the middle (its first page, the header, intact).
      const first = yield* evaluate(write("first.jsonl", problems("a")), store)
      expect({ code: first.code, errors: first.errors }).toEqual({ code: 0, errors: [] })
      damageMiddlePages(store)

      const damaged = `DurableStoreError: sqlite ${store}: the database file is damaged`
      const again = yield* evaluate(write("second.jsonl", problems("b")), store)
      expect(again.code).toBe(1)
      expect(again.errors).toHaveLength(1)
      expect(again.errors[0]).toMatch(new RegExp(`^valet eval: ${damaged} \\(.+\\): restore it from a backup, or start again on a new file$`))
      const tasks = write("tasks.jsonl", `{"task_id":"t1","prompt":"Say something."}\n`)
      const stepped = yield* valet(
        ["actor-loop", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "t"), "--durable", store],
        { VALET_SANDBOX_ISOLATION: "process" }
      )
      expect(stepped.code).toBe(1)
      expect(stepped.errors.filter((line) => !line.includes("isolation"))).toEqual([expect.stringMatching(`^valet actor-loop: ${damaged} `)])

      const text = write("notes.txt", "these are notes, not a database\n".repeat(100))
      const foreign = yield* evaluate(write("third.jsonl", problems("c")), text)
      expect({ code: foreign.code, errors: foreign.errors }).toEqual({
        code: 1,
        errors: [
          `valet eval: DurableStoreError: sqlite ${text}: is not a SQLite database (file is not a database): name a new file, or one a durable run wrote`
        ]
      })
    }).pipe(Effect.scoped), 60_000)
})
