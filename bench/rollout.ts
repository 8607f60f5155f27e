/**
 * Rollout throughput (issue 31 part 7): `valet rollout`'s run path (`runRollout`: the tasks file, `ActorLoop.run`
 * with `--group 8 --max-steps 6`, the progress line, the real `Vllm` client, SQLite state and JSONL trajectories)
 * with 256 episodes in flight (32 tasks × 8) against a loopback vLLM-like server (bench/support/vllmLikeServer.ts, a
 * process of its own) that admits K requests at once and answers each 200 ms after admitting it, queuing the rest.
 * The sandbox is `Sandbox.layerTest` (the model's command answered in memory): this measures valet's loop, not
 * process spawning (bench/sandbox.ts does that).
 *
 * Saturation = mean requests being served ÷ K over the run's steady part, sampled by the server every 5 ms. The
 * steady part is the serving span: from the first sample with a request being served to the last one (what comes
 * before, building the layers and reading the tasks, and after, the summary, is not the loop's pace). The request
 * counts are multiples of K, so a client that sends each step's request the moment the last one is answered keeps K
 * served from the first wave to the last: ≈ 1. Every gap between a step's answer and the next step's request shows. Also: wall time ÷ the ideal `ceil(requests / K) × 200 ms`, episodes/s and steps/s. Target: saturation
 * ≥ 0.95 on 2 cores.
 *
 * Measured 2026-11-27 on 2 cores shared with other work (load average 3–8), medians of 3 runs:
 * | state store (trajectories: JSONL files)          | K=64 saturation | K=64 steps/s | K=256 saturation | K=256 steps/s |
 * | SQLite file, synchronous FULL (before)           | 0.55            | 136          | 0.11             | 125           |
 * | SQLite file, synchronous NORMAL (now the default) | 0.99            | 305          | 0.43             | 516           |
 * | SQLite `:memory:` (`--memory state-sqlite`)      | 0.99            | 302          | —                | —             |
 * | in memory (`--memory state`, load 8)             | 0.93            | 273          | 0.25             | 236           |
 * The rows above were measured with a server that ignored `n` (each group's shared first request answered one choice,
 * the other 7 members then asking alone). With `n` answered and counted as n slots (as vLLM does), SQLite NORMAL,
 * load 3–4: K=64 1.00 (309 steps/s), K=256 0.64 (796 steps/s, 1.2 ms of CPU a step).
 * Where the time went: `node:sqlite` is synchronous, and the state store committed each step's state update in WAL
 * mode with SQLite's default `synchronous = FULL`: an fsync of the WAL on the event loop per step, which on a busy
 * disk stalled every episode (the CPU profile's top entries were `StatementSync.all` / `run` under SqliteClient, 40 %
 * of the samples). The stores now commit with `synchronous = NORMAL` (internal/sqliteStores.ts). K=256 needs 1,280
 * steps/s from one event loop, ≈ 0.8 ms a step; a step costs 1.5–2 ms of this process's CPU, spread thin (GC 7 %,
 * SQLite 4 %, socket and file writes 4 %, then the Effect runtime and schema decoding): the loop itself about
 * 0.27 ms a step (ActorLoop.run on ScriptedModel with memory stores), the HTTP client about 0.8 ms a request
 * (bench/client.ts), the stores the rest. On 2 loaded cores K=256 is out of reach; K=64 is saturated.
 * Since then (issue 31 part 7, the per-step path): the server answers with `Content-Length` as vLLM does (a chunked
 * body had sent the client down its capped streaming read: an AbortController abort and a DOMException per request);
 * the trajectory record is encoded once, by a hand-written encoder held to the schema's text (internal/recordJson.ts);
 * the JSONL store keeps each task's file open; a non-streamed answer of the common shape skips the schema decode
 * (fastCheck.ts); the step span captures no stack trace. Then (round 2): the `Vllm` pool routes without a probe when
 * every actor's health is fresh (its `Effect.forEach` over the actors forked a fiber and took a probe lock on every
 * call, ~8.5 µs); the JSONL store commits in groups (appends asked while a task's line is being written share the
 * next write: about 2 records a write here, a group's members finishing together). A longer warm-up was tried and
 * dropped (see `warmupPath`). Counted in the measured run (async_hooks and fiber ids: exact where timings are not):
 * fibers 4.6 -> 3.8 a step, file-system requests 1.28 -> 0.80 a step.
 * Where a step's CPU goes (30-step episodes, compiled dist/): this thread ~0.8 ms, V8's helper threads (GC, the
 * optimizing compiler) ~0.2, libuv's pool 0.02. Half of it is the HTTP call: on loopback with 256 in flight
 * (load 4–9) undici alone costs 140–210 µs of CPU a request, `effect/http` over undici 260–420 (an AbortController
 * and its abort listener, a FinalizationRegistry entry and a wrapper per response, the URL parsed, a `runSync` fiber
 * and an `Effect.cached` fiber per body read — none of it optional in effect 4.1: `HttpClient.withScope` instead
 * aborts every request when its scope closes, a DOMException each), valet's `Vllm` call 400–510 (the request and
 * answer JSON, the attempt's timeout race: two fibers and a timer, ~12 µs; the call's span and trace headers). The
 * profile's top entries (% of busy samples): the Effect runtime 30 % (effect.js 19–22, core.js 5, Context 3.5,
 * spread over every combinator), undici 10, the trajectory file's `write` 3–5 (the write itself: its share grows
 * with the machine's load), the socket's `writev` 3–4, GC 3.5–4, effect/http 4, the step program 3.5, JSON parsing
 * 2. Group members keep their state in memory (a store of their own per episode): the SQLite state store does no
 * work a step here.
 * Measured 2026-11-27, K=256, alternating base and new runs (one measured run each) on 2 cores at load 3–9 from
 * other work: CPU a step, 30-step episodes, 0.89 -> 0.81 ms (medians of 9 pairs; the pairs' differences range
 * -0.32 to +0.20, median -0.06), 6-step episodes 1.10 -> 1.10 (6 pairs); saturation 0.26–0.78 in both, by the load:
 * at this load the bench does not resolve the change, the counts above do. Earlier at load 1.5–3.5: 6-step K=64
 * 1.00 (311 steps/s), K=256 0.61 (660 steps/s, 1.2 ms a step); 30-step K=256 0.81 (1,011 steps/s, 0.85 ms a
 * step). K=256 at 200 ms needs 1,280 steps/s from one event loop: ≈ 0.6–0.7 ms a step with the server on the other
 * core; at load 3+ this process gets well under a core, and saturation follows its share. `--processes 2` (two processes, a shard each) with 30-step episodes: 0.74 (735
 * steps/s, 1.54 ms a step counting both processes): slower on 2 cores — each process starts and warms its JIT again
 * (about 1.5 s of CPU each, every run) and the vLLM-like server needs the second core.
 * Measured 2026-11-27 (later), K=256, load 0.6–2.2, medians of 3 runs, variants run in turn. The requests' times
 * (undici's diagnostics channels, middle of the run, Little's law) showed the client kept each request 5.6–8.6 ms
 * between its creation and its write and 209–215 ms between its write and its answer being read (the server takes
 * 200), while the event loop was busy only 0.63–0.74 of the time. Three changes, each measured on the last (30-step
 * episodes, two rounds; saturation / its middle / CPU a step / event loop p99 delay / created -> written):
 * - base (effa162): 0.87, 0.88 / 0.89, 0.90 / 0.71, 0.71 ms / 18.7, 18.0 ms / 6.3, 5.6 ms;
 * - the JSONL store made an error (a stack trace) at every write, in case the write did not complete; now only
 *   then: 0.90, 0.89 / 0.93, 0.93 / 0.56, 0.62 / 12.7, 15.0 / 3.7, 3.9;
 * - a step goes on after its model answer as a turn of the scheduler, not inside the socket's read callback (step.ts):
 *   0.92, 0.90 / 0.95, 0.94 / 0.57, 0.58 / 12.4, 13.9 / 2.4, 2.8;
 * - `ActorLoop.run` runs its episodes on a paced scheduler (src/rollouts/internal/pacing.ts: ready work first in first
 *   out, 1 ms a turn of the loop): 0.93, 0.90, 0.91, 0.92, 0.92 / 0.96, 0.93, 0.95, 0.96, 0.96 / 0.60–0.66 /
 *   6.1, 7.5 / 1.5, 1.8. Its own share of the saturation is within the noise; the loop's delay halves.
 * 6-step episodes, 2 pairs: K=256 0.77 / 0.75 -> 0.84 / 0.80 (the first wave, all 256 answers at once, and the
 * drain are most of such a run); K=64 1.00 both. What is left a request in the middle of a run: 4–9 ms between its
 * answer being read and the next request (its step's turn in the queue, and the trajectory line's write, a file system
 * call answered a turn of the loop later), 1.5–2 ms to its write, 2–5 ms of reading delay: about 4 % of a 210 ms
 * cycle. Tried and dropped: waking the appends a group write settled directly instead of through the task's lock (no
 * change in the append's time: the write's own turn of the loop dominates); a pump that started a second pump for work
 * queued during its slice (pumps doubled with a backlog: no better than one slice a turn, 0.90–0.92 against
 * 0.91–0.92 over three more pairs); Node's `http` client instead of undici (0.64); `--processes 2` (0.86).
 *
 * Why a whole run stays below its middle (measured 2026-11-27): with as many episodes as K, the first wave's answers
 * come back together, and the client's event loop takes c ≈ 0.55 ms a step (event loop busy × wall ÷ steps) to send
 * the next requests, so the second wave leaves spread over 256·c ≈ 140 ms and the last wave's answers drain over as
 * long. Over a run of T = steps × 200 ms that costs about 256·c of every episode's time: saturation ≤ T ÷ (T + 256·c),
 * 0.89 for 6 steps and 0.98 for 30, before the waits of each request in the middle (about 4 %, above). Measured:
 * 0.79–0.84 (930–1,020 steps/s) and 0.87–0.94 (0.90–0.94 in three runs today). The bound reaches 0.95 over a
 * 6-step run at c ≤ 0.25 ms a step; with the middle's 4 % on top, a whole 6-step run at 0.95 would need c ≤ 0.05 ms
 * (or the middle's waits gone as well).
 *
 * Where the knee is (measured 2026-11-28, load 0.5–1.4, medians of 3 runs, ranges in brackets): whole run / its
 * middle. 6-step episodes: K=64 1.00 / 1.00 (312 steps/s), K=128 1.00 / 1.00 (608), K=160 0.87 (0.87–0.94) / 1.00,
 * K=192 0.88 (0.88–0.94) (818), K=256 0.81 (0.81–0.84) (1,001). 30-step episodes: K=128 1.00 / 1.00 (633), K=192
 * 0.97 (0.97–0.98) / 1.00 (924), K=256 0.89 (0.89–0.93) / 0.94 (0.92–0.96) (1,115). Up to K=192 (three quarters of
 * the episodes) the server is kept full in the middle of a run; a short run's whole at K=160–192 counts its first
 * wave's turnaround and its last waves, partial because the episodes that waited in the server's queue end later.
 *
 * It runs the compiled modules (dist/), as `valet rollout` does: `npm run build` first (`npm run bench` does it). Run
 * from src/ through tsx, every closure a step makes also went through esbuild's `__name`, in the CPU and the profiles.
 *
 *   npx tsx bench/rollout.ts [--quick] [--admit 64,256] [--runs n] [--steps n] [--processes n] [--memory state,trajectories] [--cpu-prof <path prefix>]
 */
