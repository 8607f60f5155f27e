/**
 * Fan-out efficiency of the Ensemble (DESIGN §9, issue 6): the Ensemble against a loopback OpenAI-compatible
 * server with a fixed 50 ms per call (bench/support/fanoutServer.ts, run as its own process), through the real
 * `OpenAiCompatible` client, `concurrency` 16, solvers asked for `n` = 4 completions each (one call each).
 *
 * Every completion is a distinct answer, so 3 solvers × 4 give 12 distinct answers: 3 solver calls, then 12 critic
 * calls, then 12 judge calls (27). The phases depend on each other (critics need the answers, judges the
 * critiques), so the best any scheduler can do is ceil(calls in the phase / 16) × 50 ms per phase: that sum is the
 * ideal the wall time is divided by. The issue's `ceil(all calls / 16) × 50 ms` treats the 27 calls as independent,
 * which a phased ensemble cannot reach (its floor is three waves); it is printed beside, for reference. A second
 * case, 8 solvers × 4 (32 critics and 32 judges: two waves each), checks the cap of 16 without gaps between waves.
 *
 * The same calls are also sent phase by phase by hand (`Effect.forEach` with concurrency 16, no Ensemble): on a
 * busy machine that floor is well above the ideal, and Ensemble ÷ hand-scheduled isolates what the Ensemble adds.
 * Last, the Ensemble's own CPU cost per model call, on `ScriptedModel` with no latency at all.
 *
 *   npx tsx bench/fanout.ts [--quick]
 */
import { spawn } from "node:child_process"
import { loadavg } from "node:os"
import { createInterface } from "node:readline"
import { Effect, Layer } from "effect"
import { Agent, Ensemble, Model, OpenAiCompatible, ScriptedModel } from "valet"
import { type Row, summarize, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const latencyMs = 50
const concurrency = 16
const n = 4

/**
 * Starts bench/support/fanoutServer.ts as a child process; answers its URL and a way to stop it. The child holds
 * our stdin pipe and exits when it closes, so it cannot outlive us however we end (an early exit, Ctrl-C, a SIGKILL
 * from a timeout); on a normal or `process.exit` ending we also kill it at once.
 */
const startServer = (): Promise<{ url: string; stop: () => void }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "bench/support/fanoutServer.ts", "--latency-ms", String(latencyMs), "--exit-with-stdin"], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    const stop = () => {
      child.stdin?.end()
      child.kill("SIGKILL")
    }
    process.once("exit", stop)
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      process.once(signal, () => {
        stop()
        process.exit(130)
      })
    }
    child.on("error", reject)
    child.on("exit", (code) => reject(new Error(`the fan-out server exited with ${code}`)))
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const match = /^listening on (.*)$/.exec(line)
      if (match !== null) resolve({ url: match[1]!, stop })
    })
  })

const ideal = (calls: number) => Math.ceil(calls / concurrency) * latencyMs

