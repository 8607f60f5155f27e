/**
 * Issue 12, item 4: servers that hold a call forever or pass nonsense as an answer. Each case is reproduced against
 * the loopback server (faults injected per request), on the `TestClock` wherever something waits: an empty answer
 * is a `MalformedResponse`, not a success; comments and whitespace do not keep a call alive; every call has a
 * deadline by default; a far `Retry-After` is not waited out; a non-stream answer to a stream request, an SSE
 * `event: error` and an oversized body each fail with a typed error that says what happened.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, FileSystem, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { Model, ModelError, OpenAiCompatible } from "../../src/index.js"
import * as Vllm from "../../src/providers/Vllm.js"
import { sleeps, trackSleeps } from "../support/clock.js"
import * as Server from "../support/openAiServer.js"
import { adjustWhenSleepingFor, eventually, realDelay } from "../support/testClockIo.js"

// ---------------------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------------------

const openAi = (
  body: (server: Server.LoopbackServer) => Effect.Effect<void, unknown, Model.Model>,
  client: Partial<OpenAiCompatible.Options> = {},
  server: Server.Options = {}
) =>
  Effect.andThen(
    trackSleeps,
    Effect.flatMap(Server.make(server), (loopback) =>
      Effect.provide(
        body(loopback),
        OpenAiCompatible.layer({ baseUrl: loopback.url, model: "m", ...client }).pipe(Layer.provide(NodeHttpClient.layerUndici))
      ))
  )

/** A `Vllm` pool of one actor serving the legacy `POST /generate` API on a loopback server. */
const legacy = (
  body: (server: Server.LoopbackServer) => Effect.Effect<void, unknown, Model.Model>,
  file: string = "timeout_sec: 5\nmax_attempts: 1\n",
  resilience: Vllm.Options["resilience"] = undefined,
  api = "generate"
) =>
  Effect.andThen(
    trackSleeps,
    Effect.flatMap(Server.make({ api: "generate" }), (loopback) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-client-" })
        const path = `${dir}/vllm_actors.yaml`
        yield* fs.writeFileString(path, `actors:\n  - name: a\n    base_url: ${loopback.url}\n${api !== "" ? `    api: ${api}\n` : ""}${file}`)
        return path
      }).pipe(
        Effect.provide(NodeServices.layer),
        Effect.flatMap((configPath) =>
          Effect.provide(
            body(loopback),
            Vllm.layer({ configPath, actorName: "a", ...(resilience !== undefined ? { resilience } : {}) }).pipe(
              Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
            )
          )
        )
      ))
  )

const chat = (content = "hi"): Model.Request => ({ messages: [Model.user(content)] })

const completions = (server: Server.LoopbackServer, path = "/v1/chat/completions") =>
  server.requests.filter((r) => r.path === path).length

/**
 * Runs `fiber` to its end on the `TestClock`: whenever it is not done and the fibers sleeping on the clock have
 * stayed the same for a while in real time (sockets have delivered what they had), the clock jumps to the first
 * wake-up. Answers the simulated milliseconds elapsed. Dies if the fiber is not done after `limitMs` of simulated
 * time or 20 s of real time.
 */
const runClock = <A, E>(fiber: Fiber.Fiber<A, E>, limitMs: number) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const realStart = Date.now()
    let last = ""
    let quiet = 0
    for (;;) {
      if (fiber.pollUnsafe() !== undefined) return (yield* Clock.currentTimeMillis) - start
      if (Date.now() - realStart > 20_000) return yield* Effect.die(new Error("the call is still running after 20 s of real time"))
      const now = yield* Clock.currentTimeMillis
      if (now - start > limitMs) return yield* Effect.die(new Error(`the call is still running after ${limitMs} ms of clock time`))
      yield* realDelay(5)
      const pending = yield* sleeps
      const key = pending.join(",")
      quiet = key === last ? quiet + 1 : 0
      last = key
      if (pending.length > 0 && quiet >= 3 && fiber.pollUnsafe() === undefined) {
        yield* TestClock.adjust(Math.max(0, Math.min(...pending) - now))
        quiet = 0
      }
    }
  })

