/**
 * `valet rollout --tokens --reward judged:…`: the judge asks for no token data, but it asks the same actors. The pool
 * file's `max_in_flight` is a cap on requests in flight to an actor, kept by the pool's `Actor` (its semaphore, its
 * in-flight count for routing): the judge's calls count against it with the actor's.
 *
 * The server here counts the POSTs it is answering at once (each held a while, so that a judge's call made while the
 * other task's actor call is answered would overlap it). With `max_in_flight: 1` no two may overlap.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Command } from "effect/cli"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryOutput } from "../../../src/cli/internal/output.js"
import { makeCommand, rolloutModel } from "../../../src/cli/internal/rollout.js"
import { testIsolation } from "../../support/processes.js"
import * as Server from "../../support/openAiServer.js"

if (testIsolation === "process") process.env["VALET_SANDBOX_ISOLATION"] = "process"

const dir = mkdtempSync(join(tmpdir(), "valet-judge-pool-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const verdict = Server.chatCompletion("{\"score\": 1}")

/** A server answering completions (token data) and the judge's chat calls, each POST held `holdMs`; counts overlap. */
const countingServer = (holdMs: number) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly url: string; readonly most: () => number; readonly posts: () => number; readonly close: () => void }>((resume) => {
      const completion = Server.fixture("vllm-completion-tokens.json")
      let now = 0
      let most = 0
      let posts = 0
      const server = createServer((request, response) => {
        if (request.method !== "POST") {
          response.writeHead(200).end("")
          return
        }
        posts++
        now++
        most = Math.max(most, now)
        request.resume()
        request.on("end", () => {
          setTimeout(() => {
            now--
            const body = request.url?.startsWith("/v1/chat/completions") ? JSON.stringify(verdict) : completion
            response.writeHead(200, { "content-type": "application/json" }).end(body)
          }, holdMs)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({
          url: `http://127.0.0.1:${port}`,
          most: () => most,
          posts: () => posts,
          close: () => void server.close()
        }))
      })
    }),
    (server) => Effect.sync(() => server.close())
  )

describe("valet rollout --tokens with a judged reward: the pool file's max_in_flight", () => {
  it.live("the judge's calls and the actor's calls to one actor stay within its max_in_flight", () =>
    Effect.gen(function*() {
      // Held long enough that a second call the cap let through would be sent while the first is answered.
      const server = yield* countingServer(300)
      const tasks = join(dir, "tasks.jsonl")
      writeFileSync(tasks, ["a", "b"].map((id) => JSON.stringify({ task_id: id, prompt: `Do ${id}.` })).join("\n") + "\n")
      const config = join(dir, "pool.yaml")
      writeFileSync(config, `actors:\n  - name: a\n    base_url: ${server.url}\n    api: openai\n    model: loopback-model\n    max_in_flight: 1\n`)
      const output = memoryOutput()
      yield* Command.runWith(makeCommand(rolloutModel, () => output), { version: "test" })([
        tasks,
        "--config", config,
        "--max-steps", "1",
        "--concurrency", "2",
        "--tokens",
        "--reward", "judged:Is the answer right?",
        "--trajectories", join(dir, "trajectories"),
        "--state-db", join(dir, "state.db"),
        "--work-root", dir
      ]).pipe(Effect.provide(NodeServices.layer))
      // Two actor calls and two judge calls, all to actor `a`.
      expect(server.posts()).toBe(4)
      expect(server.most()).toBe(1)
    }), 60_000)
})
