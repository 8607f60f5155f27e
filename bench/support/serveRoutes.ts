/**
 * The streaming routes bench/serve.ts compares on one `valet serve` process: each is a request to send and a test
 * of the stream's text that says the run ended as it should, and every route is read the same way (raw `fetch`,
 * read to the end, so that no client library's overhead is counted as the server's). A route is one more entry in
 * a list: `POST /runs/stream` (valet's own), A2A `SendStreamingMessage`, and the Responses API with `stream: true`.
 *
 * The first event of a stream is its first whole SSE frame holding a `data:` line (a `: keep-alive` comment is not
 * one), timed from the request's start; the events of a stream are its frames holding a `data:` line. What one
 * event is differs by route (valet's events, A2A's task / status / artifact updates, the Responses API's typed
 * events), so events/s compares throughput of frames, not of work.
 */
import { percentile } from "./report.js"

/** One streaming route of the server. */
export interface Route {
  /** How the table names it. */
  readonly name: string
  readonly path: string
  readonly headers?: Readonly<Record<string, string>>
  /** The body of the i-th request of a burst. */
  readonly body: (i: number) => unknown
  /** Whether a stream's last frame says the run ended as it should (a stream that ends otherwise fails the bench). */
  readonly completed: (lastFrame: string) => boolean
}

const question = (i: number) => `Question ${i}: what is the capital of France?`

/** valet's own route: the run's events, until `RunCompleted`. */
export const runsStream = (agent: string): Route => ({
  name: "/runs/stream",
  path: "/runs/stream",
  body: (i) => ({ agent, input: question(i) }),
  completed: (lastFrame) => lastFrame.includes("event: RunCompleted")
})

/**
 * A2A 1.0 `SendStreamingMessage` (JSON-RPC binding): the task, its status and artifact updates, until the status
 * update `TASK_STATE_COMPLETED`, after which the server closes the stream.
 */
export const a2a = (agent: string): Route => ({
  name: "A2A SendStreamingMessage",
  path: `/a2a/${agent}`,
  headers: { "a2a-version": "1.0" },
  body: (i) => ({
    jsonrpc: "2.0",
    id: i,
    method: "SendStreamingMessage",
    params: { message: { messageId: `bench-${i}`, role: "ROLE_USER", parts: [{ text: question(i) }] } }
  }),
  completed: (lastFrame) => lastFrame.includes("\"statusUpdate\"") && lastFrame.includes("\"TASK_STATE_COMPLETED\"")
})

/**
 * The Responses API with `stream: true`: `response.created` … until `response.completed` (no `[DONE]`). `store` is
 * left out: on a server without a thread store the response is a plain run, as the other routes' are (with
 * `store: false` the run would also be dropped from the registry when it ends, a path the others do not take).
 */
export const responses = (agent: string): Route => ({
  name: "Responses (stream)",
  path: "/v1/responses",
  body: (i) => ({ model: agent, input: question(i), stream: true }),
  completed: (lastFrame) => lastFrame.includes("event: response.completed")
})

/**
 * Whether the server has a route at all: one request with an empty JSON object, which a route answers with a
 * 400 (the body does not decode) and a server without it with the router's 404. It starts no run.
 */
export const served = async (baseUrl: string, route: Route): Promise<boolean> => {
  const response = await fetch(`${baseUrl}${route.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...route.headers },
    body: "{}"
  })
  await response.arrayBuffer()
  return response.status !== 404
}

/** One stream read to its end: time to its first event, and how many events it had. */
export interface Streamed {
  readonly firstEventMs: number
  readonly events: number
}

/** Sends the i-th request of `route` and reads its stream to the end. */
export const stream = async (baseUrl: string, route: Route, i: number): Promise<Streamed> => {
  const started = performance.now()
  const response = await fetch(`${baseUrl}${route.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...route.headers },
    body: JSON.stringify(route.body(i))
  })
  if (response.status !== 200) throw new Error(`${route.name} ${i}: HTTP ${response.status}: ${await response.text()}`)
  let firstEventMs = -1
  let events = 0
  let pending = ""
  let lastFrame = ""
  const decoder = new TextDecoder()
  const take = (frame: string) => {
    if (!/^data:/m.test(frame)) return
    if (firstEventMs < 0) firstEventMs = performance.now() - started
    events++
    lastFrame = frame
  }
  for await (const chunk of response.body!) {
    pending += decoder.decode(chunk, { stream: true }).replace(/\r\n/g, "\n")
    let end = pending.indexOf("\n\n")
    while (end >= 0) {
      take(pending.slice(0, end))
      pending = pending.slice(end + 2)
      end = pending.indexOf("\n\n")
    }
  }
  take(pending)
  if (!route.completed(lastFrame)) throw new Error(`${route.name} ${i} did not complete: ${lastFrame.slice(-300)}`)
  return { firstEventMs, events }
}

/** A burst: `n` streams of one route at once, each read to its end. */
export interface Burst {
  readonly firstEventP50Ms: number
  readonly firstEventP99Ms: number
  readonly wallMs: number
  readonly events: number
  readonly eventsPerSecond: number
}

/** Starts `n` streams of `route` at once and waits for them all. */
export const burst = async (baseUrl: string, route: Route, n: number): Promise<Burst> => {
  const started = performance.now()
  const results = await Promise.all(Array.from({ length: n }, (_, i) => stream(baseUrl, route, i)))
  const wallMs = performance.now() - started
  const firsts = results.map((result) => result.firstEventMs)
  const events = results.reduce((sum, result) => sum + result.events, 0)
  return {
    firstEventP50Ms: percentile(firsts, 50),
    firstEventP99Ms: percentile(firsts, 99),
    wallMs,
    events,
    eventsPerSecond: events / (wallMs / 1000)
  }
}

/**
 * The order of the routes in each round: round r starts at route r (mod the number of routes), so that over
 * `k × routes` rounds each route comes first, second… equally often and none gets the server warmer than the others.
 */
export const roundOrder = <A>(routes: ReadonlyArray<A>, round: number): ReadonlyArray<A> =>
  routes.map((_, i) => routes[(round + i) % routes.length]!)