/** The error of an effect run to its end on the `TestClock` (see `runClock`), with the clock time it took. */
const failureOf = <A>(effect: Effect.Effect<A, ModelError.ModelError, Model.Model>, limitMs = 3_600_000) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Effect.flip(effect))
    const elapsedMs = yield* runClock(fiber, limitMs)
    const error = yield* Fiber.join(fiber)
    return { error, elapsedMs }
  })

const accumulated = (request: Model.Request) => Model.accumulate(Model.stream(request))

// ---------------------------------------------------------------------------------------------------------
// Empty answers
// ---------------------------------------------------------------------------------------------------------

describe("client: an answer with no choice is malformed, never an empty success", () => {
  it.effect("200 {\"choices\": []} on chat and on completions → MalformedResponse, not retried", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json({ id: "x", object: "chat.completion", choices: [] }))
        server.enqueue("/v1/completions", Server.json({ id: "y", object: "text_completion", choices: [] }))
        const onChat = yield* Effect.flip(Model.generate(chat()))
        expect(onChat).toBeInstanceOf(ModelError.MalformedResponse)
        expect(onChat.message).toMatch(/no choice/)
        const onCompletion = yield* Effect.flip(Model.generate({ prompt: "p" }))
        expect(onCompletion).toBeInstanceOf(ModelError.MalformedResponse)
        expect(completions(server)).toBe(1)
        expect(completions(server, "/v1/completions")).toBe(1)
      })))

  it.effect("a present choice whose content is \"\" (or null) is a valid empty answer", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue(
          "/v1/chat/completions",
          Server.json({ choices: [{ index: 0, message: { role: "assistant", content: "" }, finish_reason: "stop" }] }),
          Server.json({ choices: [{ index: 0, message: { role: "assistant", content: null }, finish_reason: "stop" }] }),
          Server.sse([{ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: "stop" }] }, "[DONE]"])
        )
        expect(Model.text(yield* Model.generate(chat()))).toBe("")
        expect(Model.text(yield* Model.generate(chat()))).toBe("")
        const streamed = yield* accumulated(chat())
        expect(streamed.choices).toHaveLength(1)
        expect(Model.text(streamed)).toBe("")
      })))

  it.effect("an empty SSE body, one of only [DONE], of only comments, or of only a usage event → MalformedResponse", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const bodies: ReadonlyArray<Server.Reply> = [
          Server.sseText(""),
          Server.sse(["[DONE]"]),
          Server.sseText(": ping\n\n: ping\n\ndata: [DONE]\n\n"),
          Server.sse([{ id: "u", choices: [], usage: { prompt_tokens: 3, completion_tokens: 0, total_tokens: 3 } }, "[DONE]"])
        ]
        for (const body of bodies) {
          server.enqueue("/v1/chat/completions", body)
          const error = yield* Effect.flip(accumulated(chat()))
          expect(error, JSON.stringify(body)).toBeInstanceOf(ModelError.MalformedResponse)
        }
        // None was retried: a malformed answer is not worth sending again.
        expect(completions(server)).toBe(bodies.length)
      }), { maxAttempts: 3 }))

  it.effect("/generate: {\"text\": []} and {\"choices\": []} → MalformedResponse; an empty stream too", () =>
    legacy((server) =>
      Effect.gen(function*() {
        server.enqueue("/generate", Server.json({ text: [] }), Server.json({ choices: [] }), Server.ndjson([]), Server.ndjson([{ text: [] }]))
        for (const run of [Model.generate(chat()), Model.generate(chat()), accumulated(chat()), accumulated(chat())]) {
          const error = yield* Effect.flip(run)
          expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        }
        // The prompt echoed with nothing after it is an empty completion, which is an answer.
        server.enqueue("/generate", Server.json({ text: ["System: x"] }))
        const response = yield* Model.generate({ prompt: "System: x" })
        expect(response.choices).toHaveLength(1)
        expect(Model.text(response)).toBe("")
      })))
})

