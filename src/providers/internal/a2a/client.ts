/**
 * A2A 1.0 over JSON-RPC, as a client on `HttpClient`: the agent card (found from a card URL or a base URL), the
 * endpoint it names, one-answer calls (`GetTask`, `CancelTask`) and streamed ones (`SendStreamingMessage`,
 * `SubscribeToTask`). Every answer is decoded with the wire Schemas; every failure is a `RemoteAgentFailed` naming
 * the URL, the code (JSON-RPC, or the HTTP status of a non-2xx answer) and the remote's one line.
 */
import { Duration, Effect, Redacted, Result, Schema, Stream } from "effect"
import { Sse } from "effect/encoding"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { RemoteAgentFailed } from "../../../core/AgentError.js"
import * as Wire from "./wire.js"

/** How to reach a remote agent. */
export interface Connection {
  /** A card URL (ending in `.json`) or a base URL the card is found under. */
  readonly url: string
  readonly token?: Redacted.Redacted<string> | string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * Origins (`https://gateway.example`) besides the card's own that may receive the token and `headers`: a card
   * naming an endpoint on another origin gets neither unless that origin is listed here.
   */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /** How long one request may wait for its answer, body included (the card, `GetTask`…; a stream until it starts). Default 30 s. */
  readonly requestTimeout?: Duration.Input | undefined
  /** How long a stream may go without an event (keep-alive comments do not count) before it is lost and resumed. Default 5 min. */
  readonly idleTimeout?: Duration.Input | undefined
}

/** A resolved agent: its card, where the card was read, and the JSON-RPC endpoint picked from it. */
export interface Resolved {
  readonly card: Wire.AgentCard
  readonly cardUrl: string
  readonly endpoint: string
  readonly headers: Readonly<Record<string, string>>
  readonly requestTimeout: Duration.Input
  readonly idleTimeout: Duration.Input
}

/** The default of `Connection.requestTimeout`: generous, a bound on a remote that accepted and went quiet. */
const defaultRequestTimeout: Duration.Input = "30 seconds"

/** The default of `Connection.idleTimeout`: a working task sends status or artifacts far more often. */
const defaultIdleTimeout: Duration.Input = "5 minutes"

/** `effect`, failing with `RemoteAgentFailed` `timeout` when it takes longer than `duration`. */
const bounded = <A>(effect: Effect.Effect<A, RemoteAgentFailed>, url: string, what: string, duration: Duration.Input): Effect.Effect<A, RemoteAgentFailed> =>
  Effect.timeoutOrElse(effect, {
    duration,
    orElse: () => Effect.fail(failed(url, "timeout", `${what}: no answer within ${Duration.format(Duration.fromInputUnsafe(duration))}`))
  })

/**
 * The largest SSE event read, in characters (the SDK caps one at 4 MiB too, a2a-js #582): a remote streaming without
 * end inside one event would otherwise hold all of it.
 */
export const maxEventChars = 4 * 1024 * 1024

/** The largest one-answer body read (a card, a JSON-RPC answer). */
const maxBodyBytes = 16 * 1024 * 1024

/** The headers every request carries: the protocol version, the token as a bearer, then the caller's own. */
export const headersOf = (connection: Connection): Record<string, string> => {
  const headers: Record<string, string> = { [Wire.versionHeader]: Wire.protocolVersion }
  if (connection.token !== undefined) {
    const token = Redacted.isRedacted(connection.token) ? Redacted.value(connection.token) : connection.token
    headers.authorization = `Bearer ${token}`
  }
  for (const [name, value] of Object.entries(connection.headers ?? {})) headers[name] = value
  return headers
}

const failed = (url: string, reason: string, detail: string, code = 0) => new RemoteAgentFailed({ url, code, reason, detail: oneLine(detail) })