import "./support/freshDist.js"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import diagnosticsChannel from "node:diagnostics_channel"
import { Session } from "node:inspector"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import { createInterface } from "node:readline"
import type { Output } from "../dist/cli/internal/output.js"
import { runRollout } from "../dist/cli/internal/rollout.js"
import type { Summary } from "../dist/cli/internal/rolloutReport.js"
import { runProcesses } from "../dist/cli/internal/rolloutProcesses.js"
import * as Sandbox from "../dist/environment/Sandbox.js"
import * as StateStore from "../dist/environment/StateStore.js"
import * as TrajectoryStore from "../dist/environment/TrajectoryStore.js"
import * as Vllm from "../dist/providers/Vllm.js"
import { type Row, summarize, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const admitArg = process.argv.indexOf("--admit")
const admits = admitArg >= 0 ? process.argv[admitArg + 1]!.split(",").map(Number) : quick ? [128] : [64, 128, 192, 256]
const latencyMs = 200
const tasks = 32
const group = 8
// `--steps n`: steps per episode (default 6): a longer run weighs a process's start (module loading, a cold JIT) less,
// which `--processes` pays once per process and per run.
const stepsArg = process.argv.indexOf("--steps")
const maxSteps = stepsArg >= 0 ? Number(process.argv[stepsArg + 1]) : quick ? 2 : 6
const runsArg = process.argv.indexOf("--runs")
const runs = runsArg >= 0 ? Number(process.argv[runsArg + 1]) : quick ? 1 : 3
// `--memory state,trajectories` (either or both): that store in memory, to tell its share from the rest of the loop;
// `--memory state-sqlite`: the SQLite state store on an in-memory database (`--state-db :memory:`): SQL without a disk.
const memoryArg = process.argv.indexOf("--memory")
const inMemory = memoryArg >= 0 ? process.argv[memoryArg + 1]!.split(",") : []
// `--processes n`: each measured run is `valet rollout --processes n`'s (runProcesses: n processes of
// bench/support/rolloutProcess.ts, each a shard), not one process; CPU per step then counts the processes' too.
const processesArg = process.argv.indexOf("--processes")
const processes = processesArg >= 0 ? Number(process.argv[processesArg + 1]) : 1

/** User + system CPU of this process and of its children that ended (`/proc/self/stat` cutime + cstime), in ms. */
const childrenCpuMs = (): number => {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ")
  // After the command's name: field 3 is index 0; cutime and cstime are fields 16 and 17, in clock ticks (100 a second).
  return (Number(fields[13]) + Number(fields[14])) * 10
}

interface Server {
  readonly url: string
  readonly stats: () => Promise<{
    readonly connections: number
    readonly requests: number
    readonly samples: ReadonlyArray<readonly [number, number, number]>
  }>
  readonly stop: () => void
}

/** Starts the server as a child that exits when our stdin pipe to it closes (we die: it dies). */
const startServer = (admit: number): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "bench/support/vllmLikeServer.ts", "--admit", String(admit), "--latency-ms", String(latencyMs)], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    const stop = () => {
      child.stdin?.end()
      child.kill("SIGKILL")
    }
    process.once("exit", stop)
    child.on("error", reject)
    child.on("exit", (code) => reject(new Error(`the vLLM-like server exited with ${code}`)))
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const match = /^listening on (.*)$/.exec(line)
      if (match === null) return
      const url = match[1]!
      resolve({
        url,
        stats: () =>
          fetch(`${url}/stats?reset=1`).then((res) =>
            res.json() as Promise<{ connections: number; requests: number; samples: Array<[number, number, number]> }>
          ),
        stop
      })
    })
  })

