/**
 * `valet runs decide <runId> <callId> --approve|--reject [--reason]` against a real served run (valet's server on a
 * loopback port, an agent whose tool waits for a person): each decision taken as the server's route takes it, and
 * every refusal one line with its status.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope, Stream } from "effect"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FetchHttpClient } from "effect/http"
import * as RunsClient from "../../../src/serve/RunsClient.js"
import { valet } from "../../support/cli.js"
import { refundCall, supportAgent } from "../../support/approvals.js"
import { describePostgres, freshDatabase } from "../../support/postgres.js"
import { serveAgents } from "../../support/serve.js"
import { freePort, startScript } from "../../support/valetProcess.js"

describe("valet runs decide", () => {
  it.live("approves one waiting call, rejects the other with a reason; unknown, decided-again, unauthorized and unreachable are one line each", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent([
          { toolCalls: [refundCall("c1", 250), refundCall("c2", 900)] },
          "Refunded one."
        ])
      const url = yield* serveAgents([agent], { token: "s3cret-token-for-the-test" })
      const client = yield* Effect.provide(RunsClient.make({ baseUrl: url, token: "s3cret-token-for-the-test" }), FetchHttpClient.layer)
      const { runId } = yield* client.create({ agent: "support", input: "Refund both." })
      // Both calls wait (their events) before anyone decides.
      yield* client.events(runId).pipe(
        Stream.filter((event) => event._tag === "ApprovalRequested"),
        Stream.take(2),
        Stream.runDrain
      )
      const auth = ["--url", url, "--token", "s3cret-token-for-the-test"]

      const approved = yield* valet(["runs", "decide", runId, "c1", "--approve", ...auth])
      expect(approved).toEqual({ code: 0, out: `approved the call c1 of run ${runId}\n`, errors: [] })
      // c2 still waits: deciding c1 again is a conflict.
      const again = yield* valet(["runs", "decide", runId, "c1", "--reject", ...auth])
      expect([again.code, again.errors]).toEqual([1, [`valet runs: 409: the call "c1" was decided already`]])
      const unknownRun = yield* valet(["runs", "decide", "run_nope", "c1", "--approve", ...auth])
      expect(unknownRun.code).toBe(1)
      expect(unknownRun.errors).toHaveLength(1)
      expect(unknownRun.errors[0]).toMatch(/^valet runs: 404: .*run_nope/)
      const unknownCall = yield* valet(["runs", "decide", runId, "c9", "--approve", ...auth])
      expect(unknownCall.errors).toEqual([`valet runs: 404: no call "c9" waits for a decision`])
      const noToken = yield* valet(["runs", "decide", runId, "c2", "--approve", "--url", url], {})
      expect(noToken.errors).toEqual([`valet runs: 401: ${url} refused the token (pass --token, or set VALET_TOKEN)`])
      // The token from the environment.
      const rejected = yield* valet(["runs", "decide", runId, "c2", "--reject", "--reason", "too much", "--url", url], {
        VALET_TOKEN: "s3cret-token-for-the-test"
      })
      expect(rejected).toEqual({ code: 0, out: `rejected the call c2 of run ${runId}\n`, errors: [] })

      const events = yield* client.events(runId).pipe(Stream.runCollect)
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Refunded one." } })
      expect(ran).toEqual([250])
      const results = events.filter((event) => event._tag === "ToolReturned")
      expect(results.map((event) => JSON.stringify(event))).toEqual([
        expect.stringContaining("refunded 250"),
        expect.stringContaining("ERROR: rejected: too much")
      ])

      const neither = yield* valet(["runs", "decide", runId, "c2", ...auth])
      expect(neither.errors).toEqual(["valet runs: give one of --approve or --reject"])
      const unreachable = yield* valet(["runs", "decide", runId, "c2", "--approve", "--url", "http://127.0.0.1:1"])
      expect(unreachable.errors).toHaveLength(1)
      expect(unreachable.errors[0]).toMatch(/^valet runs: cannot reach http:\/\/127\.0\.0\.1:1: /)
    }).pipe(Effect.scoped), 30_000)
})

/**
 * `valet runs … --store`: runs of a durable store, waiting in another process (test/support/durableApprovalChild.ts),
 * listed, decided and answered from here; the other process resumes them.
 */
