/**
 * A loopback OpenAI-compatible and vLLM-compatible server, built with `effect/http`'s `HttpServer` (served by
 * `NodeHttpServer`), for the client tests and the benchmarks.
 *
 * - By default it answers like a small model: `/v1/chat/completions` and `/v1/completions` (JSON or SSE with
 *   `[DONE]`, `n` choices interleaved, usage when asked), `/v1/models`, `/health`, and — with `api: "generate"` or
 *   `"both"` — the legacy demo server's `POST /generate` (the prompt echoed in front of each text, cumulative
 *   newline-separated JSON when streaming, 500 on any key the sampler does not know, such as `model`).
 * - Tests queue replies per path (`enqueue`) to replay recorded payloads or inject faults: any status and body,
 *   `Retry-After`, a socket that never answers, an SSE stream cut after N events, an error inside a 200 stream,
 *   a trickle of SSE comments or whitespace (`trickle`), a body far larger than any cap (`Events` with `repeat`).
 * - It records every request and counts the responses a client closed before their end (`closedEarly`).
 * - `latencyMs` delays every completion (the fan-out benchmarks use a fixed latency per call).
 *
 * Importable from `test/` and `bench/`, and runnable as a process for benchmarks:
 * `npx tsx test/support/openAiServer.ts --port 0 --latency-ms 0 --chunks 200` prints `listening on <url>`.
 */
import { NodeHttpServer, NodeHttpServerRequest, NodeRuntime } from "@effect/platform-node"
import { Deferred, Duration, Effect, Layer, type Scope, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

// ---------------------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------------------

/** What the server answers to one request. */
export type Reply =
  | {
    readonly _tag: "Body"
    readonly status: number
    readonly body: string
    readonly contentType: string
    readonly headers?: Readonly<Record<string, string>>
  }
  | {
    readonly _tag: "Events"
    /** Raw pieces written one after the other (SSE events with their blank line, or NDJSON lines). */
    readonly pieces: ReadonlyArray<string>
    readonly contentType: string
    /** Destroys the socket after this many pieces (a connection cut mid-stream). */
    readonly cutAfter?: number
    /** Sends this many pieces, then nothing more, keeping the connection open (a server gone silent). */
    readonly hangAfter?: number
    /** Waits this long between pieces. */
    readonly pieceDelayMs?: number
    /** Sends the pieces this many times over (default 1): long or endless bodies without holding them in memory. */
    readonly repeat?: number
    /** The status (default 200). */
    readonly status?: number
  }
  | { readonly _tag: "Stall" }

/** A JSON answer (`body` as a value, or as text sent unchanged). */
export const json = (body: unknown, options: { readonly status?: number; readonly headers?: Record<string, string> } = {}): Reply => ({
  _tag: "Body",
  status: options.status ?? 200,
  body: typeof body === "string" ? body : JSON.stringify(body),
  contentType: "application/json",
  ...(options.headers !== undefined ? { headers: options.headers } : {})
})

/** Any status with a text body. */
export const text = (status: number, body: string, contentType = "text/plain"): Reply => ({
  _tag: "Body",
  status,
  body,
  contentType
})

/** An SSE answer from the text of a recorded stream (events separated by blank lines), sent event by event. */
export const sseText = (
  textOfStream: string,
  options: { readonly cutAfter?: number; readonly hangAfter?: number; readonly pieceDelayMs?: number } = {}
): Reply => ({
  _tag: "Events",
  pieces: textOfStream.split(/(?<=\n\n)/).filter((piece) => piece.trim() !== ""),
  contentType: "text/event-stream",
  ...options
})

/** An SSE answer from `data:` payloads (objects are sent as JSON, strings as they are, e.g. `[DONE]`). */
export const sse = (
  data: ReadonlyArray<unknown>,
  options: { readonly cutAfter?: number; readonly pieceDelayMs?: number } = {}
): Reply => ({
  _tag: "Events",
  pieces: data.map((item) => `data: ${typeof item === "string" ? item : JSON.stringify(item)}\n\n`),
  contentType: "text/event-stream",
  ...options
})

/** A newline-delimited JSON answer (the legacy `/generate` stream). */
export const ndjson = (lines: ReadonlyArray<unknown>, options: { readonly cutAfter?: number } = {}): Reply => ({
  _tag: "Events",
  pieces: lines.map((line) => `${JSON.stringify(line)}\n`),
  contentType: "application/json",
  ...options
})

/** A socket that never answers. */
export const stall: Reply = { _tag: "Stall" }

/**
 * A 200 whose body is `piece` sent again and again, `everyMs` apart, `times` times: SSE comments (`": ping\n\n"`)
 * or whitespace that keep a connection busy without saying anything.
 */
export const trickle = (
  piece: string,
  options: { readonly everyMs: number; readonly times: number; readonly contentType?: string }
): Reply => ({
  _tag: "Events",
  pieces: [piece],
  contentType: options.contentType ?? "text/event-stream",
  pieceDelayMs: options.everyMs,
  repeat: options.times
})

// ---------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------

const fixturesDir = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "openai-compatible")

