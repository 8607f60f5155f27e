/**
 * A loopback OpenAI-compatible chat server that answers a Self-Refine evaluation deterministically from what it is
 * sent, and counts every request by its call key (a digest of the request's messages: a call sent twice is the same
 * key twice), for the durable tests and benchmark.
 *
 * Problems read `What is <a> + <b>?`. The base answers `FINAL: <a+b>` (or `<a+b+1>` when `a` is a multiple of 7,
 * so some answers are wrong); the critic finds no issues in an even sum, and asks for a check of an odd one in its
 * first round (a refined answer, marked `Checked.`, has none); the refiner answers `Checked. FINAL: <a+b>`. Every
 * answer waits `latencyMs`.
 */
import { createHash } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** The server and what it has seen. */
export interface ScriptedModelServer {
  readonly url: string
  /** Requests received per call key. */
  readonly counts: Map<string, number>
  /** Keys of the requests received and not yet answered. */
  readonly inFlight: Set<string>
  /**
   * The latest call key per problem (`What is a + b?`). A problem's calls are sequential, so its latest call is the
   * one its run may still be waiting on — answered perhaps, but not yet stored by the client.
   */
  readonly latestByProblem: Map<string, string>
  /**
   * The latest call key per problem of each sender: what a process may be waiting on when it is killed, even once
   * another process has taken its problem further.
   */
  readonly latestBySender: Map<string, Map<string, string>>
  /** The position of each call among its problem's calls (1 for the first), as first received. */
  readonly positionOf: Map<string, number>
  /**
   * A sender (the request's bearer token: each process of a test gets its own API key) with a call in flight that is
   * not its problem's first: killed now, it interrupts a problem with calls stored. Undefined when there is none.
   */
  readonly senderWithLaterCallInFlight: () => string | undefined
  /**
   * While on, a call that is not its problem's first is held (kept in flight, unanswered) until it is turned off:
   * a test that kills a process at a point of the run holds it there, however slowly the machine runs (under load, a
   * 2-second evaluation could end between two polls). First calls are still answered, so later calls keep coming.
   */
  readonly holdLaterCalls: (on: boolean) => void
  /** Forgets what was received, the count of requests included. */
  readonly reset: () => void
  /** Requests received since the start or the last `reset`. */
  readonly total: () => number
  readonly close: () => Promise<void>
}

interface ChatMessage {
  readonly role: string
  readonly content: string | null
}

/** The answer to a request's messages. */
export const answerOf = (messages: ReadonlyArray<ChatMessage>): string => {
  const last = messages.at(-1)?.content ?? ""
  const numbers = /What is (\d+) \+ (\d+)\?/.exec(last)
  const a = Number(numbers?.[1] ?? 0)
  const b = Number(numbers?.[2] ?? 0)
  const sum = a + b
  if (last.includes("Review the answer above.")) {
    const round2 = last.includes("Checked. FINAL:")
    return sum % 2 === 0 || round2 ? "No issues." : "Check the sum again."
  }
  if (last.includes("Improve the answer so that")) return `Checked. FINAL: ${sum}`
  return `FINAL: ${a % 7 === 0 ? sum + 1 : sum}`
}

/** The call key of a request: a digest of its messages. */
export const keyOf = (messages: ReadonlyArray<ChatMessage>): string =>
  createHash("sha256").update(JSON.stringify(messages)).digest("hex").slice(0, 16)

const readBody = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    request.on("error", reject)
  })

/** Starts the server on a free loopback port. */
export const start = (options: { readonly latencyMs?: number } = {}): Promise<ScriptedModelServer> => {
  const latencyMs = options.latencyMs ?? 0
  const counts = new Map<string, number>()
  const inFlight = new Set<string>()
  const latestByProblem = new Map<string, string>()
  const latestBySender = new Map<string, Map<string, string>>()
  const positionOf = new Map<string, number>()
  const senderOf = new Map<string, string>()
  const callsOfProblem = new Map<string, number>()
  let total = 0
  let held: { readonly released: Promise<void>; readonly release: () => void } | undefined
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    if (request.method === "GET" && request.url === "/v1/models") {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ object: "list", data: [{ id: "scripted", object: "model" }] }))
      return
    }
    if (request.method !== "POST" || request.url !== "/v1/chat/completions") {
      response.writeHead(404).end()
      return
    }
    const body = JSON.parse(await readBody(request)) as { messages: Array<ChatMessage>; stream?: boolean }
    const key = keyOf(body.messages)
    const problem = /What is \d+ \+ \d+\?/.exec(body.messages.at(-1)?.content ?? "")?.[0]
    if (problem !== undefined) {
      latestByProblem.set(problem, key)
      if (!positionOf.has(key)) {
        const position = (callsOfProblem.get(problem) ?? 0) + 1
        callsOfProblem.set(problem, position)
        positionOf.set(key, position)
      }
    }
    const sender = (request.headers.authorization ?? "").replace(/^Bearer /, "")
    senderOf.set(key, sender)
    if (problem !== undefined) {
      const latest = latestBySender.get(sender) ?? new Map<string, string>()
      latest.set(problem, key)
      latestBySender.set(sender, latest)
    }
    total++
    counts.set(key, (counts.get(key) ?? 0) + 1)
    inFlight.add(key)
    if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs))
    while (held !== undefined && (positionOf.get(key) ?? 0) >= 2) await held.released
    inFlight.delete(key)
    const content = answerOf(body.messages)
    const answer = JSON.stringify({
      id: `chatcmpl-${key}`,
      object: "chat.completion",
      created: 0,
      model: "scripted",
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    })
    // With its length, as vLLM's OpenAI server sends a whole answer (FastAPI's `JSONResponse`), not chunked.
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
    response.end(answer)
  }
  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error) => {
      response.writeHead(500, { "content-type": "application/json" })
      response.end(JSON.stringify({ error: { message: String(error) } }))
    })
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        counts,
        inFlight,
        latestBySender,
        reset: () => {
          counts.clear()
          latestByProblem.clear()
          latestBySender.clear()
          positionOf.clear()
          callsOfProblem.clear()
          // The tests gate kills on a share of the calls: a total counting the reference run would open every gate
          // at once, and three kills close together can outlast a 2-second evaluation.
          total = 0
        },
        latestByProblem,
        positionOf,
        senderWithLaterCallInFlight: () => {
          for (const key of inFlight) if ((positionOf.get(key) ?? 0) >= 2) return senderOf.get(key)
          return undefined
        },
        total: () => total,
        holdLaterCalls: (on) => {
          if (on && held === undefined) {
            let release = () => {}
            const released = new Promise<void>((resolve) => (release = resolve))
            held = { released, release }
          } else if (!on && held !== undefined) {
            const { release } = held
            held = undefined
            release()
          }
        },
        close: () =>
          new Promise((done) => {
            held?.release()
            held = undefined
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}

/** A dataset of `n` problems `What is <i> + <i mod 3>?` with their references, as JSONL. */
export const dataset = (n: number): string =>
  Array.from({ length: n }, (_, i) => JSON.stringify({ id: `p${i + 1}`, problem: `What is ${i + 1} + ${i % 3}?`, reference: String(i + 1 + (i % 3)) }))
    .join("\n") + "\n"