/** One line, at most `max` characters (300 by default): a remote's text goes into errors and progress lines. */
export const oneLine = (text: string, max = 300): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 3)}...` : line
}

const fromHttpError = (url: string) => (error: HttpClientError.HttpClientError) => failed(url, "transport", error.message)

const decodeUnknown = <S extends Schema.Decoder<unknown>>(schema: S) => Schema.decodeUnknownResult(schema)

const parseJson = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}

/** The JSON-RPC error of a body, if it is one (`{error: {code, message}}`). */
const rpcErrorOf = (body: unknown): Wire.JsonRpcError | undefined => {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined
  const decoded = decodeUnknown(Wire.JsonRpcError)((body as { readonly error: unknown }).error)
  return Result.isSuccess(decoded) ? decoded.success : undefined
}

/** The most of a non-2xx body read: only its JSON-RPC error or its first 200 characters are shown. */
const maxErrorBodyBytes = 64 * 1024

/**
 * Reads a body of at most `maxBodyBytes`, counting the bytes as they come (a chunked answer has no Content-Length
 * to trust): past the cap the read stops and fails.
 */
const readBody = (response: HttpClientResponse.HttpClientResponse, url: string): Effect.Effect<string, RemoteAgentFailed> => {
  const declared = Number(response.headers["content-length"] ?? NaN)
  if (declared > maxBodyBytes) return Effect.fail(failed(url, "malformed", `the answer is ${declared} bytes, over ${maxBodyBytes}`))
  return readUpTo(response, url, maxBodyBytes, true)
}

/** The body's first `cap` bytes as text: past them the read stops, failing when `strict`, else keeping what it has. */
const readUpTo = (
  response: HttpClientResponse.HttpClientResponse,
  url: string,
  cap: number,
  strict: boolean
): Effect.Effect<string, RemoteAgentFailed> =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let total = 0
    return response.stream.pipe(
      Stream.mapError(fromHttpError(url)),
      Stream.runForEachWhile((chunk) => {
        if (total + chunk.length > cap) {
          if (strict) return Effect.fail(failed(url, "malformed", `the answer is over ${cap} bytes`))
          chunks.push(chunk.subarray(0, cap - total))
          total = cap
          return Effect.succeed(false)
        }
        chunks.push(chunk)
        total += chunk.length
        return Effect.succeed(true)
      }),
      Effect.map(() => {
        const bytes = new Uint8Array(total)
        let at = 0
        for (const chunk of chunks) {
          bytes.set(chunk, at)
          at += chunk.length
        }
        return new TextDecoder().decode(bytes)
      })
    )
  })

/** A non-2xx answer as `RemoteAgentFailed`: the HTTP status, with the JSON-RPC error's message when the body has one. */
const httpFailure = (response: HttpClientResponse.HttpClientResponse, url: string): Effect.Effect<never, RemoteAgentFailed> =>
  response.status >= 300 && response.status < 400
    ? Effect.fail(failed(
      url,
      "http",
      `HTTP ${response.status}: redirected to ${response.headers["location"] ?? "(no location)"}; redirects are not followed (the token and headers would go along): give that URL`,
      response.status
    ))
    : Effect.flatMap(Effect.orElseSucceed(readUpTo(response, url, maxErrorBodyBytes, false), () => ""), (text) => {
    const json = parseJson(text)
    const rpc = Result.isSuccess(json) ? rpcErrorOf(json.success) : undefined
    const said = rpc !== undefined ? `${rpc.message} (JSON-RPC ${rpc.code})` : text.slice(0, 200)
    return Effect.fail(failed(url, "http", `HTTP ${response.status}${said !== "" ? `: ${said}` : ""}`, response.status))
  })

/** Where a card may be: the URL itself when it names a `.json`, else under its path, then under its origin. */
export const cardUrls = (url: string): Result.Result<ReadonlyArray<string>, string> => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return Result.fail(`not a URL: ${JSON.stringify(url)}`)
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return Result.fail(`not an http(s) URL: ${JSON.stringify(url)}`)
  if (parsed.pathname.endsWith(".json")) return Result.succeed([parsed.href])
  // Relative to the path, not the origin: `new URL("/.well-known/…", base)` drops the base's path (A2A server
  // routes one agent per path, `/a2a/<agent>`).
  const base = new URL(parsed.href)
  if (!base.pathname.endsWith("/")) base.pathname += "/"
  const underPath = new URL(".well-known/agent-card.json", base).href
  const atRoot = new URL("/.well-known/agent-card.json", parsed).href
  return Result.succeed(underPath === atRoot ? [underPath] : [underPath, atRoot])
}

/** Reads and decodes the agent card, trying each place it may be (a 404 moves on to the next). */
export const card = (http: HttpClient.HttpClient, connection: Connection): Effect.Effect<Resolved, RemoteAgentFailed> =>
  Effect.gen(function*() {
    const urls = cardUrls(connection.url)
    if (Result.isFailure(urls)) return yield* Effect.fail(failed(connection.url, "malformed", urls.failure))
    const headers = headersOf(connection)
    const requestTimeout = connection.requestTimeout ?? defaultRequestTimeout
    for (const [i, url] of urls.success.entries()) {
      const read = Effect.gen(function*() {
        const response = yield* Effect.mapError(http.execute(HttpClientRequest.get(url, { headers: { ...headers, accept: "application/json" } })), fromHttpError(url))
        if (response.status === 404 && i < urls.success.length - 1) return undefined
        if (response.status < 200 || response.status >= 300) return yield* httpFailure(response, url)
        return yield* readBody(response, url)
      })
      const body = yield* bounded(read, url, "the agent card", requestTimeout)
      if (body === undefined) continue
      const json = parseJson(body)
      if (Result.isFailure(json)) return yield* Effect.fail(failed(url, "malformed", `the agent card is not JSON: ${json.failure}`))
      const decoded = decodeUnknown(Wire.AgentCard)(json.success)
      if (Result.isFailure(decoded)) return yield* Effect.fail(failed(url, "malformed", `not an A2A 1.0 agent card: ${decoded.failure.message}`))
      const endpoint = endpointOf(decoded.success, url)
      if (Result.isFailure(endpoint)) return yield* Effect.fail(endpoint.failure)
      // The origin's card stands for the URL given only if its endpoint is under that URL: a server with one agent
      // per path (valet's `/a2a/<agent>`) answers a mistyped agent with its default agent's card at the root.
      if (i > 0 && !under(endpoint.success, connection.url)) {
        return yield* Effect.fail(failed(
          connection.url,
          "http",
          `no agent card under ${connection.url} (404), and the card at ${url} is of ${JSON.stringify(decoded.success.name)} at ${endpoint.success}: give the agent's card URL`,
          404
        ))
      }
      const endpointHeaders = headersForEndpoint(connection, url, endpoint.success, headers)
      if (Result.isFailure(endpointHeaders)) return yield* Effect.fail(endpointHeaders.failure)
      return {
        card: decoded.success,
        cardUrl: url,
        endpoint: endpoint.success,
        headers: endpointHeaders.success,
        requestTimeout,
        idleTimeout: connection.idleTimeout ?? defaultIdleTimeout
      }
    }
    return yield* Effect.fail(failed(connection.url, "http", "no agent card found", 404))
  })