/**
 * Mean served ÷ K over the steady part (see the module comment), and over its middle (the first and last second
 * left out: the first wave's answers, all at once, and the drain, episodes ending); the window's length too.
 */
const saturation = (samples: ReadonlyArray<readonly [number, number, number]>, admit: number, from: number, to: number) => {
  const inRun = samples.filter(([t]) => t >= from && t <= to)
  const first = inRun.findIndex(([, served]) => served > 0)
  let last = -1
  for (let i = inRun.length - 1; i >= 0 && last === -1; i--) if (inRun[i]![1] > 0) last = i
  if (first === -1) return { value: 0, middle: 0, windowMs: 0 }
  const window = inRun.slice(first, last + 1)
  const mean = (part: ReadonlyArray<readonly [number, number, number]>) => part.reduce((sum, [, served]) => sum + served, 0) / part.length / admit
  const start = window[0]![0]
  const end = window[window.length - 1]![0]
  const middle = window.filter(([t]) => t >= start + 1000 && t <= end - 1000)
  return { value: mean(window), middle: middle.length > 0 ? mean(middle) : Number.NaN, windowMs: end - start }
}

// `--cpu-prof <path prefix>`: a CPU profile of the first measured run of each K (not the warm-up, not module loading).
const profileArg = process.argv.indexOf("--cpu-prof")
const profileTo = profileArg >= 0 ? process.argv[profileArg + 1] : undefined
const session = new Session()
const post = (method: string, params?: object) =>
  new Promise<unknown>((resolve, reject) => session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))))
