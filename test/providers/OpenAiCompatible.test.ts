import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Deferred, Duration, Effect, Fiber, Layer, Result, Schema, Stream, Tracer } from "effect"
import { Model, ModelError, OpenAiCompatible } from "../../src/index.js"
import { trackSleeps } from "../support/clock.js"
import * as Server from "../support/openAiServer.js"
import { adjustWhenSleepingFor, eventually, realDelay } from "../support/testClockIo.js"

type Client = Model.Model | OpenAiCompatible.OpenAiCompatible

const clientLayer = (server: Server.LoopbackServer, options: Partial<OpenAiCompatible.Options> = {}) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "test-model", ...options }).pipe(
    Layer.provide(NodeHttpClient.layerUndici)
  )

/** Starts a loopback server, then runs `body` with a client of it (the `TestClock`'s sleeps tracked from the start). */
const withServer = <A, E>(
  body: (server: Server.LoopbackServer) => Effect.Effect<A, E, Client>,
  options: { readonly server?: Server.Options; readonly client?: Partial<OpenAiCompatible.Options> } = {}
) =>
  Effect.andThen(
    trackSleeps,
    Effect.flatMap(Server.make(options.server), (server) => Effect.provide(body(server), clientLayer(server, options.client)))
  )

const chat = (content: string, extra: Partial<Model.Request> = {}): Model.Request => ({
  messages: [Model.user(content)],
  ...extra
})

const collect = (request: Model.Request) => Model.stream(request).pipe(Stream.runCollect)

const completions = (server: Server.LoopbackServer) => server.requests.filter((r) => r.path !== "/health").length

describe("OpenAiCompatible: recorded payloads", () => {
  it.effect("chat stream with a final usage chunk: text, usage 71/10/81, and accumulate = generate", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const recorded = Server.fixture("chat-stream-usage.sse")
        server.enqueue("/v1/chat/completions", Server.sseText(recorded), Server.json(Server.chatCompletionOfStream(recorded)))
        const chunks = yield* collect(chat("weather?"))
        expect(chunks[0]).toEqual({ _tag: "Metadata", id: "chatcmpl-9rnyXoOvZN6Ec33DKStiqSdEB76Ba", model: "gpt-4o-so" })
        expect(chunks.filter((c) => c._tag === "TextDelta").map((c) => (c as { text: string }).text)).toEqual([
          "{\"", "city", "\":\"", "San", " Francisco", "\",\"", "units", "\":\"", "f", "\"}"
        ])
        // Usage comes once, last.
        expect(chunks.filter((c) => c._tag === "Usage")).toHaveLength(1)
        expect(chunks.at(-1)).toEqual({ _tag: "Usage", usage: { inputTokens: 71, outputTokens: 10, totalTokens: 81 } })
        const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
        expect(Model.text(streamed)).toBe("{\"city\":\"San Francisco\",\"units\":\"f\"}")
        expect(streamed.choices[0]!.finishReason).toBe("stop")
        const generated = yield* Model.generate(chat("weather?"))
        expect(generated).toEqual(streamed)
      })
    ))

  it.effect("vLLM tool-call stream: name, joined arguments, usage 226/20/246, stop_reason 128008; accumulate = generate", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const recorded = Server.fixture("chat-stream-tool-call-vllm.sse")
        server.enqueue("/v1/chat/completions", Server.sseText(recorded), Server.json(Server.chatCompletionOfStream(recorded)))
        const chunks = yield* collect(chat("news?"))
        const toolDeltas = chunks.filter((c) => c._tag === "ToolCallDelta")
        // The id and name on the first fragment, then the pieces, then the empty trailing fragment.
        expect(toolDeltas.map((c) => c.arguments)).toEqual(["", "{\"query\": \"", "latest", " news", " on", " ai\"}", ""])
        expect(toolDeltas[0]).toMatchObject({ id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa", name: "searchGoogle" })
        const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
        expect(streamed.choices).toEqual([{
          index: 0,
          text: "",
          toolCalls: [{
            id: "chatcmpl-tool-b3b307239370432d9910d4b79b4dbbaa",
            name: "searchGoogle",
            arguments: "{\"query\": \"latest news on ai\"}"
          }],
          finishReason: "tool_calls",
          stopReason: 128008
        }])
        expect(streamed.usage).toEqual({ inputTokens: 226, outputTokens: 20, totalTokens: 246 })
        expect(streamed.model).toBe("meta/llama-3.1-8b-instruct:fp8")
        expect(yield* Model.generate(chat("news?"))).toEqual(streamed)
      })
    ))

  it.effect("vLLM completion: exact text, length finish, usage 9/200/209; its stream accumulates to the same", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const recorded = JSON.parse(Server.fixture("vllm-completion.json"))
        server.enqueue("/v1/completions", Server.json(Server.fixture("vllm-completion.json")), Server.sse(Server.completionStreamOf(recorded)))
        const generated = yield* Model.generate({ prompt: "Làm thế nào để nói lời chia tay" })
        expect(Model.text(generated)).toBe(recorded.choices[0].text)
        expect(generated.choices[0]!.finishReason).toBe("length")
        expect(generated.choices[0]!.stopReason).toBeUndefined()
        expect(generated.usage).toEqual({ inputTokens: 9, outputTokens: 200, totalTokens: 209 })
        expect(generated.id).toBe("cmpl-d9e1014ef4e543828be46d45d273b83d")
        const streamed = yield* Model.accumulate(Model.stream({ prompt: "Làm thế nào để nói lời chia tay" }))
        expect(streamed).toEqual(generated)
        expect(server.requests.map((r) => [r.path, r.body.prompt, r.body.stream])).toEqual([
          ["/v1/completions", "Làm thế nào để nói lời chia tay", undefined],
          ["/v1/completions", "Làm thế nào để nói lời chia tay", true]
        ])
      })
    ))

  it.effect("GET /v1/models lists the served models", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/models", Server.json(Server.fixture("vllm-models.json")))
        expect(yield* OpenAiCompatible.listModels).toEqual([
          { id: "Meta-Llama-3.1-8B-Instruct", ownedBy: "vllm", maxModelLen: 131072 }
        ])
      })
    ))

  it.effect("both vLLM error shapes (nested, flat) with a context-length message → ContextLengthExceeded, not retried", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue(
          "/v1/chat/completions",
          Server.json(Server.fixture("vllm-error-nested.json"), { status: 400 }),
          Server.json(Server.fixture("vllm-error-flat.json"), { status: 400 })
        )
        for (let i = 0; i < 2; i++) {
          const error = yield* Effect.flip(Model.generate(chat("long")))
          expect(error).toBeInstanceOf(ModelError.ContextLengthExceeded)
          expect(error.message).toMatch(/^This model's maximum context length is 32768 tokens/)
        }
        expect(completions(server)).toBe(2)
      })
    ))
})