/**
 * Whether `url` is `base` or under it, as URLs: the same origin, and a path equal to the base's or below it
 * (`/a2a/x` is not under `/a2a/xy`; `HTTP://H:80/a2a/x` is `http://h/a2a/x`).
 */
const under = (url: string, base: string): boolean => {
  try {
    const target = new URL(url)
    const root = new URL(base)
    const path = root.pathname.replace(/\/+$/, "")
    return target.origin === root.origin && (target.pathname === path || target.pathname.startsWith(`${path}/`))
  } catch {
    return false
  }
}

/** The origin of a URL (`scheme://host:port`); a string that is no URL stands for itself, matching nothing. */
const originOf = (url: string): string => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

/**
 * The headers the endpoint gets: all of them on the card's own origin (or one the caller allowed), only the protocol
 * version on another, so a card cannot send the token elsewhere. An https card naming an http endpoint is refused:
 * the token and the messages would go in clear.
 */
const headersForEndpoint = (
  connection: Connection,
  cardUrl: string,
  endpoint: string,
  headers: Record<string, string>
): Result.Result<Record<string, string>, RemoteAgentFailed> => {
  const from = new URL(cardUrl)
  const to = new URL(endpoint)
  if (from.protocol === "https:" && to.protocol !== "https:") {
    return Result.fail(failed(cardUrl, "malformed", `the card read over https names an endpoint that is not: ${endpoint}`))
  }
  const allowed = new Set((connection.allowedOrigins ?? []).map(originOf))
  return Result.succeed(to.origin === from.origin || allowed.has(to.origin) ? headers : { [Wire.versionHeader]: Wire.protocolVersion })
}