const profiler = {
  start: async () => {
    session.connect()
    await post("Profiler.enable")
    await post("Profiler.setSamplingInterval", { interval: 200 })
    await post("Profiler.start")
  },
  stop: async (path: string) => {
    const { profile } = await post("Profiler.stop") as { profile: unknown }
    writeFileSync(path, JSON.stringify(profile))
    session.disconnect()
    console.error(`CPU profile: ${path}`)
  }
}

/**
 * Where a request's time goes, from undici's diagnostics channels (this process's requests: with `--processes` there
 * are none here). Each event is timed; over the middle of the run (the first and last second left out: the first wave
 * and the drain) the mean number of requests in each state, divided by the answers a millisecond, is the mean time a
 * request spends in it (Little's law), without matching events to requests:
 * - `written → answer read`: the request on the wire, at the server (`latencyMs`), and the answer waiting to be read;
 * - `answer read → next created`: the episode's step (its CPU, and waiting for its turn);
 * - `created → written`: the request waiting in undici for its connection (on a reused one, for a check phase).
 */
const undiciEvents: Array<number> = []
const onEvent = (kind: number) => () => {
  undiciEvents.push(performance.now(), kind)
}
diagnosticsChannel.subscribe("undici:client:sendHeaders", onEvent(0))
diagnosticsChannel.subscribe("undici:request:trailers", onEvent(1))
diagnosticsChannel.subscribe("undici:request:create", onEvent(2))

