/**
 * `valet runs decide <runId> <callId> --approve|--reject [--reason]` against a real served run (valet's server on a
 * loopback port, an agent whose tool waits for a person): each decision taken as the server's route takes it, and
 * every refusal one line with its status.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { FetchHttpClient } from "effect/http"
import * as RunsClient from "../../../src/serve/RunsClient.js"
import { valet } from "../../support/cli.js"
import { refundCall, supportAgent } from "../../support/approvals.js"
import { serveAgents } from "../../support/serve.js"

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