/** The first JSON-RPC interface of protocol 1.x the card offers; none is an error naming what it offers. */
export const endpointOf = (card: Wire.AgentCard, cardUrl: string): Result.Result<string, RemoteAgentFailed> => {
  const usable = card.supportedInterfaces.find((entry) =>
    entry.protocolBinding.toUpperCase() === "JSONRPC" && /^1(\.|$)/.test(entry.protocolVersion))
  if (usable !== undefined) {
    try {
      return Result.succeed(new URL(usable.url, cardUrl).href)
    } catch {
      return Result.fail(failed(cardUrl, "malformed", `the card's JSONRPC interface has no valid URL: ${JSON.stringify(usable.url)}`))
    }
  }
  const offered = card.supportedInterfaces.map((entry) => `${entry.protocolBinding} ${entry.protocolVersion}`).join(", ")
  return Result.fail(failed(
    cardUrl,
    "no_jsonrpc_interface",
    `the card of ${JSON.stringify(card.name)} offers no JSONRPC 1.x interface (it offers ${offered === "" ? "none" : offered})`
  ))
}

let nextId = 0

const rpcRequest = (resolved: Resolved, method: string, params: unknown, stream: boolean, id = ++nextId) =>
  HttpClientRequest.post(resolved.endpoint, {
    headers: { ...resolved.headers, accept: stream ? "text/event-stream" : "application/json" }
  }).pipe(HttpClientRequest.bodyJsonUnsafe({ jsonrpc: "2.0", id, method, params }))

/** The result of one JSON-RPC envelope, decoded with `schema`; an error envelope is `RemoteAgentFailed` with its code. */
const resultOf = <A>(url: string, method: string, envelope: unknown, schema: Schema.Decoder<A>): Result.Result<A, RemoteAgentFailed> => {
  const rpc = rpcErrorOf(envelope)
  if (rpc !== undefined) return Result.fail(failed(url, "json_rpc", `${method}: ${rpc.message}`, rpc.code))
  if (typeof envelope !== "object" || envelope === null || !("result" in envelope)) {
    return Result.fail(failed(url, "malformed", `${method}: the answer is not a JSON-RPC result`))
  }
  const decoded = decodeUnknown(schema)((envelope as { readonly result: unknown }).result)
  return Result.isFailure(decoded)
    ? Result.fail(failed(url, "malformed", `${method}: the answer does not match A2A 1.0: ${decoded.failure.message}`))
    : Result.succeed(decoded.success)
}