/** The text of a file in `test/fixtures/openai-compatible/`. */
export const fixture = (name: string): string => readFileSync(join(fixturesDir, name), "utf8")

/** A `chat.completion` whose one choice says `content` (a judge's verdict, an answer): what the `openai` API sends. */
export const chatCompletion = (content: string): Record<string, unknown> => ({
  id: "chatcmpl-loopback",
  object: "chat.completion",
  created: 1,
  model: "loopback-model",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 }
})

/** The `data:` payloads of a recorded SSE stream, `[DONE]` excluded. */
export const sseData = (textOfStream: string): Array<Record<string, any>> =>
  textOfStream.split("\n")
    .filter((line) => line.startsWith("data: ") && line.trim() !== "data: [DONE]")
    .map((line) => JSON.parse(line.slice(6)))

/**
 * The non-streamed chat completion a server would have answered instead of a recorded stream: the OpenAI merge
 * of the deltas (content and reasoning concatenated, tool calls by index with their arguments joined, the last
 * finish reason and usage). Written independently of the client's chunk decoding, to check it.
 */
export const chatCompletionOfStream = (textOfStream: string): Record<string, unknown> => {
  const events = sseData(textOfStream)
  const choices = new Map<number, Record<string, any>>()
  let usage: unknown = undefined
  for (const event of events) {
    if (event.usage !== undefined && event.usage !== null) usage = event.usage
    for (const choice of event.choices ?? []) {
      const current = choices.get(choice.index) ?? {
        index: choice.index,
        message: { role: "assistant", content: null as string | null, tool_calls: [] as Array<any> },
        finish_reason: null,
        stop_reason: null
      }
      choices.set(choice.index, current)
      const delta = choice.delta ?? {}
      if (typeof delta.content === "string" && delta.content !== "") {
        current.message.content = (current.message.content ?? "") + delta.content
      }
      for (const field of ["reasoning", "reasoning_content"]) {
        if (typeof delta[field] === "string") current.message[field] = (current.message[field] ?? "") + delta[field]
      }
      for (const call of delta.tool_calls ?? []) {
        const existing = current.message.tool_calls[call.index]
        if (existing === undefined) {
          current.message.tool_calls[call.index] = {
            id: call.id,
            type: "function",
            function: { name: call.function?.name, arguments: call.function?.arguments ?? "" }
          }
        } else {
          existing.function.arguments += call.function?.arguments ?? ""
        }
      }
      if (choice.finish_reason !== null && choice.finish_reason !== undefined) current.finish_reason = choice.finish_reason
      if (choice.stop_reason !== null && choice.stop_reason !== undefined) current.stop_reason = choice.stop_reason
    }
  }
  const first = events[0] ?? {}
  return {
    id: first.id,
    object: "chat.completion",
    created: first.created,
    model: first.model,
    choices: [...choices.values()].map((choice) => ({
      ...choice,
      message: {
        ...choice.message,
        tool_calls: choice.message.tool_calls.length > 0 ? choice.message.tool_calls : undefined
      }
    })),
    usage
  }
}

/** The SSE stream a server would have sent for a recorded non-streamed completion: its text in word pieces. */
export const completionStreamOf = (completion: Record<string, any>): Array<unknown> => {
  const events: Array<unknown> = []
  for (const choice of completion.choices) {
    const pieces: Array<string> = choice.text.match(/\s*\S+|\s+$/g) ?? []
    for (const piece of pieces) {
      events.push({
        id: completion.id,
        object: "text_completion",
        created: completion.created,
        model: completion.model,
        choices: [{ index: choice.index, text: piece, logprobs: null, finish_reason: null, stop_reason: null }]
      })
    }
    events.push({
      id: completion.id,
      object: "text_completion",
      created: completion.created,
      model: completion.model,
      choices: [{ index: choice.index, text: "", logprobs: null, finish_reason: choice.finish_reason, stop_reason: choice.stop_reason }]
    })
  }
  events.push({ id: completion.id, object: "text_completion", created: completion.created, model: completion.model, choices: [], usage: completion.usage })
  events.push("[DONE]")
  return events
}