describe("OpenAiCompatible: requests on the wire", () => {
  it.effect("snake_case body: tools, tool_choice, sampling, response_format, extra passed through untouched", () =>
    withServer((server) =>
      Effect.gen(function*() {
        yield* Model.generate({
          messages: [
            Model.system("be brief"),
            Model.user("add"),
            Model.assistant("", [{ id: "call_1", name: "add", arguments: "{\"a\":1}" }]),
            Model.toolResult("call_1", "add", "2")
          ],
          tools: [{ name: "add", description: "adds", parameters: { type: "object" } }],
          toolChoice: { name: "add" },
          temperature: 0.2,
          topP: 0.9,
          maxTokens: 64,
          stop: ["\n\n"],
          seed: 7,
          n: 2,
          logprobs: 3,
          responseFormat: { type: "json" },
          extra: { top_k: 20, chat_template_kwargs: { enable_thinking: false } }
        })
        const received = server.requests[0]!
        expect(received.headers["content-type"]).toBe("application/json")
        expect(received.body).toEqual({
          model: "test-model",
          messages: [
            { role: "system", content: "be brief" },
            { role: "user", content: "add" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: "{\"a\":1}" } }]
            },
            { role: "tool", tool_call_id: "call_1", content: "2" }
          ],
          tools: [{ type: "function", function: { name: "add", description: "adds", parameters: { type: "object" } } }],
          tool_choice: { type: "function", function: { name: "add" } },
          temperature: 0.2,
          top_p: 0.9,
          max_tokens: 64,
          stop: ["\n\n"],
          seed: 7,
          n: 2,
          logprobs: true,
          top_logprobs: 3,
          response_format: { type: "json_object" },
          top_k: 20,
          chat_template_kwargs: { enable_thinking: false }
        })
      })
    ))

  it.effect("streaming always sends stream_options.include_usage; the key goes in a Bearer header", () =>
    withServer((server) =>
      Effect.gen(function*() {
        yield* collect(chat("hi"))
        yield* Model.generate(chat("hi"))
        expect(server.requests[0]!.body.stream).toBe(true)
        expect(server.requests[0]!.body.stream_options).toEqual({ include_usage: true })
        expect(server.requests[0]!.headers.accept).toBe("text/event-stream")
        expect(server.requests[1]!.body.stream).toBeUndefined()
        expect(server.requests[1]!.body.stream_options).toBeUndefined()
        expect(server.requests.map((r) => r.headers.authorization)).toEqual(["Bearer sk-test", "Bearer sk-test"])
      }), { client: { apiKey: "sk-test" } }))

  it.effect("each call runs in its own span, whose trace context reaches the server (traceparent)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        yield* Model.generate(chat("hi")).pipe(Effect.withSpan("caller"))
        yield* collect(chat("hi")).pipe(Effect.withSpan("caller"))
        const parents = server.requests.map((r) => r.headers.traceparent)
        for (const parent of parents) expect(parent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
        // Two calls, two spans, one trace each (the caller's).
        expect(new Set(parents.map((p) => p!.split("-")[2])).size).toBe(2)
      })
    ))

  it.effect("the model call's span is the only one: no HTTP client span per request (its cost is not paid)", () =>
    withServer(() =>
      Effect.gen(function*() {
        const spans: Array<string> = []
        const tracer = Tracer.make({
          span(options) {
            spans.push(options.name)
            return new Tracer.NativeSpan(options)
          }
        })
        yield* Model.generate(chat("hi")).pipe(Effect.provideService(Tracer.Tracer, tracer))
        yield* collect(chat("hi")).pipe(Effect.provideService(Tracer.Tracer, tracer))
        expect(spans).toEqual(["valet/OpenAiCompatible.generate", "valet/OpenAiCompatible.stream"])
      })
    ))

  it.effect("connections are reused (undici keep-alive): 20 calls one after the other, streamed or not, on two connections at most", () =>
    withServer((server) =>
      Effect.gen(function*() {
        for (let i = 0; i < 10; i++) {
          yield* Model.generate(chat("hi"))
          yield* collect(chat("hi"))
        }
        expect(completions(server)).toBe(20)
        // undici may open a second connection while the first one's response is being released, then reuses both.
        expect(server.connections()).toBeLessThanOrEqual(2)
      })
    ))

  it.effect("a base URL with or without /v1 reaches the same paths", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      for (const baseUrl of [server.url, `${server.url}/`, `${server.url}/v1`, `${server.url}/v1/`]) {
        const response = yield* Model.generate(chat("hi")).pipe(Effect.provide(clientLayer(server, { baseUrl })))
        expect(Model.text(response)).toBe("Word0 word1 word2 word3 word4 word5 word6 word7")
      }
      expect(server.requests.map((r) => r.path)).toEqual(Array(4).fill("/v1/chat/completions"))
    }))
})