/** One JSON-RPC call answered by one JSON body. */
export const call = <A>(
  http: HttpClient.HttpClient,
  resolved: Resolved,
  method: string,
  params: unknown,
  schema: Schema.Decoder<A>
): Effect.Effect<A, RemoteAgentFailed> =>
  Effect.gen(function*() {
    const url = resolved.endpoint
    const read = Effect.gen(function*() {
      const response = yield* Effect.mapError(http.execute(rpcRequest(resolved, method, params, false)), fromHttpError(url))
      if (response.status < 200 || response.status >= 300) return yield* httpFailure(response, url)
      return yield* readBody(response, url)
    })
    const json = parseJson(yield* bounded(read, url, method, resolved.requestTimeout))
    if (Result.isFailure(json)) return yield* Effect.fail(failed(url, "malformed", `${method}: the answer is not JSON: ${json.failure}`))
    const result = resultOf(url, method, json.success, schema)
    return Result.isSuccess(result) ? result.success : yield* Effect.fail(result.failure)
  })

/**
 * A streamed JSON-RPC call: each SSE event's envelope decoded as a `StreamResponse`. An answer that is not
 * `text/event-stream` is one JSON envelope (an error before the first event, or a server answering whole): its
 * result is the stream's one element. A broken connection is `RemoteAgentFailed` `transport`: the caller decides
 * whether the task may be resumed.
 */
export const stream = (
  http: HttpClient.HttpClient,
  resolved: Resolved,
  method: string,
  params: unknown
): Stream.Stream<Wire.StreamResponse, RemoteAgentFailed> => {
  const url = resolved.endpoint
  return Stream.unwrap(Effect.gen(function*() {
    const id = ++nextId
    const response = yield* bounded(
      Effect.flatMap(Effect.mapError(http.execute(rpcRequest(resolved, method, params, true, id)), fromHttpError(url)), (response) =>
        response.status < 200 || response.status >= 300 ? httpFailure(response, url) : Effect.succeed(response)),
      url,
      method,
      resolved.requestTimeout
    )
    const contentType = (response.headers["content-type"] ?? "").toLowerCase()
    if (!contentType.startsWith("text/event-stream")) {
      const json = parseJson(yield* bounded(readBody(response, url), url, method, resolved.requestTimeout))
      if (Result.isFailure(json)) return yield* Effect.fail(failed(url, "malformed", `${method}: the answer is not JSON: ${json.failure}`))
      const result = resultOf(url, method, json.success, Wire.StreamResponse)
      return Result.isSuccess(result) ? Stream.make(result.success) : Stream.fail(result.failure)
    }
    return response.stream.pipe(
      Stream.mapError(fromHttpError(url)),
      Stream.decodeText,
      Stream.pipeThroughChannel(Sse.decode({ maxEventSize: maxEventChars })),
      Stream.mapError((error) =>
        error instanceof RemoteAgentFailed
          ? error
          : Sse.Retry.is(error)
          ? failed(url, "transport", `${method}: the server asked to retry`)
          : failed(url, "malformed", `${method}: ${error.message}`)),
      Stream.mapEffect((event) => {
        const json = parseJson(event.data)
        if (Result.isFailure(json)) return Effect.fail(failed(url, "malformed", `${method}: an event is not JSON: ${json.failure}`))
        // Each event answers this request (JSON-RPC 2.0: the same id), as the SDK checks too.
        const eventId = typeof json.success === "object" && json.success !== null ? (json.success as { readonly id?: unknown }).id : undefined
        if (eventId !== id) return Effect.fail(failed(url, "malformed", `${method}: an event answers request ${JSON.stringify(eventId)}, not ${id}`))
        const result = resultOf(url, method, json.success, Wire.StreamResponse)
        return Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(result.failure)
      }),
      // Counted in events, after the SSE decoding: a remote sending only `: ping` comments is as silent as none.
      Stream.timeoutOrElse({
        duration: resolved.idleTimeout,
        orElse: () =>
          Stream.fail(failed(url, "stream_lost", `${method}: no event within ${Duration.format(Duration.fromInputUnsafe(resolved.idleTimeout))}`))
      })
    )
  }))
}
