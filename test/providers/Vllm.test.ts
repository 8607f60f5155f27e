import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, FileSystem, Layer, Result, Schema, Stream } from "effect"
import { HttpClient } from "effect/http"
import { TestClock } from "effect/testing"
import { limitsOf } from "../../src/providers/internal/resilience.js"
import { defaultPool } from "../../src/providers/internal/vllm/config.js"
import { Actor, healthOf, makeRouter } from "../../src/providers/internal/vllm/pool.js"
import { Agent, Model, ModelError } from "../../src/index.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"

/** Writes a pool file in a temporary directory and answers its path. */
const poolFile = (text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-vllm-" })
    const path = `${dir}/vllm_actors.yaml`
    yield* fs.writeFileString(path, text)
    return path
  }).pipe(Effect.provide(NodeServices.layer))

const poolLayer = (options: Vllm.Options) =>
  Vllm.layer(options).pipe(Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer)))

const ask = (content: string): Model.Request => ({ messages: [Model.user(content)] })

const configError = (text: string) =>
  Effect.flatMap(poolFile(text), (path) =>
    Effect.map(Effect.flip(Effect.provide(Vllm.Vllm, poolLayer({ configPath: path }))), (error) => ({ error, path })))

describe("Vllm: the pool file", () => {
  it.effect("a missing file is one actor `default` at http://127.0.0.1:8000", () =>
    Effect.gen(function*() {
      const pool = yield* Vllm.Vllm
      expect(pool.config.fromFile).toBe(false)
      expect(pool.config.actors).toEqual([{
        name: "default",
        baseUrl: "http://127.0.0.1:8000",
        model: undefined,
        tensorParallelSize: 1,
        gpuId: 0,
        api: undefined,
        maxInFlight: undefined
      }])
      expect([pool.config.timeoutSec, pool.config.maxTokens]).toEqual([60, 512])
    }).pipe(Effect.provide(poolLayer({ configPath: "/nonexistent/vllm_actors.yaml" }))))

  it.effect("a bad value: the error names the field and its line", () =>
    Effect.gen(function*() {
      const { error, path } = yield* configError(
        "actors:\n  - name: a\n    base_url: http://127.0.0.1:8000\n  - name: b\n    base_url: 127.0.0.1:8001\n"
      )
      expect(error).toBeInstanceOf(Vllm.VllmConfigError)
      expect(error).toMatchObject({ field: "actors[1].base_url", line: 5 })
      expect(error.message).toBe(`${path}:5:15: actors[1].base_url is not a URL: "127.0.0.1:8001"`)
    }))

  it.effect("wrong types, unknown keys, duplicate names, missing actors, bad YAML: each with its line", () =>
    Effect.gen(function*() {
      const cases: Array<[string, Record<string, unknown>]> = [
        ["actors:\n  - name: a\n    base_url: http://x:1\n    tensor_parallel_size: two\n", { field: "actors[0].tensor_parallel_size", line: 4 }],
        ["actors:\n  - name: a\n    base_ur: http://x:1\n", { field: "actors[0].base_ur", line: 3 }],
        ["actors:\n  - name: a\n    base_url: http://x:1\n  - name: a\n    base_url: http://x:2\n", { field: "actors[1].name", line: 4 }],
        ["actors:\n  - name: a\n    base_url: http://x:1\n    api: grpc\n", { field: "actors[0].api", line: 4 }],
        ["timeout_sec: 30\n", { field: "actors", line: 1 }],
        ["actors:\n  - name: a\n    base_url: http://x:1\ntimeout_sec: -5\n", { field: "timeout_sec", line: 4 }],
        ["actors: [\n", { line: 2 }]
      ]
      for (const [text, expected] of cases) {
        const { error } = yield* configError(text)
        expect(error, text).toMatchObject(expected)
      }
      const { error } = yield* configError("actors: [\n")
      expect(error.message).toMatch(/^.*:2:1: not valid YAML: /)
    }))

  it.effect("a pool file is capped before it is read: 2 MB is one line naming the cap", () =>
    Effect.gen(function*() {
      const { error, path } = yield* configError(`actors:\n  - name: a\n    base_url: http://x:1\n# ${"x".repeat(2_000_000)}\n`)
      expect(error.message).toMatch(new RegExp(`^${path}: is \\d+ bytes, more than the 1 MiB \\(1048576 bytes\\) a pool file may hold$`))
    }))

  it.effect("each problem reads as one line: where, the field, the rule and the value", () =>
    Effect.sync(() => {
      const message = (text: string) => {
        const parsed = Vllm.parseConfig(text, "pool.yaml")
        return Result.isFailure(parsed) ? parsed.failure.message : "accepted"
      }
      const actor = "actors:\n  - name: a\n    base_url: http://x:1\n"
      expect(message(`${actor}    tensor_parallel_size: two\n`)).toBe(
        "pool.yaml:4:27: actors[0].tensor_parallel_size must be a number, got \"two\""
      )
      expect(message(`${actor}    gpu_id: 1.5\n`)).toBe("pool.yaml:4:13: actors[0].gpu_id must be an integer >= 0, got 1.5")
      expect(message(`${actor}    api: grpc\n`)).toBe("pool.yaml:4:10: actors[0].api must be \"openai\" or \"generate\", got \"grpc\"")
      expect(message(`${actor}timeout_sec: -5\n`)).toBe("pool.yaml:4:14: timeout_sec must be a number > 0, got -5")
      expect(message("actors:\n  - name: a\n    base_ur: http://x:1\n")).toBe("pool.yaml:3:14: actors[0].base_ur is not a known key")
      expect(message("timeout_sec: 30\n")).toBe("pool.yaml:1:1: actors is required")
      expect(message("actors: []\n")).toBe("pool.yaml:1:9: actors needs at least one actor")
    }))

  it.effect("an unknown actor name fails with the list of known ones", () =>
    Effect.gen(function*() {
      const path = yield* poolFile("actors:\n  - name: a0\n    base_url: http://127.0.0.1:1\n  - name: a1\n    base_url: http://127.0.0.1:2\n")
      const error = yield* Effect.flip(Effect.provide(Vllm.Vllm, poolLayer({ configPath: path, actorName: "a2" })))
      expect(error).toBeInstanceOf(Vllm.UnknownActor)
      expect(error.message).toBe(`no actor named "a2" in ${path}; known actors: a0, a1`)
    }))
})