describe("OpenAiCompatible: decoding what servers send", () => {
  it.effect("n = 3: interleaved chunks, each by its index, accumulate to three full choices equal to generate", () =>
    withServer(() =>
      Effect.gen(function*() {
        const chunks = yield* collect(chat("three", { n: 3 }))
        const order = chunks.filter((c) => c._tag === "TextDelta").slice(0, 6).map((c) => (c as { index: number }).index)
        expect(order).toEqual([0, 1, 2, 0, 1, 2])
        const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
        expect(streamed.choices.map((c) => [c.index, c.text, c.finishReason])).toEqual(
          [0, 1, 2].map((i) => [i, "Word0 word1 word2 word3 word4 word5 word6 word7", "stop"])
        )
        const generated = yield* Model.generate(chat("three", { n: 3 }))
        expect({ ...generated, id: "" }).toEqual({ ...streamed, id: "" })
        expect(generated.usage).toEqual({ inputTokens: 1, outputTokens: 24, totalTokens: 25 })
      })
    ))

  it.effect("null content is \"\", \"\" tool arguments are kept, a missing id is made up the same both ways, extra fields ignored", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json({
          choices: [{
            message: { role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "now", arguments: "" } }], surprise: 1 },
            finish_reason: "tool_calls"
          }],
          usage: { prompt_tokens: 3, completion_tokens: 2 },
          system_fingerprint: "x"
        }), Server.sse([
          { choices: [{ index: 0, delta: { content: null, tool_calls: [{ index: 0, function: { name: "now", arguments: "" } }] } }] },
          { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }], usage: { prompt_tokens: 3, completion_tokens: 2 } },
          "[DONE]"
        ]))
        const generated = yield* Model.generate(chat("time?"))
        expect(generated).toEqual({
          id: "",
          model: "test-model",
          choices: [{ index: 0, text: "", toolCalls: [{ id: "call_0_0", name: "now", arguments: "" }], finishReason: "tool_calls" }],
          usage: { inputTokens: 3, outputTokens: 2, totalTokens: 5 }
        })
        expect(yield* Model.accumulate(Model.stream(chat("time?")))).toEqual(generated)
      })
    ))

  it.effect("reasoning (2026) and reasoning_content (2025) deltas both become reasoning", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const events = (field: string) => [
          { id: "r", model: "m", choices: [{ index: 0, delta: { role: "assistant", [field]: "Think" } }] },
          { id: "r", model: "m", choices: [{ index: 0, delta: { [field]: "ing." } }] },
          { id: "r", model: "m", choices: [{ index: 0, delta: { content: "42" }, finish_reason: "stop" }] },
          "[DONE]"
        ]
        server.enqueue("/v1/chat/completions", Server.sse(events("reasoning")), Server.sse(events("reasoning_content")))
        for (let i = 0; i < 2; i++) {
          const response = yield* Model.accumulate(Model.stream(chat("q")))
          expect(response.choices[0]).toEqual({ index: 0, text: "42", toolCalls: [], reasoning: "Thinking.", finishReason: "stop" })
        }
      })
    ))

  it.effect("chat log-probabilities decode to tokens with their alternatives", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json({
          id: "x",
          model: "m",
          choices: [{
            index: 0,
            message: { content: "Hi" },
            logprobs: { content: [{ token: "Hi", logprob: -0.1, top_logprobs: [{ token: "Hi", logprob: -0.1 }, { token: "Hey", logprob: -2.5 }] }] },
            finish_reason: "stop"
          }]
        }))
        const response = yield* Model.generate(chat("hi", { logprobs: 2 }))
        expect(response.choices[0]!.logprobs).toEqual([
          { token: "Hi", logprob: -0.1, topLogprobs: [{ token: "Hi", logprob: -0.1 }, { token: "Hey", logprob: -2.5 }] }
        ])
      })
    ))
})