// ---------------------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------------------

/** How the server behaves when no reply is queued. */
export interface Options {
  /** `openai` (`vllm serve`), `generate` (the legacy demo server) or `both`. Default `openai`. */
  readonly api?: "openai" | "generate" | "both"
  /** The model name it serves. Default `loopback-model`. */
  readonly model?: string
  /** Delay before every completion answer. Default 0. */
  readonly latencyMs?: number
  /** The answer is this many words (`streamed in as many chunks`). Default 8. */
  readonly words?: number
  /** `GET /health` answers 503 instead of 200. */
  readonly unhealthy?: boolean
  /** Port to listen on (default 0: any free port). */
  readonly port?: number
}

/** One request the server received. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: any
}

/** A running loopback server. */
export interface LoopbackServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Every request received, in order. */
  readonly requests: Array<Received>
  /** Answers the next requests to `path` with these replies, in order (then the default behaviour again). */
  readonly enqueue: (path: string, ...replies: ReadonlyArray<Reply>) => void
  /** Responses the client closed before the server finished them (aborted requests). */
  readonly closedEarly: () => number
  /** TCP connections accepted so far (keep-alive clients reuse a few). */
  readonly connections: () => number
  /** TCP connections open now. */
  readonly openConnections: () => number
  /** Completes when some response is closed early by the client. */
  readonly closedEarlySignal: Effect.Effect<void>
  /** Sets whether `/health` answers 200 or 503. */
  readonly setHealthy: (healthy: boolean) => void
}

// The keys of vLLM's `SamplingParams`: the legacy server passes every other key there and fails with 500.
const samplingKeys = new Set([
  "n", "best_of", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k",
  "min_p", "seed", "stop", "stop_token_ids", "bad_words", "include_stop_str_in_output", "ignore_eos", "max_tokens",
  "min_tokens", "logprobs", "prompt_logprobs", "detokenize", "skip_special_tokens", "spaces_between_special_tokens",
  "truncate_prompt_tokens", "guided_decoding", "logit_bias", "allowed_token_ids", "extra_args"
])

const encoder = new TextEncoder()

const answerWords = (count: number): Array<string> =>
  Array.from({ length: count }, (_, i) => (i === 0 ? `Word${i}` : ` word${i}`))