describe("Vllm: the legacy /generate server", () => {
  it.effect("strips the echoed prompt, never sends `model`, sends the pool's max_tokens", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\nmax_tokens: 128\n`)
      const response = yield* Model.generate({ prompt: "Once upon a time", temperature: 0.5, seed: 3, stop: ["\n"] }).pipe(
        Effect.provide(poolLayer({ configPath: path }))
      )
      expect(response.choices).toEqual([{
        index: 0,
        text: "Word0 word1 word2 word3 word4 word5 word6 word7",
        toolCalls: [],
        finishReason: "stop"
      }])
      const sent = server.requests.filter((r) => r.path === "/generate")
      expect(sent.map((r) => r.body)).toEqual([{ prompt: "Once upon a time", temperature: 0.5, seed: 3, stop: ["\n"], max_tokens: 128 }])
    }))

  it.effect("the loopback legacy server really refuses unknown keys (500), as vLLM's does", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n    max_in_flight: 1\nmax_attempts: 1\n`)
      const error = yield* Effect.flip(Model.generate({ prompt: "x", extra: { model: "m" } })).pipe(
        Effect.provide(poolLayer({ configPath: path }))
      )
      expect(error).toEqual(new ModelError.ServerError({ status: 500, message: "Internal Server Error" }))
    }))

  it.effect("streams cumulative newline-separated JSON as deltas; accumulate = generate; n = 2", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const program = Effect.gen(function*() {
        const chunks = yield* Model.stream({ prompt: "Hi", n: 2 }).pipe(Stream.runCollect)
        const deltas = chunks.filter((c) => c._tag === "TextDelta" && c.index === 0).map((c) => (c as { text: string }).text)
        expect(deltas).toEqual(["Word0", " word1", " word2", " word3", " word4", " word5", " word6", " word7"])
        const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
        expect(streamed).toEqual(yield* Model.generate({ prompt: "Hi", n: 2 }))
        expect(streamed.choices).toHaveLength(2)
      })
      yield* Effect.provide(program, poolLayer({ configPath: path }))
      expect(server.requests.filter((r) => r.path === "/generate")[0]!.body).toEqual({ prompt: "Hi", stream: true, n: 2, max_tokens: 512 })
    }))

  it.effect("accepts {choices: [{text}]} and chat-shaped answers; chat messages become a transcript", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      server.enqueue(
        "/generate",
        Server.json({ choices: [{ text: " and then", finish_reason: "length" }] }),
        Server.json({ choices: [{ message: { content: "Hello!" } }] })
      )
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const [first, second] = yield* Effect.all([
        Model.generate({ prompt: "x" }),
        Model.generate({ messages: [Model.system("Be kind."), Model.user("Hi")] })
      ]).pipe(Effect.provide(poolLayer({ configPath: path })))
      expect([Model.text(first), first.choices[0]!.finishReason]).toEqual([" and then", "length"])
      expect(Model.text(second)).toBe("Hello!")
      expect(server.requests.filter((r) => r.path === "/generate")[1]!.body.prompt).toBe("System: Be kind.\n\nUser: Hi\n\nAssistant:")
    }))

  it.effect("tools cannot go to a /generate actor: InvalidRequest, nothing sent", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const error = yield* Effect.flip(Model.generate({ ...ask("x"), tools: [{ name: "t", description: "", parameters: {} }] })).pipe(
        Effect.provide(poolLayer({ configPath: path }))
      )
      expect(error._tag).toBe("InvalidRequest")
      expect(error.message).toMatch(/^actor legacy serves the legacy \/generate API, which cannot offer tools/)
      expect(server.requests.filter((r) => r.path === "/generate")).toHaveLength(0)
    }))
})

