/**
 * A minimal OpenAI-compatible chat server for the fan-out benchmark: a fixed latency per completion, and replies
 * computed from the request so that the Ensemble's phases get the answers the benchmark needs whatever order
 * requests arrive in (test/support/openAiServer.ts answers the same text to everyone, or from queues in arrival
 * order). Plain `node:http` and a separate process, so the server's own work does not share the measured event loop.
 *
 * - a solver (`You are solver <i>.` in its user or system message) asking for n completions gets `FINAL: <(i − 1)·n + j>` for
 *   choice j: every completion a distinct answer;
 * - a critic (`A solver proposed…`) gets `{"risk": 0.2}`;
 * - a judge (`Judge a proposed…`) gets confidence 0.9 for the answer `0`, 0.2 for the others: one clear winner;
 * - anything else gets a twelve-word sentence.
 *
 * With `stream: true` the answer comes as SSE chunks (a role delta, one delta per word, the finish, the usage,
 * `[DONE]`), the first after the latency: what `vllm serve` sends.
 *
 *   node --import tsx bench/support/fanoutServer.ts --latency-ms 50   # prints "listening on <url>"
 *
 * With `--exit-with-stdin` it exits when its stdin closes (bench/fanout.ts starts it so: no server outlives the bench).
 */
import { createServer } from "node:http"

interface ChatRequest {
  readonly n?: number
  readonly stream?: boolean
  readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: string }>
}

const reply = (request: ChatRequest): Array<string> => {
  const messages = request.messages ?? []
  const user = messages.filter((message) => message.role === "user").at(-1)?.content ?? ""
  const system = messages.find((message) => message.role === "system")?.content ?? ""
  const n = request.n ?? 1
  if (user.includes("A solver proposed")) return [`{"risk": 0.2, "notes": "plausible"}`]
  if (user.includes("Judge a proposed")) {
    const answer = /Proposed answer: (.*)/.exec(user)?.[1]?.trim()
    return [answer === "0" ? `{"score": 0.9, "confidence": 0.9}` : `{"score": 0.2, "confidence": 0.2}`]
  }
  // The solver's prompt: after the problem in its user message (the Ensemble puts the shared part first), or a system
  // message.
  const solver = /You are solver (\d+)\./.exec(`${system}\n${user}`)
  if (solver !== null) {
    const base = (Number(solver[1]) - 1) * n
    return Array.from({ length: n }, (_, j) => `Working.\nFINAL: ${base + j}`)
  }
  return Array.from({ length: n }, () => "Paris is the capital of France, a city on the Seine river.")
}

/** Starts the server on a free loopback port; answers its URL and a function that stops it. */
export const start = (latencyMs: number): Promise<{ readonly url: string; readonly close: () => void }> =>
  new Promise((resolve) => {
    let sequence = 0
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        let body: ChatRequest = {}
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest
        } catch {
          // An empty or broken body gets the default answer.
        }
        const texts = reply(body)
        const payload = JSON.stringify({
          id: `fanout-${++sequence}`,
          object: "chat.completion",
          created: 1_700_000_000,
          model: "fanout-model",
          choices: texts.map((content, index) => ({ index, message: { role: "assistant", content }, finish_reason: "stop" })),
          usage: { prompt_tokens: 20, completion_tokens: 5 * texts.length, total_tokens: 20 + 5 * texts.length }
        })
        if (body.stream === true) {
          const id = `fanout-${++sequence}`
          const chunk = (choices: Array<unknown>, usage?: unknown) =>
            `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1_700_000_000, model: "fanout-model", choices, ...(usage !== undefined ? { usage } : {}) })}\n\n`
          setTimeout(() => {
            res.writeHead(200, { "content-type": "text/event-stream" })
            const frames = [chunk(texts.map((_, index) => ({ index, delta: { role: "assistant", content: "" } })))]
            texts.forEach((text, index) => {
              for (const word of text.split(/(?<= )/)) frames.push(chunk([{ index, delta: { content: word } }]))
              frames.push(chunk([{ index, delta: {}, finish_reason: "stop" }]))
            })
            frames.push(chunk([], { prompt_tokens: 20, completion_tokens: 5 * texts.length, total_tokens: 20 + 5 * texts.length }))
            res.end(frames.join("") + "data: [DONE]\n\n")
          }, latencyMs)
          return
        }
        setTimeout(() => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(payload)
        }, latencyMs)
      })
    })
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({ url: `http://127.0.0.1:${port}`, close: () => server.close() })
    })
  })

if (import.meta.url === `file://${process.argv[1]}`) {
  const at = process.argv.indexOf("--latency-ms")
  const latency = at >= 0 ? Number(process.argv[at + 1]) : 50
  void start(latency).then(({ url }) => console.log(`listening on ${url}`))
  // Started by a benchmark that holds our stdin: when the benchmark ends, however it ends, the pipe closes and so do we.
  if (process.argv.includes("--exit-with-stdin")) {
    process.stdin.on("end", () => process.exit(0))
    process.stdin.on("close", () => process.exit(0))
    process.stdin.resume()
  }
}