describe("OpenAiCompatible: errors", () => {
  it.effect("401 → Unauthorized, 404 on the model → ModelNotFound, other 4xx → InvalidRequest; none retried", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue(
          "/v1/chat/completions",
          Server.json({ error: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" } }, { status: 401 }),
          Server.json({ object: "error", message: "The model `nope` does not exist.", type: "NotFoundError", param: null, code: 404 }, { status: 404 }),
          Server.json({ error: { message: "temperature must be non-negative", type: "BadRequestError", code: 400 } }, { status: 400 })
        )
        const unauthorized = yield* Effect.flip(Model.generate(chat("a")))
        expect(unauthorized).toEqual(new ModelError.Unauthorized({ status: 401, message: "Incorrect API key provided" }))
        const notFound = yield* Effect.flip(Model.generate(chat("b")))
        expect(notFound).toEqual(new ModelError.ModelNotFound({ model: "test-model", message: "The model `nope` does not exist." }))
        const invalid = yield* Effect.flip(Model.generate(chat("c")))
        expect(invalid).toEqual(new ModelError.InvalidRequest({ status: 400, message: "temperature must be non-negative" }))
        expect(completions(server)).toBe(3)
      })
    ))

  it.effect("malformed JSON → MalformedResponse carrying the start of the body", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const body = `{"id": "x", "choices": [${"oops ".repeat(200)}`
        server.enqueue("/v1/chat/completions", Server.text(200, body, "application/json"), Server.json({ id: "y", choices: "none" }))
        const error = yield* Effect.flip(Model.generate(chat("a")))
        expect(error._tag).toBe("MalformedResponse")
        const malformed = error as ModelError.MalformedResponse
        expect(malformed.message).toMatch(/^the chat completion is not JSON/)
        expect(malformed.body.startsWith("{\"id\": \"x\", \"choices\": [oops oops")).toBe(true)
        expect(malformed.body).toMatch(/… \(1024 characters\)$/)
        const wrongShape = yield* Effect.flip(Model.generate(chat("b")))
        expect(wrongShape.message).toMatch(/^the chat completion does not match the protocol:[\s\S]*choices/)
        expect(completions(server)).toBe(2)
      }), { client: { maxAttempts: 3 } }))

  it.effect("an error inside a 200 stream → the typed error, not a short answer", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.sse([
          { id: "s", model: "m", choices: [{ index: 0, delta: { content: "Hel" } }] },
          { error: { message: "This model's maximum context length is 4096 tokens.", type: "BadRequestError", code: 400 } },
          "[DONE]"
        ]), Server.sse([
          { error: { message: "engine died", type: "InternalServerError", code: 500 } },
          "[DONE]"
        ]))
        const exit = yield* Model.stream(chat("a")).pipe(Stream.runCollect, Effect.result)
        expect(Result.isFailure(exit) && exit.failure).toBeInstanceOf(ModelError.ContextLengthExceeded)
        const second = yield* Effect.flip(Model.accumulate(Model.stream(chat("b"))))
        expect(second).toEqual(new ModelError.ServerError({ status: 500, message: "engine died" }))
      }), { client: { maxAttempts: 1 } }))

  it.effect("a stream cut after three chunks → Transport error, and no retry once chunks were yielded", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const recorded = Server.fixture("chat-stream-usage.sse")
        server.enqueue("/v1/chat/completions", Server.sseText(recorded, { cutAfter: 3 }))
        const seen: Array<Model.Chunk> = []
        const error = yield* Effect.flip(Model.stream(chat("a")).pipe(Stream.runForEach((chunk) => Effect.sync(() => seen.push(chunk)))))
        expect(error._tag).toBe("Transport")
        expect(seen.map((c) => c._tag)).toEqual(["Metadata", "TextDelta", "TextDelta"])
        expect(completions(server)).toBe(1)
      }), { client: { maxAttempts: 3 } }))

  it.effect("a stream that ends cleanly without [DONE] is an error too", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.sse([{ id: "s", model: "m", choices: [{ index: 0, delta: { content: "Hel" } }] }]))
        const error = yield* Effect.flip(Model.accumulate(Model.stream(chat("a"))))
        expect(error).toEqual(new ModelError.Transport({
          message: `the stream from ${server.url}/v1/chat/completions ended before [DONE] after 1 events: the connection was cut or the server stopped`
        }))
      }), { client: { maxAttempts: 1 } }))

  it.effect("nobody listening → Transport", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Model.generate(chat("a"))).pipe(
        Effect.provide(OpenAiCompatible.layerNode({ baseUrl: "http://127.0.0.1:1", model: "m", maxAttempts: 1 }))
      )
      expect(error._tag).toBe("Transport")
      expect(error.message).toMatch(/^POST http:\/\/127\.0\.0\.1:1\/v1\/chat\/completions: /)
    }))
})