describe("Vllm: structured output on the legacy /generate server", () => {
  it.effect("the schema is asked for in the prompt (no response_format there); a bad answer is repaired", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      server.enqueue(
        "/generate",
        Server.json({ text: ["The capital is Paris."] }),
        Server.json({ text: ['{"city": "Paris", "country": "France"}'] })
      )
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const agent = Agent.make({ name: "geo", instructions: "Answer exactly." })
      const result = yield* Agent.run(agent, "Capital of France?", {
        output: Schema.Struct({ city: Schema.String, country: Schema.String })
      }).pipe(Effect.provide(poolLayer({ configPath: path })))
      expect(result.value).toEqual({ city: "Paris", country: "France" })
      const prompts = server.requests.filter((r) => r.path === "/generate").map((r) => r.body.prompt as string)
      expect(prompts).toHaveLength(2)
      for (const prompt of prompts) {
        expect(prompt).toMatch(/\n\nSystem: Reply with only a JSON value matching this JSON Schema, nothing else:\n\{.*"city".*\}\n\nAssistant:$/s)
      }
      expect(server.requests.filter((r) => r.path === "/generate").every((r) => !("response_format" in r.body))).toBe(true)
    }))
})

describe("Vllm: API detection and routing", () => {
  it.effect("without `api`, GET /v1/models decides once per actor (openai: model detected too) and is remembered", () =>
    Effect.gen(function*() {
      const modern = yield* Server.make({ api: "openai", model: "served-model" })
      const legacy = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: modern\n    base_url: ${modern.url}\n  - name: legacy\n    base_url: ${legacy.url}\n`)
      const program = Effect.gen(function*() {
        for (let i = 0; i < 3; i++) {
          yield* Model.generate({ prompt: "p" }).pipe(Effect.provide(poolLayer({ configPath: path, actorName: "modern" })))
        }
        const layer = poolLayer({ configPath: path, actorName: "legacy" })
        yield* Effect.gen(function*() {
          for (let i = 0; i < 3; i++) yield* Model.generate({ prompt: "p" })
          const [status] = yield* Vllm.health("legacy")
          expect(status).toMatchObject({ name: "legacy", healthy: true, api: "generate", detail: "ok" })
        }).pipe(Effect.provide(layer))
      })
      yield* program
      // One detection per built pool: three pools were built for `modern`, one for `legacy`.
      expect(modern.requests.map((r) => r.path)).toEqual(
        Array.from({ length: 3 }, () => ["/v1/models", "/v1/completions"]).flat()
      )
      expect(modern.requests.filter((r) => r.path === "/v1/completions").map((r) => r.body.model)).toEqual(Array(3).fill("served-model"))
      expect(legacy.requests.map((r) => r.path)).toEqual(["/v1/models", "/generate", "/generate", "/generate", "/health"])
    }))

  it.effect("two actors: 100 requests spread across both (fewest in flight, then fewest sent)", () =>
    Effect.gen(function*() {
      const a = yield* Server.make()
      const b = yield* Server.make()
      const path = yield* poolFile(
        `actors:\n  - name: a\n    base_url: ${a.url}\n    model: m\n    api: openai\n  - name: b\n    base_url: ${b.url}/v1\n    model: m\n    api: openai\n`
      )
      yield* Effect.forEach(Array.from({ length: 100 }, (_, i) => i), (i) => Model.generate(ask(`q${i}`)), { concurrency: 8 }).pipe(
        Effect.provide(poolLayer({ configPath: path }))
      )
      const served = [a, b].map((s) => s.requests.filter((r) => r.path === "/v1/chat/completions").length)
      expect(served[0]! + served[1]!).toBe(100)
      expect(Math.min(...served)).toBeGreaterThanOrEqual(40)
    }))

  it.effect("an actor whose /health fails is skipped; when all are down the call fails with a Transport error naming them", () =>
    Effect.gen(function*() {
      const up = yield* Server.make()
      const down = yield* Server.make({ unhealthy: true })
      const path = yield* poolFile(
        `actors:\n  - name: down\n    base_url: ${down.url}\n    model: m\n    api: openai\n  - name: up\n    base_url: ${up.url}\n    model: m\n    api: openai\nmax_attempts: 1\n`
      )
      yield* Effect.gen(function*() {
        yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => Model.generate(ask(`q${i}`)), { concurrency: 4 })
        expect(up.requests.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(20)
        expect(up.requests.filter((r) => r.path === "/health")).toHaveLength(1)
        expect(down.requests.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(0)
        const statuses = yield* Vllm.health()
        expect(statuses.map((s) => [s.name, s.healthy, s.detail])).toEqual([["down", false, "HTTP 503"], ["up", true, "ok"]])
        up.setHealthy(false)
        // The last good health result is trusted for 10 s.
        yield* Model.generate(ask("still routed to up"))
        yield* TestClock.adjust("10 seconds")
        const error = yield* Effect.flip(Model.generate(ask("x")))
        expect(error._tag).toBe("Transport")
        expect(error.message).toBe(`no healthy vLLM actor: down (${down.url}: HTTP 503), up (${up.url}: HTTP 503)`)
      }).pipe(Effect.provide(poolLayer({ configPath: path })))
    }))
})

describe("Vllm: health", () => {
  it.effect("between probes, routing forks no fiber (no probe, no probe lock): the healthy actor with the fewest in flight", () =>
    Effect.gen(function*() {
      // Never asked: every health below is fresh.
      const http = HttpClient.make(() => Effect.die("no request expected"))
      const [busy, idle, down] = ["busy", "idle", "down"].map((name) =>
        new Actor({ name, base_url: `http://127.0.0.1:1/${name}`, tensor_parallel_size: 1, gpu_id: 0 }, http, defaultPool, limitsOf({}))
      )
      const now = yield* Clock.currentTimeMillis
      busy!.health = { healthy: true, detail: "ok", checkedAt: now }
      idle!.health = { healthy: true, detail: "ok", checkedAt: now }
      down!.health = { healthy: false, detail: "HTTP 503", checkedAt: now }
      busy!.inFlight = 3
      const pick = makeRouter([busy!, idle!, down!], undefined)
      // Fibers are numbered in the order they are made: the ids of two forks around the pick tell how many it made.
      const nextFiberId = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id)
      const before = yield* nextFiberId
      const chosen = yield* pick
      const after = yield* nextFiberId
      expect(chosen.name).toBe("idle")
      expect(after - before - 1).toBe(0)
    }))

  it("healthy on a 200 whose body is empty, not JSON, or JSON with status missing / ok / healthy", () => {
    expect(healthOf(200, "")).toEqual({ healthy: true, detail: "ok" })
    expect(healthOf(200, "OK")).toEqual({ healthy: true, detail: "ok" })
    expect(healthOf(200, "{}")).toEqual({ healthy: true, detail: "ok" })
    expect(healthOf(200, "{\"status\":\"ok\"}")).toEqual({ healthy: true, detail: "ok" })
    expect(healthOf(200, "{\"status\":\"healthy\"}")).toEqual({ healthy: true, detail: "ok" })
    expect(healthOf(200, "{\"status\":\"loading\"}")).toEqual({ healthy: false, detail: "status: \"loading\"" })
    expect(healthOf(503, "")).toEqual({ healthy: false, detail: "HTTP 503" })
  })

  it.effect("an actor that does not answer is unhealthy with the connection error, and its API stays unknown", () =>
    Effect.gen(function*() {
      const path = yield* poolFile("actors:\n  - name: gone\n    base_url: http://127.0.0.1:1\n")
      const [status] = yield* Vllm.health("gone").pipe(Effect.provide(poolLayer({ configPath: path })))
      expect(status).toMatchObject({ name: "gone", healthy: false, api: undefined })
      expect(status!.detail).toMatch(/^GET http:\/\/127\.0\.0\.1:1\/health: /)
    }))

  it.effect("the shipped configs/vllm_actors.yaml is valid", () =>
    Effect.gen(function*() {
      const config = yield* Vllm.loadConfig("configs/vllm_actors.yaml")
      expect(config.fromFile).toBe(true)
      expect(config.actors.map((a) => [a.name, a.baseUrl, a.api])).toEqual([
        ["actor0", "http://127.0.0.1:8000", undefined],
        ["actor1", "http://127.0.0.1:8001", "generate"]
      ])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("parseConfig reads a file's text", () =>
    Effect.sync(() => {
      const parsed = Vllm.parseConfig("actors:\n  - name: x\n    base_url: http://h:8000\n    gpu_id: 1\n", "inline.yaml")
      expect(Result.isSuccess(parsed) && parsed.success.actors[0]).toMatchObject({ name: "x", gpuId: 1, tensorParallelSize: 1 })
    }))
})

describe("Vllm options", () => {
  it.effect("a bad option is InvalidOptions naming it, before the pool file is read", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Vllm.make({ configPath: "/nonexistent/pool.yaml", resilience: { maxAttempts: 0 } }).pipe(
          Effect.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
        )
      )
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toBe("Vllm: resilience.maxAttempts must be an integer >= 1, got 0")
    }))
})