const againstStore = (store: (dir: string) => Effect.Effect<string, unknown, Scope.Scope>, port?: number) =>
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-runs-store-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const child = join(import.meta.dirname, "..", "..", "support", "durableApprovalChild.ts")
    const extra = port === undefined ? [] : [String(port)]
    const url = yield* store(dir)
    const worker = startScript(child, [url, "start", "1", ...extra])
    yield* Effect.addFinalizer(() => Effect.sync(() => worker.kill("SIGKILL")))
    yield* Effect.promise(() => worker.waitFor(/^waiting 1$/, 60_000))

    const listed = yield* valet(["runs", "pending", "run-0", "--store", url])
    expect(listed).toEqual({ code: 0, out: `call k0 act {"n":0}\n`, errors: [] })
    const decided = yield* valet(["runs", "decide", "run-0", "k0", "--approve", "--store", url])
    expect(decided).toEqual({ code: 0, out: "approved the call k0 of run run-0\n", errors: [] })
    // The worker, up all along, resumes the run: the tool runs once, the model reads its result.
    yield* Effect.promise(() => worker.waitFor(/^run-0 read did 0$/, 60_000))
    expect(worker.lines.filter((line) => line === "tool 0")).toHaveLength(1)
    const again = yield* valet(["runs", "decide", "run-0", "k0", "--reject", "--store", url])
    expect(again.errors).toEqual([`valet runs: 409: the call "k0" of run "run-0" was decided already (or its time ran out)`])
    const unknown = yield* valet(["runs", "decide", "run-9", "k0", "--approve", "--store", url])
    expect(unknown.errors).toEqual([`valet runs: 404: no call "k0" of run "run-9" waits for a decision`])
    // A run the store has, waiting on nothing now: nothing listed; one it does not have: 404.
    expect(yield* valet(["runs", "pending", "run-0", "--store", url])).toEqual({ code: 0, out: "", errors: [] })
    expect((yield* valet(["runs", "pending", "run-9", "--store", url])).errors).toEqual([`valet runs: 404: no run "run-9" in the store`])
    const both = yield* valet(["runs", "pending", "run-0", "--store", url, "--url", "http://127.0.0.1:1"])
    expect(both.errors).toEqual(["valet runs: --store names a durable store: it takes no --url or --token"])
    worker.kill("SIGKILL")
    yield* Effect.promise(() => worker.exited)

    // A question, answered from here: a refused answer is one line and the question still waits.
    const asker = startScript(child, [url, "start-ask", "1", ...extra])
    yield* Effect.addFinalizer(() => Effect.sync(() => asker.kill("SIGKILL")))
    yield* Effect.promise(() => asker.waitFor(/^waiting 1$/, 60_000))
    expect((yield* valet(["runs", "pending", "ask-0", "--store", url])).out).toBe(`question q1 "Which city?"\n`)
    const refused = yield* valet(["runs", "answer", "ask-0", "q1", "42", "--json", "--store", url])
    expect(refused.code).toBe(1)
    expect(refused.errors[0]).toMatch(/^valet runs: 400: answer: the answer does not fit/)
    const notJson = yield* valet(["runs", "answer", "ask-0", "q1", "{", "--json", "--store", url])
    expect(notJson.errors[0]).toMatch(/^valet runs: --json: the answer is not JSON/)
    const answered = yield* valet(["runs", "answer", "ask-0", "q1", "Lyon", "--store", url])
    expect(answered).toEqual({ code: 0, out: "answered the question q1 of run ask-0\n", errors: [] })
    yield* Effect.promise(() => asker.waitFor(/^ask-0 read Lyon$/, 60_000))
  }).pipe(Effect.scoped)

describe("valet runs --store (a durable store, the run's process up)", () => {
  it.live("a SQLite file that is not there is refused in one line, not created", () =>
    Effect.gen(function*() {
      const missing = join(tmpdir(), `valet-no-such-store-${process.pid}.db`)
      const refused = yield* valet(["runs", "pending", "run-1", "--store", missing])
      expect([refused.code, refused.errors]).toEqual([1, [`valet runs: no durable store at ${missing}: give the SQLite file the run's process uses`]])
      expect(existsSync(missing)).toBe(false)
    }))

  it.live("SQLite: pending lists the call, decide resumes the run in its process, answer answers a question; refusals one line each", () =>
    againstStore((dir) => Effect.succeed(join(dir, "runs.db"))), 120_000)
})

describePostgres("valet runs --store on PostgreSQL", () => {
  it.live("PostgreSQL: the same against a runner of the cluster, this command a client", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      yield* againstStore(() => Effect.succeed(url), yield* Effect.promise(() => freePort()))
    }).pipe(Effect.scoped), 120_000)
})