describe("OpenAiCompatible: resilience (TestClock)", () => {
  it.effect("429 with Retry-After: 2 is retried after exactly 2 s, then succeeds", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "2" } }))
        const fiber = yield* Effect.forkChild(Model.generate(chat("a")))
        yield* adjustWhenSleepingFor({ delayMs: 2000, adjustMs: 1999 })
        yield* realDelay(50)
        expect(completions(server)).toBe(1)
        yield* adjustWhenSleepingFor({ delayMs: 1, adjustMs: 1 })
        const response = yield* Fiber.join(fiber)
        expect(Model.text(response)).toMatch(/^Word0/)
        expect(completions(server)).toBe(2)
      }), { client: { attemptTimeout: Duration.infinity } }))

  it.effect("500 twice then 200 → success after 3 attempts, with growing jittered waits", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.text(500, "boom"), Server.json({ error: { message: "still down" } }, { status: 503 }))
        const fiber = yield* Effect.forkChild(Model.generate(chat("a")))
        // First wait: 100 ms ± 20 %; second: 200 ms ± 20 %.
        yield* adjustWhenSleepingFor({ withinMs: 121 })
        yield* eventually(() => completions(server) === 2, "the second attempt")
        yield* adjustWhenSleepingFor({ withinMs: 241 })
        const response = yield* Fiber.join(fiber)
        expect(Model.text(response)).toMatch(/^Word0/)
        expect(completions(server)).toBe(3)
      }), { client: { attemptTimeout: Duration.infinity, initialDelay: "100 millis", maxAttempts: 3 } }))

  it.effect("retries stop after maxAttempts with the last error", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.text(500, "a"), Server.text(502, "b"))
        const fiber = yield* Effect.forkChild(Effect.flip(Model.generate(chat("a"))))
        yield* adjustWhenSleepingFor({ withinMs: 1000 })
        const error = yield* Fiber.join(fiber)
        expect(error).toEqual(new ModelError.ServerError({ status: 502, message: "b" }))
        expect(completions(server)).toBe(2)
      }), { client: { attemptTimeout: Duration.infinity, maxAttempts: 2 } }))

  it.effect("a socket that never answers → Timeout after the per-attempt timeout (then retried)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall, Server.stall)
        const fiber = yield* Effect.forkChild(Effect.flip(Model.generate(chat("a"))))
        yield* eventually(() => completions(server) === 1, "the first request")
        yield* adjustWhenSleepingFor({ delayMs: 5000 })
        yield* eventually(() => server.closedEarly() === 1, "the first request to be aborted")
        yield* adjustWhenSleepingFor({ withinMs: 1000 })
        yield* eventually(() => completions(server) === 2, "the second request")
        yield* adjustWhenSleepingFor({ delayMs: 5000 })
        const error = yield* Fiber.join(fiber)
        expect(error).toEqual(new ModelError.Timeout({ message: "no answer within 5s (the per-attempt timeout)", timeoutMs: 5000 }))
        yield* eventually(() => server.closedEarly() === 2, "the second request to be aborted")
      }), { client: { attemptTimeout: "5 seconds", maxAttempts: 2 } }))

  it.effect("a stream silent before its first chunk → Timeout after the per-attempt timeout (the request aborted)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall)
        const fiber = yield* Effect.forkChild(Effect.flip(Model.accumulate(Model.stream(chat("a")))))
        yield* eventually(() => completions(server) === 1, "the request")
        yield* adjustWhenSleepingFor({ delayMs: 5000 })
        expect(yield* Fiber.join(fiber)).toEqual(
          new ModelError.Timeout({ message: "no answer within 5s (the per-attempt timeout)", timeoutMs: 5000 })
        )
        yield* eventually(() => server.closedEarly() === 1, "the request to be aborted")
      }), { client: { attemptTimeout: "5 seconds", maxAttempts: 1 } }))

  it.effect("a stream that goes silent after its first chunks → Timeout once the attempt timeout passes without a chunk; not retried", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.sseText(Server.fixture("chat-stream-usage.sse"), { hangAfter: 3 }))
        const seen: Array<Model.Chunk> = []
        const fiber = yield* Model.stream(chat("a")).pipe(
          Stream.runForEach((chunk) => Effect.sync(() => seen.push(chunk))),
          Effect.flip,
          Effect.forkChild
        )
        yield* eventually(() => seen.length === 3, "three chunks")
        yield* adjustWhenSleepingFor({ withinMs: 5001, adjustMs: 4999 })
        yield* realDelay(50)
        expect(fiber.pollUnsafe()).toBeUndefined()
        yield* adjustWhenSleepingFor({ withinMs: 5001, adjustMs: 1 })
        const error = yield* Fiber.join(fiber)
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(completions(server)).toBe(1)
        yield* eventually(() => server.closedEarly() === 1, "the request to be aborted")
      }), { client: { attemptTimeout: "5 seconds", maxAttempts: 3 } }))

  it.effect("a slow but steady stream is not timed out: the attempt timeout restarts at every chunk", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const pieces = [0, 1, 2, 3].map((i) => ({ id: "s", model: "m", choices: [{ index: 0, delta: { content: `w${i} ` } }] }))
        // The server runs on the same TestClock: each piece is sent 3 s after the previous one (12 s in all).
        server.enqueue("/v1/chat/completions", Server.sse([...pieces, "[DONE]"], { pieceDelayMs: 3000 }))
        const fiber = yield* Effect.forkChild(Model.accumulate(Model.stream(chat("a"))))
        for (let i = 0; i < 5; i++) yield* adjustWhenSleepingFor({ delayMs: 3000 })
        expect(Model.text(yield* Fiber.join(fiber))).toBe("w0 w1 w2 w3 ")
      }), { client: { attemptTimeout: "5 seconds", maxAttempts: 1 } }))

  it.effect("the per-call timeout bounds all attempts", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall)
        const fiber = yield* Effect.forkChild(Effect.flip(Model.generate(chat("a"))))
        yield* eventually(() => completions(server) === 1, "the request")
        yield* adjustWhenSleepingFor({ delayMs: 3000 })
        const error = yield* Fiber.join(fiber)
        expect(error).toBeInstanceOf(ModelError.Timeout)
        expect(error.message).toBe("the call did not finish within 3s (the per-call timeout, retries included)")
      }), { client: { attemptTimeout: "1 minute", callTimeout: "3 seconds" } }))

  it.effect("a stream's per-call timeout covers its attempts and the waits between them", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.text(503, "warming up"), Server.stall)
        const fiber = yield* Effect.forkChild(Effect.flip(Model.accumulate(Model.stream(chat("a")))))
        // The retry waits ~500 ms, then the second attempt stalls until the deadline at 3 s.
        yield* adjustWhenSleepingFor({ withinMs: 1000 })
        yield* eventually(() => completions(server) === 2, "the second attempt")
        yield* adjustWhenSleepingFor({ withinMs: 3000 })
        const error = yield* Fiber.join(fiber)
        expect(error).toEqual(new ModelError.Timeout({
          message: "the call did not finish within 3s (the per-call timeout, retries included)",
          timeoutMs: 3000
        }))
        yield* eventually(() => server.closedEarly() === 1, "the stalled request to be aborted")
      }), { client: { attemptTimeout: "1 minute", callTimeout: "3 seconds" } }))

  it.effect("a stream whose retry would wait past the deadline (Retry-After: 10) fails at the deadline", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json({ error: { message: "busy" } }, { status: 429, headers: { "retry-after": "10" } }))
        const fiber = yield* Effect.forkChild(Effect.flip(Model.accumulate(Model.stream(chat("a")))))
        yield* adjustWhenSleepingFor({ delayMs: 3000 })
        expect((yield* Fiber.join(fiber)).message).toBe("the call did not finish within 3s (the per-call timeout, retries included)")
        expect(completions(server)).toBe(1)
      }), { client: { attemptTimeout: "1 minute", callTimeout: "3 seconds" } }))

  it.effect("a stream that fails before its first chunk is retried", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.text(503, "warming up"))
        const fiber = yield* Effect.forkChild(Model.accumulate(Model.stream(chat("a"))))
        yield* adjustWhenSleepingFor({ withinMs: 1000 })
        expect(Model.text(yield* Fiber.join(fiber))).toMatch(/^Word0/)
        expect(completions(server)).toBe(2)
      }), { client: { attemptTimeout: Duration.infinity } }))

  it.effect("maxInFlight caps concurrent requests to the endpoint", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.stall, Server.stall, Server.stall)
        const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.forkChild(Model.generate(chat("a"))))
        yield* eventually(() => completions(server) === 2, "two requests")
        yield* realDelay(100)
        expect(completions(server)).toBe(2)
        yield* Fiber.interruptAll(fibers)
      }), { client: { maxInFlight: 2 } }))
})