/** Starts the server for the life of the scope. */
export const make = (options: Options = {}): Effect.Effect<LoopbackServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const api = options.api ?? "openai"
    const servedModel = options.model ?? "loopback-model"
    const latency = options.latencyMs ?? 0
    const words = answerWords(options.words ?? 8)
    const answerText = words.join("")
    const queues = new Map<string, Array<Reply>>()
    const requests: Array<Received> = []
    let healthy = options.unhealthy !== true
    let closedEarly = 0
    const closedSignal = yield* Deferred.make<void>()
    let sequence = 0

    const usageOf = (promptText: string, n: number) => {
      const prompt = promptText.split(/\s+/).filter((w) => w !== "").length
      return { prompt_tokens: prompt, completion_tokens: words.length * n, total_tokens: prompt + words.length * n }
    }

    const sendReply = (request: HttpServerRequest.HttpServerRequest, reply: Reply) => {
      switch (reply._tag) {
        case "Body":
          return Effect.succeed(HttpServerResponse.text(reply.body, {
            status: reply.status,
            contentType: reply.contentType,
            ...(reply.headers !== undefined ? { headers: reply.headers } : {})
          }))
        case "Stall":
          return Effect.never
        case "Events": {
          const encoded = (reply.cutAfter !== undefined ? reply.pieces.slice(0, reply.cutAfter) : reply.pieces).map((p) => encoder.encode(p))
          const repeat = reply.repeat ?? 1
          let pieces: Stream.Stream<Uint8Array> = Stream.fromIterable({
            *[Symbol.iterator]() {
              for (let round = 0; round < repeat; round++) yield* encoded
            }
          })
          if (reply.pieceDelayMs !== undefined) {
            pieces = Stream.tap(pieces, () => Effect.sleep(Duration.millis(reply.pieceDelayMs!)))
          }
          if (reply.hangAfter !== undefined) {
            pieces = Stream.concat(Stream.take(pieces, reply.hangAfter), Stream.never)
          }
          if (reply.cutAfter !== undefined) {
            const socket = NodeHttpServerRequest.toIncomingMessage(request).socket
            // Let the pieces reach the client, then cut the connection without ending the chunked body.
            pieces = Stream.concat(
              pieces,
              Stream.fromEffectDrain(Effect.callback<void>((resume) => {
                setTimeout(() => {
                  socket.destroy()
                  resume(Effect.void)
                }, 20)
              })).pipe(Stream.concat(Stream.never))
            )
          }
          return Effect.succeed(HttpServerResponse.stream(pieces, { contentType: reply.contentType, status: reply.status ?? 200 }))
        }
      }
    }

    const chatDefault = (body: any): Reply => {
      const n = typeof body.n === "number" ? body.n : 1
      const id = `chatcmpl-loop-${++sequence}`
      const promptText = (body.messages ?? []).map((m: any) => (typeof m.content === "string" ? m.content : "")).join(" ")
      const base = { id, object: "chat.completion.chunk", created: 1_700_000_000, model: servedModel }
      if (body.stream !== true) {
        return json({
          id,
          object: "chat.completion",
          created: 1_700_000_000,
          model: servedModel,
          choices: Array.from({ length: n }, (_, index) => ({
            index,
            message: { role: "assistant", content: answerText },
            logprobs: null,
            finish_reason: "stop"
          })),
          usage: usageOf(promptText, n)
        })
      }
      const events: Array<unknown> = []
      for (let index = 0; index < n; index++) {
        events.push({ ...base, choices: [{ index, delta: { role: "assistant", content: "" }, finish_reason: null }] })
      }
      // Choices interleave word by word, as vLLM sends them.
      for (const word of words) {
        for (let index = 0; index < n; index++) {
          events.push({ ...base, choices: [{ index, delta: { content: word }, logprobs: null, finish_reason: null }] })
        }
      }
      for (let index = 0; index < n; index++) {
        events.push({ ...base, choices: [{ index, delta: {}, logprobs: null, finish_reason: "stop" }] })
      }
      if (body.stream_options?.include_usage === true) events.push({ ...base, choices: [], usage: usageOf(promptText, n) })
      events.push("[DONE]")
      return sse(events)
    }

    const completionDefault = (body: any): Reply => {
      const n = typeof body.n === "number" ? body.n : 1
      const id = `cmpl-loop-${++sequence}`
      const promptText = typeof body.prompt === "string" ? body.prompt : ""
      const base = { id, object: "text_completion", created: 1_700_000_000, model: servedModel }
      if (body.stream !== true) {
        return json({
          ...base,
          choices: Array.from({ length: n }, (_, index) => ({ index, text: answerText, logprobs: null, finish_reason: "stop", stop_reason: null })),
          usage: usageOf(promptText, n)
        })
      }
      const events: Array<unknown> = []
      for (const word of words) {
        for (let index = 0; index < n; index++) events.push({ ...base, choices: [{ index, text: word, logprobs: null, finish_reason: null }] })
      }
      for (let index = 0; index < n; index++) events.push({ ...base, choices: [{ index, text: "", logprobs: null, finish_reason: "stop" }] })
      if (body.stream_options?.include_usage === true) events.push({ ...base, choices: [], usage: usageOf(promptText, n) })
      events.push("[DONE]")
      return sse(events)
    }

    const generateDefault = (body: any): Reply => {
      const unknown = Object.keys(body).filter((key) => key !== "prompt" && key !== "stream" && !samplingKeys.has(key))
      if (unknown.length > 0) {
        // What the real server does: SamplingParams(**rest) raises, FastAPI answers 500.
        return text(500, "Internal Server Error")
      }
      const prompt = typeof body.prompt === "string" ? body.prompt : ""
      const n = typeof body.n === "number" ? body.n : 1
      if (body.stream !== true) return json({ text: Array.from({ length: n }, () => prompt + answerText) })
      const lines: Array<unknown> = []
      let sofar = ""
      for (const word of words) {
        sofar += word
        lines.push({ text: Array.from({ length: n }, () => prompt + sofar) })
      }
      return ndjson(lines)
    }

    const notFound = json({ detail: "Not Found" }, { status: 404 })

    const handle = (path: string, fallback: (body: any) => Reply, delayed: boolean) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const raw = yield* Effect.orElseSucceed(request.text, () => "")
        let body: any = undefined
        try {
          body = raw === "" ? undefined : JSON.parse(raw)
        } catch {
          body = raw
        }
        requests.push({ method: request.method, path, headers: { ...request.headers }, body })
        const response = NodeHttpServerRequest.toServerResponse(request)
        response.on("close", () => {
          if (!response.writableFinished) {
            closedEarly++
            Deferred.doneUnsafe(closedSignal, Effect.void)
          }
        })
        if (delayed && latency > 0) yield* Effect.sleep(Duration.millis(latency))
        const queued = queues.get(path)?.shift()
        return yield* sendReply(request, queued ?? fallback(body ?? {}))
      })

    const openai = api === "openai" || api === "both"
    const generate = api === "generate" || api === "both"
    const routes: Record<string, Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>> = {
      "POST /v1/chat/completions": handle("/v1/chat/completions", (b) => (openai ? chatDefault(b) : notFound), true),
      "POST /v1/completions": handle("/v1/completions", (b) => (openai ? completionDefault(b) : notFound), true),
      "GET /v1/models": handle("/v1/models", () =>
        openai
          ? json({ object: "list", data: [{ id: servedModel, object: "model", created: 1_700_000_000, owned_by: "vllm", max_model_len: 4096 }] })
          : notFound, false),
      "POST /generate": handle("/generate", (b) => (generate ? generateDefault(b) : notFound), true),
      // Embeddings are answered only with what a test enqueues (a recorded payload or a fault).
      "POST /v1/embeddings": handle("/v1/embeddings", () => notFound, true),
      // The Responses API likewise (recorded streams: test/fixtures/openai-responses).
      "POST /v1/responses": handle("/v1/responses", () => notFound, true),
      "GET /health": handle("/health", () => (healthy ? text(200, "") : text(503, "")), false)
    }
    // Interruptible: `NodeHttpServer` runs handlers uninterruptibly, so a `stall` could be neither aborted by the
    // client nor stopped when the server's scope closes.
    const app = Effect.interruptible(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const path = request.url.split("?")[0]!
      return routes[`${request.method} ${path}`] ?? Effect.succeed(HttpServerResponse.jsonUnsafe({ detail: "Not Found" }, { status: 404 }))
    }))

    let connections = 0
    let open = 0
    const node = createServer()
    node.on("connection", (socket) => {
      connections++
      open++
      socket.on("close", () => void open--)
    })
    // No graceful shutdown: it waits on the clock in context (a TestClock that may never move) and for requests that
    // a fault (`stall`) keeps open forever. Closing the scope cuts every connection instead.
    const server = yield* NodeHttpServer.make(() => node, {
      port: options.port ?? 0,
      host: "127.0.0.1",
      disablePreemptiveShutdown: true
    }).pipe(Effect.orDie)
    yield* server.serve(app)
    yield* Effect.addFinalizer(() => Effect.sync(() => node.closeAllConnections()))
    const address = server.address
    const url = address._tag !== "UnixPathAddress" ? `http://127.0.0.1:${address.port}` : "http://127.0.0.1"

    return {
      url,
      requests,
      enqueue: (path, ...replies) => {
        const queue = queues.get(path) ?? []
        queue.push(...replies)
        queues.set(path, queue)
      },
      closedEarly: () => closedEarly,
      connections: () => connections,
      openConnections: () => open,
      closedEarlySignal: Effect.suspend(() => Deferred.await(closedSignal)),
      setHealthy: (value) => {
        healthy = value
      }
    } satisfies LoopbackServer
  })

/** Runs the server as a process: `--port`, `--latency-ms`, `--words`, `--api`; prints `listening on <url>`. */
const main = () => {
  const args = process.argv.slice(2)
  const flag = (name: string): string | undefined => {
    const i = args.indexOf(`--${name}`)
    return i >= 0 ? args[i + 1] : undefined
  }
  const program = Effect.gen(function*() {
    const server = yield* make({
      port: Number(flag("port") ?? 0),
      latencyMs: Number(flag("latency-ms") ?? 0),
      words: Number(flag("words") ?? 8),
      api: (flag("api") ?? "openai") as "openai" | "generate" | "both"
    })
    yield* Effect.sync(() => console.log(`listening on ${server.url}`))
    return yield* Effect.never
  })
  NodeRuntime.runMain(Layer.launch(Layer.effectDiscard(program)))
}

if (import.meta.url === `file://${process.argv[1]}`) main()
