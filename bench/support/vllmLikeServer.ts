/**
 * A loopback vLLM-like server for the rollout benchmark: an OpenAI-compatible `/v1/completions` (and
 * `/v1/chat/completions`) that admits `--admit K` sequences at once, answers each request `--latency-ms` after it was
 * admitted, and queues the others in arrival order (as vLLM's scheduler does with `max_num_seqs`). A request with
 * `n` is `n` sequences (one slot each, admitted together) and is answered with `n` choices, as vLLM does: the `Vllm`
 * client asks a group's first steps in one such request. It samples its
 * own state every `--sample-ms` (requests admitted, requests queued) so the benchmark can read how busy valet kept
 * it: `GET /stats` answers the samples `[time ms (Date.now), admitted, queued]`, the connections opened and the requests
 * answered since the last `GET /stats?reset=1`.
 * `GET /v1/models` answers 200 (the `Vllm` layer detects the OpenAI API) and `GET /health` 200.
 *
 * Answers carry `Content-Length`, as vLLM's do (a chunked body would take the client's capped streaming read).
 *
 * Every completion is an actor-loop answer with an action and no `<done/>`, so an episode runs all its steps.
 *
 * Plain `node:http` in a process of its own, so the server's work does not share the measured event loop. It exits
 * when its stdin closes: a benchmark that dies or is killed (even with SIGKILL) leaves no server behind.
 *
 *   node --import tsx bench/support/vllmLikeServer.ts --admit 64 --latency-ms 200   # prints "listening on <url>"
 */
import { createServer, type ServerResponse } from "node:http"

const arg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name)
  return at >= 0 ? Number(process.argv[at + 1]) : fallback
}

const admit = arg("--admit", 64)
const latencyMs = arg("--latency-ms", 200)
const sampleMs = arg("--sample-ms", 5)

const text = `<think>Run it.</think>\n<action>{"command": ["python3", "-c", "print(1)"]}</action>\n` +
  `<state_update>{"next_focus": "look at the output"}</state_update>`

let admitted = 0
let sequence = 0
const queue: Array<{ readonly n: number; readonly run: () => void }> = []
let samples: Array<[number, number, number]> = []
// TCP connections opened by clients: a client that reuses its connections opens about as many as it has in flight.
let connections = 0

const answer = (res: ServerResponse, chat: boolean, n: number) => {
  const id = `cmpl-${++sequence}`
  const usage = { prompt_tokens: 60, completion_tokens: 40 * n, total_tokens: 60 + 40 * n }
  const indexes = Array.from({ length: n }, (_, index) => index)
  const body = chat
    ? { id, object: "chat.completion", created: 1_700_000_000, model: "bench-model", choices: indexes.map((index) => ({ index, message: { role: "assistant", content: text }, finish_reason: "stop" })), usage }
    : { id, object: "text_completion", created: 1_700_000_000, model: "bench-model", choices: indexes.map((index) => ({ index, text, finish_reason: "stop", logprobs: null })), usage }
  // With its length, as vLLM's server (Starlette's `JSONResponse`) answers: not chunked.
  const json = JSON.stringify(body)
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) })
  res.end(json)
}

const start = (n: number, run: () => void) => {
  admitted += n
  run()
}
// Fits: enough free slots, or none taken (a request of more than K sequences runs alone rather than never).
const fits = (n: number) => admitted + n <= admit || admitted === 0
const release = (n: number) => {
  admitted -= n
  // In arrival order: the head waits for its slots, as a FIFO scheduler does.
  while (queue.length > 0 && fits(queue[0]!.n)) {
    const next = queue.shift()!
    start(next.n, next.run)
  }
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://localhost")
  if (req.method === "GET") {
    if (url.pathname === "/stats") {
      const body = JSON.stringify({ admit, latencyMs, connections, requests: sequence, samples })
      if (url.searchParams.get("reset") === "1") {
        samples = []
        connections = 0
        sequence = 0
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(body)
      return
    }
    if (url.pathname === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ object: "list", data: [{ id: "bench-model", object: "model" }] }))
      return
    }
    res.writeHead(200)
    res.end()
    return
  }
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    let n = 1
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { readonly n?: unknown }
      if (typeof body.n === "number" && Number.isInteger(body.n) && body.n > 0) n = body.n
    } catch {
      // Not JSON: answered as one sequence, like any other.
    }
    const run = () => {
      const timer = setTimeout(() => {
        answer(res, url.pathname.endsWith("/chat/completions"), n)
        release(n)
      }, latencyMs)
      // A client that gives up frees its places at once, as a real server aborts the sequences.
      res.on("close", () => {
        if (!res.writableEnded) {
          clearTimeout(timer)
          release(n)
        }
      })
    }
    if (queue.length === 0 && fits(n)) start(n, run)
    else queue.push({ n, run })
  })
})
server.on("connection", () => connections++)
server.keepAliveTimeout = 60_000
server.headersTimeout = 0
server.requestTimeout = 0
setInterval(() => samples.push([Date.now(), admitted, queue.length]), sampleMs).unref()
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  console.log(`listening on http://127.0.0.1:${port}`)
})
// The benchmark holds our stdin: when it ends, so do we.
process.stdin.on("end", () => process.exit(0))
process.stdin.on("close", () => process.exit(0))
process.stdin.resume()