describe("OpenAiCompatible: interruption", () => {
  it.live("interrupting a streaming call closes the connection on the server side", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const pieces = Array.from({ length: 100 }, (_, i) => ({ id: "s", model: "m", choices: [{ index: 0, delta: { content: `w${i} ` } }] }))
        server.enqueue("/v1/chat/completions", Server.sse([...pieces, "[DONE]"], { pieceDelayMs: 20 }))
        const first = yield* Deferred.make<void>()
        const fiber = yield* Model.stream(chat("a")).pipe(
          Stream.runForEach((chunk) => (chunk._tag === "TextDelta" ? Deferred.succeed(first, undefined) : Effect.void)),
          Effect.forkChild
        )
        yield* Deferred.await(first)
        expect(server.closedEarly()).toBe(0)
        yield* Fiber.interrupt(fiber)
        yield* server.closedEarlySignal.pipe(
          Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.fail("the server never saw the close") })
        )
        expect(server.closedEarly()).toBe(1)
      })
    ).pipe(Effect.scoped))
})

describe("OpenAiCompatible: configuration", () => {
  it.effect("layerConfig reads VALET_BASE_URL, VALET_MODEL and the key (Redacted), falling back to OPENAI_API_KEY", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const windows: Array<number | undefined> = []
      const run = (env: Record<string, string>) =>
        Effect.gen(function*() {
          const client = yield* OpenAiCompatible.OpenAiCompatible
          yield* Model.generate(chat("hi"))
          windows.push((yield* Model.Model).contextWindow)
          return client
        }).pipe(
          Effect.provide(OpenAiCompatible.layerConfigNode()),
          Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromUnknown(env))
        )
      const first = yield* run({ VALET_BASE_URL: server.url, VALET_MODEL: "qwen", VALET_API_KEY: "k1", OPENAI_API_KEY: "k2" })
      expect(first.model).toBe("qwen")
      expect(first.apiBase).toBe(`${server.url}/v1`)
      yield* run({ VALET_BASE_URL: `${server.url}/v1`, VALET_MODEL: "qwen", OPENAI_API_KEY: "k2" })
      // Without VALET_MODEL the server's first model is used.
      const detected = yield* run({ VALET_BASE_URL: server.url })
      expect(detected.model).toBe("loopback-model")
      // The server's max_model_len is the model's context window (what compaction measures against); a model named
      // by VALET_MODEL is not looked up, and has none unless the options say one.
      expect(windows).toEqual([undefined, undefined, 4096])
      const sent = server.requests.filter((r) => r.path === "/v1/chat/completions")
      expect(sent.map((r) => [r.body.model, r.headers.authorization])).toEqual([
        ["qwen", "Bearer k1"],
        ["qwen", "Bearer k2"],
        ["loopback-model", undefined]
      ])
      const missing = yield* Effect.flip(run({}))
      expect(missing._tag).toBe("ConfigError")
      expect(String(missing)).toMatch(/VALET_BASE_URL/)
    }))

  it.effect("the API key never shows when the options are printed", () =>
    Effect.gen(function*() {
      const settings = yield* OpenAiCompatible.config.pipe(
        Effect.provideService(
          ConfigProvider.ConfigProvider,
          ConfigProvider.fromUnknown({ VALET_BASE_URL: "http://x", VALET_API_KEY: "sk-secret" })
        )
      )
      expect(JSON.stringify(settings)).not.toContain("sk-secret")
      expect(String(settings.apiKey)).not.toContain("sk-secret")
    }))
})