// ---------------------------------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------------------------------

describe("client: only data keeps a call alive, and every call has a deadline", () => {
  it.effect("SSE comments every second do not reset the idle timer: Timeout after the 5 s attempt timeout", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.trickle(": ping\n\n", { everyMs: 1000, times: 10_000 }))
        const { elapsedMs, error } = yield* failureOf(accumulated(chat()))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(elapsedMs).toBe(5000)
        yield* eventually(() => server.closedEarly() === 1, "the request to be aborted")
      }), { attemptTimeout: "5 seconds", maxAttempts: 1 }))

  it.effect("blank lines every second after the first chunk do not reset it either", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const first = { id: "s", choices: [{ index: 0, delta: { content: "a" } }] }
        server.enqueue("/v1/chat/completions", {
          _tag: "Events",
          pieces: [`data: ${JSON.stringify(first)}\n\n`, ...Array.from({ length: 1000 }, () => "\n")],
          contentType: "text/event-stream",
          pieceDelayMs: 1000
        })
        const { elapsedMs, error } = yield* failureOf(accumulated(chat()))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        // The first event arrives after 1 s (read by the client at once, or at the next step of the clock); then
        // 5 s without data. The blank lines every second did not count.
        expect(elapsedMs).toBeGreaterThanOrEqual(6000)
        expect(elapsedMs).toBeLessThanOrEqual(7000)
      }), { attemptTimeout: "5 seconds", maxAttempts: 1 }))

  it.effect("a steady stream of real events is not cut by the idle timer", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const pieces = Array.from({ length: 10 }, (_, i) => ({ id: "s", choices: [{ index: 0, delta: { content: `${i}` } }] }))
        server.enqueue("/v1/chat/completions", Server.sse([...pieces, "[DONE]"], { pieceDelayMs: 4000 }))
        const fiber = yield* Effect.forkChild(accumulated(chat()))
        yield* runClock(fiber, 60_000)
        expect(Model.text(yield* Fiber.join(fiber))).toBe("0123456789")
      }), { attemptTimeout: "5 seconds", maxAttempts: 1 }))

  it.effect("/generate: a whitespace trickle on a non-streamed answer ends at the attempt timeout, the request aborted", () =>
    legacy((server) =>
      Effect.gen(function*() {
        server.enqueue("/generate", Server.trickle(" ", { everyMs: 1000, times: 10_000, contentType: "application/json" }))
        const { elapsedMs, error } = yield* failureOf(Model.generate(chat()))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(elapsedMs).toBe(5000)
        yield* eventually(() => server.closedEarly() === 1, "the request to be aborted")
      })))

  it.effect("/generate: blank lines on a streamed answer do not reset the idle timer", () =>
    legacy((server) =>
      Effect.gen(function*() {
        server.enqueue("/generate", Server.trickle("\n", { everyMs: 1000, times: 10_000, contentType: "application/json" }))
        const { elapsedMs, error } = yield* failureOf(accumulated(chat()))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(elapsedMs).toBe(5000)
      })))

  it.effect("Vllm: an actor whose API is detected (GET /v1/models) and never answers fails a stream call, not hangs it", () =>
    legacy((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/models", Server.stall)
        const { error } = yield* failureOf(accumulated(chat()))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(error.message).toMatch(/\/v1\/models did not answer within 5s/)
      }), "timeout_sec: 60\nmax_attempts: 1\n", undefined, ""))

  it.effect("by default a call ends within 10 minutes: a generate that never answers (no attempt timeout)", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall)
        const { elapsedMs, error } = yield* failureOf(Model.generate(chat()))
        expect(error).toEqual(new ModelError.Timeout({
          message: "the call did not finish within 10m (the per-call timeout, retries included)",
          timeoutMs: 600_000
        }))
        expect(elapsedMs).toBe(600_000)
      }), { attemptTimeout: Duration.infinity }))

  it.effect("by default a call ends within 10 minutes: a stream that sends a real event every 30 s forever", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const event = `data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: { content: "." } }] })}\n\n`
        server.enqueue("/v1/chat/completions", Server.trickle(event, { everyMs: 30_000, times: 1_000 }))
        const { elapsedMs, error } = yield* failureOf(Stream.runDrain(Model.stream(chat())))
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(error.message).toBe("the call did not finish within 10m (the per-call timeout, retries included)")
        expect(elapsedMs).toBe(600_000)
      })))

  it.effect("a retried attempt is cut at the call's deadline: Timeout at exactly 3 s after two stalled requests", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall, Server.stall)
        const { elapsedMs, error } = yield* failureOf(Model.generate(chat()))
        expect(error.message).toBe("the call did not finish within 3s (the per-call timeout, retries included)")
        // Jittered waits make the clock fractional.
        expect(elapsedMs).toBeCloseTo(3000, 6)
        expect(completions(server)).toBe(2)
        yield* eventually(() => server.closedEarly() === 2, "both requests to be aborted")
      }), { attemptTimeout: "2 seconds", callTimeout: "3 seconds", maxAttempts: 5 }))

  it.effect("callTimeout: infinity turns the default deadline off", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const event = (i: number) => ({ id: "s", choices: [{ index: 0, delta: { content: `${i % 10}` } }] })
        server.enqueue("/v1/chat/completions", Server.sse([...Array.from({ length: 30 }, (_, i) => event(i)), "[DONE]"], { pieceDelayMs: 30_000 }))
        const fiber = yield* Effect.forkChild(accumulated(chat()))
        const elapsedMs = yield* runClock(fiber, 3_600_000)
        expect(Model.text(yield* Fiber.join(fiber))).toHaveLength(30)
        expect(elapsedMs).toBeGreaterThan(600_000)
      }), { callTimeout: Duration.infinity }))
})