const main = async () => {
  const server = await startServer()
  const program = Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: server.url, model: "fanout-model", maxAttempts: 1 }))
    const model = Layer.succeedContext(context)
    const rows: Array<Row> = []
    for (const solverCount of [3, 8]) {
      const label = `${solverCount} solvers × n=${n}`
      const distinct = solverCount * n
      const calls = solverCount + 2 * distinct
      const solvers = Array.from({ length: solverCount }, (_, i) => ({ name: `s${i + 1}`, prompt: `You are solver ${i + 1}.` }))
      const ensemble = yield* Effect.orDie(Ensemble.make({ solvers, n, concurrency, maxRounds: 1, maxCalls: 1_000 }))
      const agent = Agent.make({ name: "fanout", instructions: "", architecture: ensemble, model })

      const viaEnsemble = Effect.gen(function*() {
        const started = performance.now()
        const result = yield* Agent.run(agent, "Pick a number.")
        const wall = performance.now() - started
        if (result.modelCalls !== calls || result.metadata.accepted !== true) {
          return yield* Effect.die(new Error(`unexpected run: ${result.modelCalls} calls, accepted ${String(result.metadata.accepted)}`))
        }
        return wall
      })
      // The same requests, phase by phase, with no Ensemble: what this client and machine allow.
      const send = (request: Model.Request) => Model.generate(request).pipe(Effect.provide(context))
      const byHand = Effect.gen(function*() {
        const started = performance.now()
        yield* Effect.forEach(solvers, (solver) =>
          send({ messages: [Model.user(`Pick a number.\n\n${solver.prompt}`)], n }), { concurrency })
        yield* Effect.forEach(Array.from({ length: distinct }, (_, k) => k), (k) =>
          send({ messages: [Model.user(`A solver proposed an answer.\nProposed answer: ${k}`)] }), { concurrency })
        yield* Effect.forEach(Array.from({ length: distinct }, (_, k) => k), (k) =>
          send({ messages: [Model.user(`Judge a proposed answer.\nProposed answer: ${k}`)] }), { concurrency })
        return performance.now() - started
      })

      const warmups = quick ? 1 : 3
      const runs = quick ? 3 : 20
      for (let i = 0; i < warmups; i++) {
        yield* Effect.orDie(viaEnsemble)
        yield* Effect.orDie(byHand)
      }
      const walls: Array<number> = []
      const hand: Array<number> = []
      // Alternated, so a change in the machine's load affects both alike.
      for (let i = 0; i < runs; i++) {
        walls.push(yield* Effect.orDie(viaEnsemble))
        hand.push(yield* Effect.orDie(byHand))
      }
      const phaseIdeal = ideal(solverCount) + 2 * ideal(distinct)
      const flatIdeal = ideal(calls)
      rows.push(
        summarize("valet", `${label}: Ensemble wall time (${calls} calls)`, "ms", walls),
        summarize("valet", `${label}: Ensemble ÷ per-phase ideal (${phaseIdeal} ms)`, "ratio", walls.map((w) => w / phaseIdeal)),
        summarize("valet", `${label}: Ensemble ÷ ceil(calls/16)×50 ms (${flatIdeal} ms)`, "ratio", walls.map((w) => w / flatIdeal)),
        summarize("client", `${label}: same calls by hand, wall time`, "ms", hand),
        summarize("client", `${label}: by hand ÷ per-phase ideal`, "ratio", hand.map((w) => w / phaseIdeal)),
        summarize("valet", `${label}: Ensemble ÷ by hand`, "ratio", walls.map((w, i) => w / hand[i]!))
      )
    }
    // The Ensemble's own cost: the same 27-call run on a zero-latency scripted model.
    let answer = 0
    const scripted = ScriptedModel.layer((request): ScriptedModel.Turn => {
      const user = Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")
      if (user.includes("A solver proposed")) return `{"risk": 0.2, "notes": "plausible"}`
      if (user.includes("Judge a proposed")) {
        return /Proposed answer: 0$/m.test(user) ? `{"score": 0.9, "confidence": 0.9}` : `{"score": 0.2, "confidence": 0.2}`
      }
      return `Working.\nFINAL: ${answer++}`
    })
    const solvers = Array.from({ length: 3 }, (_, i) => ({ name: `s${i + 1}`, prompt: `You are solver ${i + 1}.` }))
    const ensemble = yield* Effect.orDie(Ensemble.make({ solvers, n, concurrency, maxRounds: 1, maxCalls: 1_000 }))
    const agent = Agent.make({ name: "fanout", instructions: "", architecture: ensemble })
    const once = Effect.suspend(() => {
      answer = 0
      return Agent.run(agent, "Pick a number.").pipe(Effect.provide(scripted))
    })
    const samples: Array<number> = []
    for (let sample = 0; sample < (quick ? 3 : 10); sample++) {
      const runs = quick ? 5 : 50
      if (sample === 0) for (let i = 0; i < runs; i++) yield* Effect.orDie(once)
      const started = performance.now()
      for (let i = 0; i < runs; i++) {
        const result = yield* Effect.orDie(once)
        if (result.modelCalls !== 27) return yield* Effect.die(new Error(`unexpected scripted run: ${result.modelCalls} calls`))
      }
      samples.push(((performance.now() - started) * 1000) / runs / 27)
    }
    rows.push(summarize("valet", "3 solvers × n=4 on ScriptedModel (no latency): Ensemble cost per model call", "µs", samples))
    return rows
  }))
  try {
    const rows = await Effect.runPromise(program)
    writeReport({
      name: "fanout",
      description: `Ensemble fan-out against a loopback server with ${latencyMs} ms per call, concurrency ${concurrency}, ` +
        `n = ${n}, through OpenAiCompatible (${quick ? "quick: 3 runs" : "median of 20 runs after 3 warm-ups"})`,
      rows,
      notes: [
        "per-phase ideal: Σ over the solver, critic and judge phases of ceil(calls in the phase / 16) × 50 ms",
        "ceil(calls/16)×50 ms (the issue's formula) treats every call as independent: three dependent phases cannot go below three waves",
        "by hand: the same requests sent phase by phase with Effect.forEach (concurrency 16) and no Ensemble: the floor of this client on this machine",
        `target (issue 6): Ensemble ÷ ideal ≤ 1.10; load average during the run: ${loadavg().map((l) => l.toFixed(1)).join(" / ")} on ${
          (await import("node:os")).cpus().length
        } cpus`
      ]
    })
  } finally {
    server.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
