/**
 * Serving under load (issue 14): `valet serve` (the built CLI, its own process) with one ReAct agent on the real
 * OpenAI-compatible client, against the loopback model server of bench/support/fanoutServer.ts (50 ms before each
 * streamed answer, its own process). N runs are started at once with `POST /runs/stream` and read to their end
 * by this process. Measured: time to the first event of each run (p50 / p99), events per second over the whole
 * burst, the wall time, and the server's resident memory (VmRSS) before, at its peak, and after the runs end
 * (the registry keeps the last 100 finished runs, as configured by default). RSS keeps what the allocator took, so
 * the heap after a full GC, burst after burst, is measured too (bench/support/serveHeap.ts, in-process, scripted
 * model): flat means bounded.
 *
 *   npx tsx bench/serve.ts [--quick]      # needs `npm run build` first (npm run bench does it)
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { type Row, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const runs = quick ? 50 : 200
const latencyMs = 50

const startChild = (args: ReadonlyArray<string>, pattern: RegExp, stream: "stdout" | "stderr") =>
  new Promise<{ readonly url: string; readonly pid: number; readonly stop: () => void }>((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["pipe", stream === "stdout" ? "pipe" : "inherit", stream === "stderr" ? "pipe" : "inherit"] })
    child.on("error", reject)
    child.on("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}`)))
    createInterface({ input: (stream === "stdout" ? child.stdout : child.stderr)! }).on("line", (line) => {
      const match = pattern.exec(line)
      if (match !== null) resolve({ url: match[1]!, pid: child.pid!, stop: () => child.kill("SIGKILL") })
    })
  })

/** Resident memory of a process, in MB. */
const rssMb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024
}

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

/** One streamed run: time to its first event, and how many events it had. */
const streamedRun = async (url: string, i: number): Promise<{ readonly firstEventMs: number; readonly events: number }> => {
  const started = performance.now()
  const response = await fetch(`${url}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ agent: "assistant", input: `Question ${i}: what is the capital of France?` })
  })
  if (response.status !== 200) throw new Error(`run ${i}: HTTP ${response.status}: ${await response.text()}`)
  let firstEventMs = -1
  let text = ""
  const decoder = new TextDecoder()
  for await (const chunk of response.body!) {
    if (firstEventMs < 0) firstEventMs = performance.now() - started
    text += decoder.decode(chunk, { stream: true })
  }
  const events = text.split("\n\n").filter((frame) => frame.startsWith("id: ")).length
  if (!text.includes("event: RunCompleted")) throw new Error(`run ${i} did not complete: ${text.slice(-300)}`)
  return { firstEventMs, events }
}

const main = async () => {
  const model = await startChild(["--import", "tsx", "bench/support/fanoutServer.ts", "--latency-ms", String(latencyMs), "--exit-with-stdin"], /^listening on (.*)$/, "stdout")
  const dir = mkdtempSync(join(tmpdir(), "valet-bench-serve-"))
  const config = join(dir, "valet.yaml")
  writeFileSync(config, [
    `model: { provider: openai-compatible, baseUrl: "${model.url}/v1", model: fanout-model }`,
    "agents:",
    "  assistant: { instructions: Answer in one sentence. }",
    `server: { maxConcurrentRuns: ${runs + 16} }`,
    ""
  ].join("\n"))
  const server = await startChild(["bin/valet.js", "serve", "--config", config, "--port", "0"], /agents at (http:\/\/\S+) /, "stderr")
  try {
    // Warm up: the first run pays for connections and JIT.
    await Promise.all(Array.from({ length: 5 }, (_, i) => streamedRun(server.url, i)))
    await new Promise((resolve) => setTimeout(resolve, 500))
    // The HTTP stack alone, for reference: as many plain requests at once.
    const health = await Promise.all(Array.from({ length: runs }, async () => {
      const started = performance.now()
      await (await fetch(`${server.url}/health`)).text()
      return performance.now() - started
    }))
    const before = rssMb(server.pid)
    let peak = before
    const sampler = setInterval(() => void (peak = Math.max(peak, rssMb(server.pid))), 20)
    const started = performance.now()
    const results = await Promise.all(Array.from({ length: runs }, (_, i) => streamedRun(server.url, i)))
    const wallMs = performance.now() - started
    clearInterval(sampler)
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const after = rssMb(server.pid)
    // Two more bursts: bounded memory means the resident size stops growing once the registry is full.
    const afterBursts: Array<number> = []
    for (let burst = 2; burst <= 3; burst++) {
      await Promise.all(Array.from({ length: runs }, (_, i) => streamedRun(server.url, i)))
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      afterBursts.push(rssMb(server.pid))
    }
    const firsts = results.map((result) => result.firstEventMs)
    const events = results.reduce((sum, result) => sum + result.events, 0)
    const rows: Array<Row> = [
      { framework: "valet", measure: `time to first event, p50 (${runs} concurrent runs)`, value: percentile(firsts, 50), unit: "ms" },
      { framework: "valet", measure: `time to first event, p99 (${runs} concurrent runs)`, value: percentile(firsts, 99), unit: "ms" },
      { framework: "plain", measure: `GET /health, p50 (${runs} concurrent requests)`, value: percentile(health, 50), unit: "ms" },
      { framework: "plain", measure: `GET /health, p99 (${runs} concurrent requests)`, value: percentile(health, 99), unit: "ms" },
      { framework: "valet", measure: `wall time of ${runs} runs (model ${latencyMs} ms per call)`, value: wallMs, unit: "ms" },
      { framework: "valet", measure: "events streamed per second", value: events / (wallMs / 1000), unit: "events/s" },
      { framework: "valet", measure: "server RSS before the burst", value: before, unit: "MB" },
      { framework: "valet", measure: "server RSS at the peak", value: peak, unit: "MB" },
      { framework: "valet", measure: "server RSS 3 s after the runs ended", value: after, unit: "MB" },
      { framework: "valet", measure: "server RSS after a 2nd burst", value: afterBursts[0]!, unit: "MB" },
      { framework: "valet", measure: "server RSS after a 3rd burst", value: afterBursts[1]!, unit: "MB" }
    ]
    const heapRuns = quick ? 50 : runs
    const heapBursts = quick ? 3 : 8
    const heap = JSON.parse(execFileSync(process.execPath, [
      "--expose-gc", "--import", "tsx", "bench/support/serveHeap.ts", "--runs", String(heapRuns), "--bursts", String(heapBursts)
    ], { encoding: "utf8" }).trim().split("\n").at(-1)!) as { heapAfterBurstMb: Array<number>; rssAfterBurstMb: Array<number> }
    rows.push(
      { framework: "valet", measure: `heap after GC, after burst 1 of ${heapRuns} runs`, value: heap.heapAfterBurstMb[0]!, unit: "MB" },
      { framework: "valet", measure: `heap after GC, after burst ${heapBursts}`, value: heap.heapAfterBurstMb.at(-1)!, unit: "MB" }
    )
    writeReport({
      name: "serve",
      description: `valet serve: ${runs} runs streamed at once (POST /runs/stream), one ReAct call each against a loopback model server with ${latencyMs} ms latency`,
      rows,
      notes: [
        `${events} events in all (${(events / runs).toFixed(1)} per run); the registry keeps the last 100 finished runs`,
        `heap after GC per burst: ${heap.heapAfterBurstMb.join(", ")} MB; RSS ${heap.rssAfterBurstMb.join(", ")} MB`
      ]
    })
  } finally {
    server.stop()
    model.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