// ---------------------------------------------------------------------------------------------------------
// Retry-After
// ---------------------------------------------------------------------------------------------------------

const rateLimited = (headers: Record<string, string>) =>
  Server.json({ error: { message: "slow down", type: "rate_limit_exceeded" } }, { status: 429, headers })

describe("client: a Retry-After beyond the cap is not waited out", () => {
  it.effect("Retry-After: 86400 → RateLimited at once, retryAfterMs 86,400,000, one request (generate and stream)", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", rateLimited({ "retry-after": "86400" }), rateLimited({ "retry-after": "86400" }))
        const before = yield* Clock.currentTimeMillis
        for (const run of [Model.generate(chat()), accumulated(chat())]) {
          // The clock is never moved: a call that waited for its retry would never end.
          const fiber = yield* Effect.forkChild(Effect.flip(run))
          yield* eventually(() => fiber.pollUnsafe() !== undefined, "the call to fail without waiting")
          const error = yield* Fiber.join(fiber)
          expect(error).toBeInstanceOf(ModelError.RateLimited)
          expect((error as ModelError.RateLimited).retryAfterMs).toBe(86_400_000)
          expect(error.message).toMatch(/^slow down \(the server asks to retry after 1d, more than maxRetryAfter 1m: not retried\)$/)
        }
        expect(yield* Clock.currentTimeMillis).toBe(before)
        expect(completions(server)).toBe(2)
      }), { attemptTimeout: Duration.infinity }))

  it.effect("the cap is 60 s by default: Retry-After: 60 is waited, 61 is not; retry-after-ms counts too", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", rateLimited({ "retry-after": "60" }))
        const fiber = yield* Effect.forkChild(Model.generate(chat()))
        yield* adjustWhenSleepingFor({ delayMs: 60_000 })
        expect(Model.text(yield* Fiber.join(fiber))).toMatch(/^Word0/)
        expect(completions(server)).toBe(2)
        server.enqueue("/v1/chat/completions", rateLimited({ "retry-after": "61" }), rateLimited({ "retry-after-ms": "61000" }))
        for (let i = 0; i < 2; i++) {
          const failing = yield* Effect.forkChild(Effect.flip(Model.generate(chat())))
          yield* eventually(() => failing.pollUnsafe() !== undefined, "the call to fail without waiting")
          expect(yield* Fiber.join(failing)).toMatchObject({ _tag: "RateLimited", retryAfterMs: 61_000 })
        }
        expect(completions(server)).toBe(4)
      }), { attemptTimeout: Duration.infinity }))

  it.effect("maxRetryAfter raises the cap", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", rateLimited({ "retry-after": "3600" }))
        const fiber = yield* Effect.forkChild(accumulated(chat()))
        expect(yield* runClock(fiber, 7_200_000)).toBe(3_600_000)
        expect(Model.text(yield* Fiber.join(fiber))).toMatch(/^Word0/)
      }), { attemptTimeout: Duration.infinity, callTimeout: Duration.infinity, maxRetryAfter: "2 hours" }))
})

