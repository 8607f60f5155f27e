/**
 * Client throughput: requests per second against the loopback OpenAI-compatible server (a separate process, so
 * the server and the client each have a core), keep-alive connections, 64 requests in flight; non-streaming, and
 * streaming with 200 content chunks per answer. valet's `OpenAiCompatible` (undici through `effect/http`)
 * side by side with the official `openai` package on the same server in the same run. Each cell is the median
 * over fresh worker processes, each warming up before it is timed.
 *
 *   npx tsx bench/client.ts [--quick]
 */
import { NodeHttpClient } from "@effect/platform-node"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Effect, Layer, Stream } from "effect"
import OpenAI from "openai"
import { Model, OpenAiCompatible } from "valet"
import { runWorker } from "./support/processes.js"
import { type Report, type Row, summarize, writeReport } from "./support/report.js"

const script = "bench/client.ts"
const inFlight = 64
const chunksPerAnswer = 200
const messages = [{ role: "user" as const, content: "Write two hundred words." }]

type Mode = "generate" | "stream"

/** What a worker measures: throughput, and the client's own CPU time per request (less sensitive to other load). */
interface Measured {
  readonly rps: number
  readonly cpuUsPerRequest: number
}

const measured = (started: number, cpu: NodeJS.CpuUsage, total: number): Measured => {
  const used = process.cpuUsage(cpu)
  return {
    rps: (total * 1000) / (performance.now() - started),
    cpuUsPerRequest: (used.user + used.system) / total
  }
}

/** Sends `total` requests with `inFlight` of them in flight at any time; answers requests per second. */
const valetWorker = async (url: string, mode: Mode, warmup: number, total: number): Promise<Measured> => {
  const request: Model.Request = { messages }
  const one = mode === "generate"
    ? Effect.asVoid(Model.generate(request))
    : Stream.runDrain(Model.stream(request))
  const batch = (n: number) => Effect.forEach(Array.from({ length: n }), () => one, { concurrency: inFlight, discard: true })
  const program = Effect.gen(function*() {
    yield* batch(warmup)
    const started = performance.now()
    const cpu = process.cpuUsage()
    yield* batch(total)
    return measured(started, cpu, total)
  })
  const layer = OpenAiCompatible.layer({ baseUrl: url, model: "loopback-model", maxAttempts: 1 }).pipe(
    Layer.provide(NodeHttpClient.layerUndici)
  )
  return Effect.runPromise(Effect.provide(program, layer))
}

const openaiWorker = async (url: string, mode: Mode, warmup: number, total: number): Promise<Measured> => {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
  const one = async () => {
    if (mode === "generate") {
      await client.chat.completions.create({ model: "loopback-model", messages })
    } else {
      const stream = await client.chat.completions.create({
        model: "loopback-model",
        messages,
        stream: true,
        stream_options: { include_usage: true }
      })
      for await (const _ of stream) {
        // drained, as valet's Stream.runDrain does
      }
    }
  }
  const batch = async (n: number) => {
    let next = 0
    await Promise.all(Array.from({ length: Math.min(inFlight, n) }, async () => {
      while (next < n) {
        next++
        await one()
      }
    }))
  }
  await batch(warmup)
  const started = performance.now()
  const cpu = process.cpuUsage()
  await batch(total)
  return measured(started, cpu, total)
}

const workers = { valet: valetWorker, openai: openaiWorker } as const

/** Starts the loopback server as its own process; answers its URL and the process. */
const startServer = (): Promise<{ readonly url: string; readonly child: ChildProcess }> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(new URL("../test/support/openAiServer.ts", import.meta.url)), "--words", String(chunksPerAnswer)],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    child.stdout!.on("data", (data: Buffer) => {
      out += data.toString()
      const match = /listening on (\S+)/.exec(out)
      if (match !== null) resolve({ url: match[1]!, child })
    })
    child.on("exit", (code) => reject(new Error(`the loopback server exited with ${code}`)))
  })

const cells: ReadonlyArray<readonly [client: keyof typeof workers, mode: Mode, label: string]> = [
  ["valet", "generate", "valet OpenAiCompatible"],
  ["openai", "generate", "openai (official)"],
  ["valet", "stream", "valet OpenAiCompatible"],
  ["openai", "stream", "openai (official)"]
]

const measureOf = (mode: Mode) =>
  mode === "generate" ? `non-streaming, ${inFlight} in flight` : `streaming ${chunksPerAnswer} chunks, ${inFlight} in flight`

/** Runs every cell and writes `bench/results/client.json`. */
export const main = async (quick: boolean): Promise<Report> => {
  const server = await startServer()
  const processes = quick ? 1 : 3
  // 20k non-streaming requests per sample (the issue's figure; ~20 s a sample). Streamed answers are 200 chunks
  // each, about six times slower: 3,000 per sample keeps the run to minutes. Three fresh processes per cell, in
  // alternation so that a change of load hits both clients alike.
  const sizes: Record<Mode, { warmup: number; total: number }> = quick
    ? { generate: { warmup: 200, total: 1_000 }, stream: { warmup: 100, total: 300 } }
    : { generate: { warmup: 2_000, total: 20_000 }, stream: { warmup: 300, total: 3_000 } }
  const samples = new Map<string, Array<Measured>>()
  try {
    for (let p = 0; p < processes; p++) {
      for (const [client, mode, label] of cells) {
        const { warmup, total } = sizes[mode]
        const result = runWorker<Measured>(script, [client, mode, server.url, String(warmup), String(total)])
        const key = `${label}|${mode}`
        samples.set(key, [...(samples.get(key) ?? []), result])
        process.stderr.write(`  client: ${label} ${mode}: ${result.rps.toFixed(0)} requests/s, ${result.cpuUsPerRequest.toFixed(0)} µs CPU/request\n`)
      }
    }
  } finally {
    server.child.kill()
  }
  const rows: Array<Row> = []
  for (const [, mode, label] of cells) {
    const measured = samples.get(`${label}|${mode}`)!
    rows.push(summarize(label, measureOf(mode), "requests/s", measured.map((m) => m.rps)))
  }
  for (const [, mode, label] of cells) {
    const measured = samples.get(`${label}|${mode}`)!
    rows.push(summarize(label, `${measureOf(mode)}: client CPU`, "µs/request", measured.map((m) => m.cpuUsPerRequest)))
  }
  const at = (label: string, measure: string) => rows.find((row) => row.framework === label && row.measure === measure)!.value
  const ratio = (measure: string) => at("valet OpenAiCompatible", measure) / at("openai (official)", measure)
  return writeReport({
    name: "client",
    description: `OpenAI-compatible client on loopback (median of ${processes} process${processes > 1 ? "es" : ""} per cell)`,
    rows,
    notes: [
      `throughput valet / openai: non-streaming ${ratio(measureOf("generate")).toFixed(2)}×, streaming ${ratio(measureOf("stream")).toFixed(2)}× (above 1: valet is faster)`,
      `client CPU per request valet / openai: non-streaming ${ratio(`${measureOf("generate")}: client CPU`).toFixed(2)}×, streaming ${ratio(`${measureOf("stream")}: client CPU`).toFixed(2)}× (below 1: valet is cheaper)`,
      `requests per sample: ${sizes.generate.total} non-streaming, ${sizes.stream.total} streaming (after ${sizes.generate.warmup} / ${sizes.stream.warmup} warm-up requests); the server is its own process`
    ]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  const [, client, mode, url, warmup, total] = args
  const result = await workers[client as keyof typeof workers](url!, mode as Mode, Number(warmup), Number(total))
  console.log(JSON.stringify(result))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  await main(args.includes("--quick"))
}
