/**
 * The cap on streams that follow a run (`maxEventStreams`): in the registry (`holdEventStream`), and over a real
 * loopback server for `GET /runs/:runId/events` — the reader beyond the cap gets 429 with `Retry-After` while the
 * others stay open; a slot comes back when its client goes away, when its stream ends with the run, and when the
 * response is never streamed (an unknown run). A slot is shown free by opening another stream, retried a bounded
 * number of times (the server learns of a closed socket asynchronously), never by waiting a set time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Runs from "../../src/serve/Runs.js"
import { json, post, scriptedAgent, serveAgents } from "../support/serve.js"

/** An agent whose model never answers: its run goes on until cancelled. */
const stuck = Agent.make({ name: "stuck", instructions: "", model: Layer.orDie(ScriptedModel.layer(() => Effect.never)) }) as Agent.Agent<never>

/**
 * A reader of a run's events kept open: its response (on a 200, its first chunk read: `head`), the rest of its body
 * to read (`rest`), and how to drop it.
 */
const follow = (url: string, runId: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(`${url}/runs/${runId}/events`, { headers, signal: controller.signal })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    const head = response.status === 200 ? decoder.decode((await reader.read()).value) : ""
    const rest = async () => {
      let text = ""
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value)
      return text
    }
    return { response, reader, head, rest, close: () => controller.abort() }
  })

/**
 * Opens a reader of `runId`, again while the answer is 429 (at most `attempts` times, 10 ms apart): the first answer
 * that is not 429, and how many 429s came before it.
 */
const followOnceFree = (url: string, runId: string, headers: Record<string, string> = {}, attempts = 300) =>
  Effect.gen(function*() {
    for (let refused = 0; refused < attempts; refused++) {
      const opened = yield* follow(url, runId, headers)
      if (opened.response.status !== 429) return { ...opened, refused }
      yield* Effect.promise(() => opened.reader.cancel())
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die(new Error(`still 429 after ${attempts} attempts: the slot was never given back`))
  })

describe("Runs.holdEventStream (the registry's cap on streams following runs)", () => {
  it.effect("holds a slot for its scope: beyond maxEventStreams TooManyEventStreams at once; a closed scope gives it back", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const first = yield* Scope.make()
      const second = yield* Scope.make()
      yield* Scope.provide(runs.holdEventStream, first)
      yield* Scope.provide(runs.holdEventStream, second)
      expect(yield* runs.eventStreams).toBe(2)
      const third = yield* Scope.make()
      const refused = yield* Effect.flip(Scope.provide(runs.holdEventStream, third))
      expect(refused).toBeInstanceOf(Runs.TooManyEventStreams)
      expect(refused).toMatchObject({ limit: 2, retryAfterSeconds: 1 })
      // The refusal held nothing: closing its scope gives nothing back.
      yield* Scope.close(third, Exit.void)
      expect(yield* runs.eventStreams).toBe(2)
      yield* Scope.close(first, Exit.void)
      expect(yield* runs.eventStreams).toBe(1)
      const fourth = yield* Scope.make()
      yield* Scope.provide(runs.holdEventStream, fourth)
      expect(yield* runs.eventStreams).toBe(2)
      yield* Scope.close(second, Exit.void)
      yield* Scope.close(fourth, Exit.void)
      expect(yield* runs.eventStreams).toBe(0)
    }).pipe(Effect.provide(Layer.provide(Runs.layer({ maxEventStreams: 2 }), Agents.layer([stuck])))))

  it.effect("the default is finite: 256", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const scope = yield* Scope.make()
      for (let i = 0; i < 256; i++) yield* Scope.provide(runs.holdEventStream, scope)
      expect(yield* Effect.flip(Scope.provide(runs.holdEventStream, scope))).toMatchObject({ _tag: "TooManyEventStreams", limit: 256 })
      yield* Scope.close(scope, Exit.void)
      expect(yield* runs.eventStreams).toBe(0)
    }).pipe(Effect.provide(Layer.provide(Runs.layer(), Agents.layer([stuck])))))
})

const token = "event-streams-token"
const auth = { authorization: `Bearer ${token}` }