// ---------------------------------------------------------------------------------------------------------
// What a stream request gets back
// ---------------------------------------------------------------------------------------------------------

describe("client: what comes back to a stream request is checked before it is parsed", () => {
  it.effect("a 200 text/html answer → MalformedResponse naming the content type (not a cut connection), not retried", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.text(200, "<html><body>Sign in to the proxy</body></html>", "text/html; charset=utf-8"))
        const error = yield* Effect.flip(accumulated(chat()))
        expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        expect(error.message).toMatch(/text\/html/)
        expect((error as ModelError.MalformedResponse).body).toMatch(/Sign in to the proxy/)
        expect(completions(server)).toBe(1)
      }), { maxAttempts: 3 }))

  it.effect("SSE `event: error` keeps the server's message (JSON fields or plain text)", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const start = `data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: { content: "a" } }] })}\n\n`
        server.enqueue(
          "/v1/chat/completions",
          Server.sseText(`${start}event: error\ndata: {"message": "the engine died", "code": 500}\n\n`),
          Server.sseText(`${start}event: error\ndata: upstream overloaded, try later\n\n`),
          Server.sseText(`event: error\ndata: {"error": {"message": "prompt too long: context length 4096", "type": "invalid_request_error"}}\n\n`)
        )
        const first = yield* Effect.flip(accumulated(chat()))
        expect(first).toMatchObject({ _tag: "ServerError", message: "the engine died" })
        const second = yield* Effect.flip(accumulated(chat()))
        expect(second.message).toBe("upstream overloaded, try later")
        const third = yield* Effect.flip(accumulated(chat()))
        expect(third).toBeInstanceOf(ModelError.ContextLengthExceeded)
        expect(third.message).toBe("prompt too long: context length 4096")
      }), { maxAttempts: 1 }))

  it.effect("a `data: {\"error\": {...}}` chunk mid-stream keeps its message and type", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.sse([
          { id: "s", choices: [{ index: 0, delta: { content: "a" } }] },
          { error: { message: "rate limit reached for the org", type: "rate_limit_error" } }
        ]))
        const error = yield* Effect.flip(accumulated(chat()))
        expect(error).toMatchObject({ _tag: "RateLimited", message: "rate limit reached for the org" })
      }), { maxAttempts: 1 }))
})

// ---------------------------------------------------------------------------------------------------------
// Size caps
// ---------------------------------------------------------------------------------------------------------

const mib = 1024 * 1024
const filler = "x".repeat(64 * 1024)