describe("OpenAiCompatible options", () => {
  const build = (options: OpenAiCompatible.Options) =>
    Effect.flip(OpenAiCompatible.make(options).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("a bad option is InvalidOptions naming it, before any request", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [OpenAiCompatible.Options, string]> = [
        [{ baseUrl: "127.0.0.1:8000", model: "m" }, "OpenAiCompatible: baseUrl must be an http(s) URL such as http://127.0.0.1:8000, got \"127.0.0.1:8000\""],
        [{ baseUrl: "http://127.0.0.1:8000", model: "m", maxAttempts: 0 }, "OpenAiCompatible: maxAttempts must be an integer >= 1, got 0"],
        [{ baseUrl: "http://127.0.0.1:8000", model: "m", attemptTimeout: "soon" as Duration.Input }, "OpenAiCompatible: attemptTimeout must be a duration"],
        [{ baseUrl: "http://127.0.0.1:8000", model: "m", maxResponseBytes: -1 }, "OpenAiCompatible: maxResponseBytes must be"],
        [{ baseUrl: "http://127.0.0.1:8000", model: "m", timeout: 5 } as OpenAiCompatible.Options, "OpenAiCompatible: timeout is not a known option"]
      ]
      for (const [options, message] of cases) {
        const error = yield* build(options)
        expect(error._tag).toBe("InvalidOptions")
        expect(error.message).toContain(message)
      }
    }))

  it.effect("good options build (durations as numbers, strings, Durations, infinity; caps as Infinity)", () =>
    Effect.gen(function*() {
      const client = yield* OpenAiCompatible.make({
        baseUrl: "https://api.example.com/v1",
        model: "m",
        attemptTimeout: 5_000,
        callTimeout: "2 minutes",
        maxDelay: Duration.seconds(3),
        maxRetryAfter: Duration.infinity,
        maxStreamBytes: Infinity
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))
      expect(client.apiBase).toBe("https://api.example.com/v1")
    }))
})