describe("GET /runs/:runId/events beyond maxEventStreams", () => {
  it.live("N readers open, the N+1-th gets 429 with Retry-After; a reader whose client goes away gives its slot back", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([stuck], { token, maxEventStreams: 2 })
      const { runId } = yield* json(yield* post(`${url}/runs`, { agent: "stuck", input: "Wait." }, auth))
      const first = yield* follow(url, runId, auth)
      const second = yield* follow(url, runId, auth)
      expect([first.response.status, second.response.status]).toEqual([200, 200])
      const refused = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { headers: auth }))
      expect(refused.status).toBe(429)
      expect(refused.headers.get("retry-after")).toBe("1")
      expect(yield* json(refused)).toEqual({
        _tag: "TooManyEventStreams",
        limit: 2,
        retryAfterSeconds: 1,
        message: "2 streams are following runs, the most this server keeps open at once: retry later"
      })
      // Refused again and again: a refusal holds no slot.
      for (let i = 0; i < 5; i++) {
        const again = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { headers: auth }))
        expect(again.status).toBe(429)
        yield* Effect.promise(() => again.text())
      }
      // Starting a run is not following one: maxConcurrentRuns alone bounds it.
      expect((yield* post(`${url}/runs`, { agent: "stuck", input: "Me too." }, auth)).status).toBe(201)

      // The first reader's client goes away: its slot comes back, and one reader more gets in, not two.
      first.close()
      const third = yield* followOnceFree(url, runId, auth)
      expect(third.response.status).toBe(200)
      const fourth = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { headers: auth }))
      expect(fourth.status).toBe(429)
      yield* Effect.promise(() => fourth.text())
      // The run ends: its readers' streams end, and both slots come back.
      expect((yield* post(`${url}/runs/${runId}/cancel`, {}, auth)).status).toBe(202)
      expect(yield* Effect.promise(second.rest)).toContain("event: RunCompleted")
      expect(yield* Effect.promise(third.rest)).toContain("event: RunCompleted")
      const { runId: other } = yield* json(yield* post(`${url}/runs`, { agent: "stuck", input: "And me." }, auth))
      const fifth = yield* followOnceFree(url, other, auth)
      const sixth = yield* followOnceFree(url, other, auth)
      expect([fifth.response.status, sixth.response.status]).toEqual([200, 200])
      fifth.close()
      sixth.close()
    }).pipe(Effect.scoped), 30_000)

  it.live("a stream that ends because its run completed gives its slot back", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("quick", ["Paris."]), stuck], { maxEventStreams: 1 })
      const { runId: quick } = yield* json(yield* post(`${url}/runs`, { agent: "quick", input: "Capital of France?" }))
      // Read to its end, several times over: each reader's slot is back once its stream ended.
      for (let i = 0; i < 3; i++) {
        const read = yield* followOnceFree(url, quick)
        expect(read.response.status).toBe(200)
        expect(read.head + (yield* Effect.promise(read.rest))).toContain("event: RunCompleted")
      }
      const { runId } = yield* json(yield* post(`${url}/runs`, { agent: "stuck", input: "Wait." }))
      const open = yield* followOnceFree(url, runId)
      expect(open.response.status).toBe(200)
      open.close()
    }).pipe(Effect.scoped), 30_000)

  it.live("a response never streamed (an unknown run, another owner's run) gives its slot back", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([stuck], { maxEventStreams: 1 })
      for (let i = 0; i < 5; i++) {
        const missing = yield* Effect.promise(() => fetch(`${url}/runs/run_nope/events`))
        // The run is looked up first: a 404 that takes no slot.
        expect(missing.status).toBe(404)
        yield* Effect.promise(() => missing.text())
      }
      const { runId } = yield* json(yield* post(`${url}/runs`, { agent: "stuck", input: "Wait." }))
      const open = yield* followOnceFree(url, runId)
      expect(open.response.status).toBe(200)
      // Every slot held: an unknown run is still a 404, not a 429.
      const whileFull = yield* Effect.promise(() => fetch(`${url}/runs/run_nope/events`))
      expect(whileFull.status).toBe(404)
      yield* Effect.promise(() => whileFull.text())
      open.close()
    }).pipe(Effect.scoped), 30_000)
})