describe("client: every body has a size cap", () => {
  it.effect("a 50 MB non-streamed body (chunked, no length) → MalformedResponse naming maxResponseBytes (32 MiB), aborted early", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", {
          _tag: "Events",
          pieces: [`{"choices": [{"message": {"content": "${filler}`],
          contentType: "application/json",
          repeat: 800
        })
        const error = yield* Effect.flip(Model.generate(chat()))
        expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        expect(error.message).toMatch(/maxResponseBytes/)
        expect(error.message).toMatch(/32 MiB/)
        yield* eventually(() => server.closedEarly() === 1, "the body to be abandoned before its end")
      })))

  it.effect("a body whose Content-Length is over the cap is refused before it is read", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json(`{"choices": [{"message": {"content": "${"y".repeat(2 * mib)}"}}]}`))
        const error = yield* Effect.flip(Model.generate(chat()))
        expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        expect(error.message).toMatch(/maxResponseBytes \(1 MiB\)/)
      }), { maxResponseBytes: mib }))

  it.effect("a stream over maxStreamBytes in total → MalformedResponse naming the cap, aborted", () =>
    openAi((server) =>
      Effect.gen(function*() {
        const event = `data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: { content: filler } }] })}\n\n`
        server.enqueue("/v1/chat/completions", { _tag: "Events", pieces: [event], contentType: "text/event-stream", repeat: 10_000 })
        const error = yield* Effect.flip(Stream.runDrain(Model.stream(chat())))
        expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        expect(error.message).toMatch(/maxStreamBytes \(2 MiB\)/)
        yield* eventually(() => server.closedEarly() === 1, "the stream to be abandoned")
      }), { maxStreamBytes: 2 * mib }))

  it.effect("one SSE event over maxEventBytes → MalformedResponse naming the cap, before the event ends", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", {
          _tag: "Events",
          pieces: [`data: {"choices": [{"index": 0, "delta": {"content": "`, ...Array.from({ length: 100 }, () => filler)],
          contentType: "text/event-stream",
          hangAfter: 101
        })
        const error = yield* Effect.flip(Stream.runDrain(Model.stream(chat())))
        expect(error).toBeInstanceOf(ModelError.MalformedResponse)
        expect(error.message).toMatch(/maxEventBytes \(1 MiB\)/)
      }), { maxEventBytes: mib }))

  it.effect("/generate: a streamed line over maxEventBytes, and a non-streamed body over maxResponseBytes", () =>
    legacy(
      (server) =>
        Effect.gen(function*() {
          server.enqueue(
            "/generate",
            { _tag: "Events", pieces: [`{"text": ["`, ...Array.from({ length: 100 }, () => filler)], contentType: "application/json", hangAfter: 101 },
            { _tag: "Events", pieces: [`{"text": ["`, ...Array.from({ length: 100 }, () => filler)], contentType: "application/json" }
          )
          const streamed = yield* Effect.flip(Stream.runDrain(Model.stream(chat())))
          expect(streamed).toBeInstanceOf(ModelError.MalformedResponse)
          expect(streamed.message).toMatch(/maxEventBytes \(1 MiB\)/)
          const generated = yield* Effect.flip(Model.generate(chat()))
          expect(generated).toBeInstanceOf(ModelError.MalformedResponse)
          expect(generated.message).toMatch(/maxResponseBytes \(1 MiB\)/)
        }),
      "timeout_sec: 5\nmax_attempts: 1\n",
      { maxEventBytes: mib, maxResponseBytes: mib }
    ))

  it.effect("a huge error body (500, 50 MB, chunked) still gives the ServerError with the start of the body, read no further", () =>
    openAi((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", {
          _tag: "Events",
          pieces: [`Internal error ${filler}`],
          contentType: "text/plain",
          repeat: 800,
          status: 500
        })
        const error = yield* Effect.flip(Model.generate(chat()))
        expect(error).toBeInstanceOf(ModelError.ServerError)
        expect(error.message).toMatch(/^Internal error x+/)
        expect(error.message.length).toBeLessThan(1000)
        yield* eventually(() => server.closedEarly() === 1, "the body to be abandoned before its end")
      }), { maxAttempts: 1 }))
})