const requestTimes = (episodes: number) => {
  if (undiciEvents.length === 0) return undefined
  const first = undiciEvents[0]!
  const last = undiciEvents[undiciEvents.length - 2]!
  const from = first + 1000
  const to = last - 1000
  if (to <= from) return undefined
  let created = 0
  let written = 0
  let read = 0
  let answers = 0
  let at = from
  const area = { wire: 0, step: 0, queued: 0 }
  for (let i = 0; i < undiciEvents.length; i += 2) {
    const t = undiciEvents[i]!
    const kind = undiciEvents[i + 1]!
    if (t > from && t < to) {
      const dt = t - at
      at = t
      area.wire += dt * (written - read)
      area.queued += dt * (created - written)
      area.step += dt * (episodes - (created - read))
      if (kind === 1) answers++
    }
    if (kind === 0) written++
    else if (kind === 1) read++
    else created++
  }
  return { wire: area.wire / answers, step: area.step / answers, queued: area.queued / answers, answersPerMs: answers / (to - from) }
}

const quiet: Output = { tty: false, line: () => Effect.void, status: () => Effect.void }

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "valet-bench-rollout-"))
  const rows: Array<Row> = []
  const notes: Array<string> = []
  try {
    const tasksPath = join(dir, "tasks.jsonl")
    writeFileSync(
      tasksPath,
      Array.from({ length: tasks }, (_, i) => JSON.stringify({ task_id: `task-${i}`, prompt: `Task ${i}: make the tests pass.`, seed: i * 100 }))
        .join("\n") + "\n"
    )
    // The warm-up: every task, one step each (modules loaded), under other task ids. The
    // process keeps warming after it: the first measured run costs more than the next ones (this thread 0.6–0.9 ms a
    // step against 0.44–0.73 in the third, V8's helper threads — the optimizing compiler, the old generation's first
    // collections — 0.29–0.37 against 0.10–0.17, 6-step runs at load 8–9), and a warm-up of six seeded steps, the
    // measured run's whole path, did not change that. The medians of 3 include it.
    const warmupPath = join(dir, "warmup.jsonl")
    writeFileSync(warmupPath, Array.from({ length: tasks }, (_, i) => JSON.stringify({ task_id: `warm-${i}`, prompt: `Task ${i}.` })).join("\n") + "\n")
    for (const admit of admits) {
      const server = await startServer(admit)
      try {
        const config = join(dir, `actors-${admit}.yaml`)
        writeFileSync(config, `actors:\n  - name: bench\n    base_url: ${server.url}\n    model: bench-model\n    api: openai\ntimeout_sec: 120\n`)
        const sat: Array<number> = []
        const middles: Array<number> = []
        const wires: Array<number> = []
        const stepTimes: Array<number> = []
        const queuedTimes: Array<number> = []
        const loopUse: Array<number> = []
        const loopDelayP99: Array<number> = []
        const walls: Array<number> = []
        const ideals: Array<number> = []
        const episodesPerSecond: Array<number> = []
        const stepsPerSecond: Array<number> = []
        const cpuPerStep: Array<number> = []
        // Run -1 warms up (modules loaded and compiled on first use): not measured. Each run builds its layers, so each
        // opens its own connections, as a `valet rollout` does.
        for (let run = -1; run < runs; run++) {
          const root = join(dir, `run-${admit}-${run}`)
          const layer = Layer.mergeAll(
            Vllm.layerNode({ configPath: config }),
            Sandbox.layerTest(() => ({ stdout: "1\n" })),
            inMemory.includes("state")
              ? StateStore.layerMemory()
              : StateStore.layerSqlite({ filename: inMemory.includes("state-sqlite") ? ":memory:" : join(root, "state.db") }),
            inMemory.includes("trajectories")
              ? TrajectoryStore.layerMemory
              : TrajectoryStore.layerFile({ root: join(root, "trajectories") }).pipe(Layer.provide(NodeFileSystem.layer))
          )
          await server.stats()
          if (profileTo !== undefined && run === 0) await profiler.start()
          const started = Date.now()
          const cpu = process.cpuUsage()
          undiciEvents.length = 0
          const loop = performance.eventLoopUtilization()
          const delay = monitorEventLoopDelay({ resolution: 1 })
          delay.enable()
          const childrenCpu = childrenCpuMs()
          const path = run === -1 ? warmupPath : tasksPath
          const settings = { concurrency: tasks * group, group, maxSteps: run === -1 ? 1 : maxSteps }
          const summary = await Effect.runPromise<Summary, unknown>(
            (processes > 1
              ? runProcesses(
                path,
                settings,
                processes,
                { executable: process.execPath, args: ["bench/support/rolloutProcess.ts"] },
                ["rollout", path, "--config", config, "--state-db", join(root, "state.db"), "--trajectories", join(root, "trajectories"),
                  "--group", String(group), "--max-steps", String(settings.maxSteps)],
                quiet
              )
              : runRollout(path, settings, layer, quiet) as Effect.Effect<Summary, unknown, NodeServices.NodeServices>).pipe(Effect.provide(NodeServices.layer))
          )
          const ended = Date.now()
          delay.disable()
          const utilization = performance.eventLoopUtilization(loop).utilization
          const own = process.cpuUsage(cpu)
          const used = { user: own.user + (childrenCpuMs() - childrenCpu) * 1000, system: own.system }
          if (profileTo !== undefined && run === 0) await profiler.stop(`${profileTo}-K${admit}.cpuprofile`)
          const { connections, requests, samples } = await server.stats()
          if (run === -1) continue
          if (summary.failed > 0 || summary.steps !== tasks * group * maxSteps) {
            throw new Error(`unexpected run: ${summary.failed} failed, ${summary.steps} steps`)
          }
          const s = saturation(samples, admit, started, ended)
          const wall = ended - started
          const ideal = Math.ceil(summary.steps / Math.min(admit, tasks * group)) * latencyMs
          sat.push(s.value)
          // A run shorter than two seconds of serving has no middle.
          if (Number.isFinite(s.middle)) middles.push(s.middle)
          const times = requestTimes(tasks * group)
          if (times !== undefined) {
            wires.push(times.wire)
            stepTimes.push(times.step)
            queuedTimes.push(times.queued)
          }
          loopUse.push(utilization)
          loopDelayP99.push(delay.percentile(99) / 1e6)
          walls.push(wall)
          ideals.push(wall / ideal)
          episodesPerSecond.push((summary.done * 1000) / wall)
          stepsPerSecond.push((summary.steps * 1000) / wall)
          cpuPerStep.push((used.user + used.system) / 1000 / summary.steps)
          notes.push(`K=${admit} run ${run + 1}: ${summary.steps} steps in ${wall} ms (ideal ${ideal} ms), steady window ${s.windowMs} ms, ${requests} requests on ${connections} new connections`)
        }
        const label = `K=${admit}, ${tasks}×${group} episodes × ${maxSteps} steps${processes > 1 ? `, ${processes} processes` : ""}`
        rows.push(
          summarize("valet", `${label}: saturation (served ÷ K, steady part)`, "ratio", sat),
          ...(middles.length > 0 ? [summarize("valet", `${label}: saturation, its middle (first and last second left out)`, "ratio", middles)] : []),
          summarize("valet", `${label}: wall ÷ ceil(requests/K)×${latencyMs} ms`, "ratio", ideals),
          summarize("valet", `${label}: episodes/s`, "1/s", episodesPerSecond),
          summarize("valet", `${label}: steps/s`, "1/s", stepsPerSecond),
          summarize("valet", `${label}: CPU per step (${processes > 1 ? "the processes and this process" : "this process"})`, "ms", cpuPerStep),
          summarize("valet", `${label}: event loop busy (utilization)`, "ratio", loopUse),
          summarize("valet", `${label}: event loop delay, p99`, "ms", loopDelayP99)
        )
        if (wires.length > 0) {
          rows.push(
            summarize("valet", `${label}: a request, written → answer read (middle)`, "ms", wires),
            summarize("valet", `${label}: a request, answer read → next created (middle)`, "ms", stepTimes),
            summarize("valet", `${label}: a request, created → written (middle)`, "ms", queuedTimes)
          )
        }
      } finally {
        server.stop()
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  writeReport({
    name: "rollout",
    description: `valet rollout's run path, ${tasks * group} episodes in flight against a vLLM-like server admitting K at once, ` +
      `${latencyMs} ms each (${quick ? "quick: one run" : `median of ${runs} runs`})`,
    rows,
    notes: [
      "saturation: the server's mean requests being served ÷ K, sampled every 5 ms, from the first request served to the last",
      `target (issue 31): saturation ≥ 0.95 on 2 cores; the sandbox is Sandbox.layerTest, state ${
        inMemory.includes("state") ? "in memory" : inMemory.includes("state-sqlite") ? "SQLite :memory:" : "SQLite"
      }, trajectories ${inMemory.includes("trajectories") ? "in memory" : "JSONL files"}`,
      ...notes,
      `load average during the run: ${loadavg().map((l) => l.toFixed(1)).join(" / ")} on ${cpus().length} cpus`
    ]
  })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