describe("OpenAiCompatible: prompt-cache counts and hints (recorded payloads)", () => {
  const openAiText = JSON.parse(Server.fixture("openai-chat-text.json"))
  const openAiCachedUsage = JSON.parse(Server.fixture("openai-usage-cached.json"))
  const deepSeekText = JSON.parse(Server.fixture("deepseek-chat-text.json"))

  it.effect("OpenAI answer: prompt_tokens_details.cached_tokens is the cached part of the input (0, and 1920 of 2006)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue(
          "/v1/chat/completions",
          Server.json(openAiText),
          Server.json({ ...openAiText, usage: openAiCachedUsage })
        )
        expect((yield* Model.generate(chat("a holiday?"))).usage).toEqual({
          inputTokens: 16,
          outputTokens: 363,
          totalTokens: 379,
          cachedInputTokens: 0
        })
        expect((yield* Model.generate(chat("a holiday?"))).usage).toEqual({
          inputTokens: 2006,
          outputTokens: 300,
          totalTokens: 2306,
          cachedInputTokens: 1920
        })
      })
    ))

  it.effect("OpenAI stream: the usage chunk carries cached_tokens (the fast chunk check lets it through, decoded)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const recorded = Server.fixture("chat-stream-usage.sse")
        // The recorded stream, its last usage replaced by the cache-hit usage of OpenAI's guide.
        const events = Server.sseData(recorded).map((event) =>
          event.usage !== undefined && event.usage !== null ? { ...event, usage: openAiCachedUsage } : event
        )
        server.enqueue("/v1/chat/completions", Server.sse([...events, "[DONE]"]))
        const chunks = yield* collect(chat("weather?"))
        expect(chunks.at(-1)).toEqual({
          _tag: "Usage",
          usage: { inputTokens: 2006, outputTokens: 300, totalTokens: 2306, cachedInputTokens: 1920 }
        })
      })
    ))

  it.effect("DeepSeek answer and stream: prompt_cache_hit_tokens is read (recorded: 0 of 22, 0 of 88)", () =>
    withServer((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/chat/completions", Server.json(deepSeekText))
        expect((yield* Model.generate(chat("a holiday?"))).usage).toEqual({
          inputTokens: 22,
          outputTokens: 93,
          totalTokens: 115,
          cachedInputTokens: 0
        })
        server.enqueue("/v1/chat/completions", Server.sseText(Server.fixture("deepseek-chat-stream-usage.sse")))
        const streamed = yield* Model.accumulate(Model.stream(chat("a holiday?")))
        expect(streamed.usage).toEqual({ inputTokens: 88, outputTokens: 4, totalTokens: 92, cachedInputTokens: 0 })
      })
    ))

  it.effect("DeepSeek's own hit count wins over prompt_tokens_details, and is read without it", () =>
    withServer((server) =>
      Effect.gen(function*() {
        // The usage of a deepseek-v4-flash answer that hit the cache (1152 of 1211 prompt tokens; from a public log
        // of DeepSeek answers), in the recorded answer; the second time without `prompt_tokens_details`.
        const hit = { prompt_tokens: 1211, completion_tokens: 248, total_tokens: 1459, prompt_cache_hit_tokens: 1152, prompt_cache_miss_tokens: 59 }
        server.enqueue(
          "/v1/chat/completions",
          Server.json({ ...deepSeekText, usage: { ...hit, prompt_tokens_details: { cached_tokens: 1024 } } }),
          Server.json({ ...deepSeekText, usage: hit })
        )
        const expected = { inputTokens: 1211, outputTokens: 248, totalTokens: 1459, cachedInputTokens: 1152 }
        expect((yield* Model.generate(chat("a"))).usage).toEqual(expected)
        expect((yield* Model.generate(chat("a"))).usage).toEqual(expected)
      })
    ))

  it.effect("a cached_tokens that is not a number is a typed MalformedResponse naming it, not a wrong count", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const events = Server.sseData(Server.fixture("chat-stream-usage.sse")).map((event) =>
          event.usage !== undefined && event.usage !== null
            ? { ...event, usage: { ...event.usage, prompt_tokens_details: { cached_tokens: "many" } } }
            : event
        )
        server.enqueue("/v1/chat/completions", Server.sse([...events, "[DONE]"]))
        const error = yield* Effect.flip(Model.accumulate(Model.stream(chat("a"))))
        expect(error._tag).toBe("MalformedResponse")
        expect(error.message).toContain("cached_tokens")
      }), { client: { maxAttempts: 1 } }))

  it.effect("promptCache: key and retention go out as prompt_cache_key / prompt_cache_retention; absent, nothing is sent", () =>
    withServer((server) =>
      Effect.gen(function*() {
        yield* Model.generate(chat("a", { promptCache: { key: "refine-v1", retention: "24h" } }))
        yield* Model.accumulate(Model.stream(chat("a", { promptCache: { key: "refine-v1" } })))
        yield* Model.generate(chat("a"))
        const bodies = server.requests.filter((r) => r.path !== "/health").map((r) => r.body)
        expect([bodies[0].prompt_cache_key, bodies[0].prompt_cache_retention]).toEqual(["refine-v1", "24h"])
        expect([bodies[1].prompt_cache_key, "prompt_cache_retention" in bodies[1]]).toEqual(["refine-v1", false])
        expect(["prompt_cache_key" in bodies[2], "prompt_cache_retention" in bodies[2]]).toEqual([false, false])
      })
    ))

  it.effect("cacheControl: a marked system message and text part go out with cache_control { type: \"ephemeral\" } (OpenRouter's form); unmarked ones as before", () =>
    withServer((server) =>
      Effect.gen(function*() {
        const request: Model.Request = {
          messages: [
            Model.system("You are a careful reviewer.", { cacheControl: "ephemeral" }),
            Model.user([Model.textPart("<a long shared document>", { cacheControl: "ephemeral" }), Model.textPart("Question 1?")]),
            Model.system("Be brief.")
          ]
        }
        yield* Model.generate(request)
        yield* Model.accumulate(Model.stream(request))
        const expected = [
          { role: "system", content: [{ type: "text", text: "You are a careful reviewer.", cache_control: { type: "ephemeral" } }] },
          {
            role: "user",
            content: [
              { type: "text", text: "<a long shared document>", cache_control: { type: "ephemeral" } },
              { type: "text", text: "Question 1?" }
            ]
          },
          { role: "system", content: "Be brief." }
        ]
        const bodies = server.requests.filter((r) => r.path !== "/health").map((r) => r.body)
        expect(bodies.map((body) => body.messages)).toEqual([expected, expected])
        // Only the kind those servers define is accepted, with the path of the wrong one.
        const decoded = Schema.decodeUnknownResult(Model.Request)({ messages: [{ role: "system", content: "x", cacheControl: "forever" }] })
        expect(Result.isFailure(decoded) && String(decoded.failure)).toContain("[\"cacheControl\"]")
      })
    ))
})