describe("Vllm: cached prompt tokens (`vllm serve --enable-prompt-tokens-details`)", () => {
  // The recorded vLLM answers (test/fixtures/openai-compatible/SOURCES.md) were taken without the flag
  // (`prompt_tokens_details: null`); with it vLLM sets `prompt_tokens_details: { cached_tokens }` (its
  // `PromptTokenUsageInfo`) on the final usage and, with continuous usage stats, on every streamed chunk's usage. No
  // recorded payload with the flag exists: the numbers below are put into the recorded answers.
  const withCached = (usage: Record<string, unknown>, cached: number) => ({ ...usage, prompt_tokens_details: { cached_tokens: cached } })

  it.effect("completions and a chat stream with usage on every chunk: cachedInputTokens is vLLM's cached_tokens, once", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const completion = JSON.parse(Server.fixture("vllm-completion.json"))
      server.enqueue(
        "/v1/completions",
        Server.json(completion),
        Server.json({ ...completion, usage: withCached(completion.usage, 8) })
      )
      const events = Server.sseData(Server.fixture("chat-stream-tool-call-vllm.sse")).map((event) => ({
        ...event,
        usage: withCached(event.usage, 224)
      }))
      server.enqueue("/v1/chat/completions", Server.sse([...events, "[DONE]"]))
      const path = yield* poolFile(`actors:\n  - name: a\n    base_url: ${server.url}\n    api: openai\n`)
      const [without, cached, streamed] = yield* Effect.gen(function*() {
        const without = yield* Model.generate({ prompt: "p" })
        const cached = yield* Model.generate({ prompt: "p" })
        const streamed = yield* Model.accumulate(Model.stream(ask("search")))
        return [without, cached, streamed] as const
      }).pipe(Effect.provide(poolLayer({ configPath: path })))
      expect(without.usage).toEqual({ inputTokens: 9, outputTokens: 200, totalTokens: 209 })
      expect(cached.usage).toEqual({ inputTokens: 9, outputTokens: 200, totalTokens: 209, cachedInputTokens: 8 })
      expect(streamed.usage.inputTokens).toBe(226)
      expect(streamed.usage.cachedInputTokens).toBe(224)
    }))
})
