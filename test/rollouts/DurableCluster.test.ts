/**
 * Durable evaluations across processes (DESIGN §10), with real processes throughout: a throwaway PostgreSQL
 * server, three `valet runner` processes on loopback, `valet eval --durable` as the client, and a loopback model
 * server that answers a Self-Refine evaluation deterministically and counts requests by call key.
 *
 * One runner at a time is killed with SIGKILL at three points of a 60-problem evaluation (and started again). The
 * evaluation completes; a call stored before a kill is never sent again (a call sent twice was in flight at a kill,
 * at most once more per kill it was in flight for); the records equal those of an uninterrupted evaluation
 * against the same server. The same with one process on SQLite, killed mid-run and started again.
 *
 * A durable thread turn whose runner is killed after its last model call and before its append: another runner
 * resumes it; the thread holds the turn once, and the model server saw each call once.
 */
import { PgClient } from "@effect/sql-pg"
import { expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as Model from "../../src/core/Model.js"
import * as Threads from "../../src/core/Threads.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as Durable from "../../src/rollouts/Durable.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import * as ScriptedServer from "../support/scriptedModelServer.js"
import { freePort, startScript, startValet, type ValetProcess } from "../support/valetProcess.js"

const runnerChild = join(import.meta.dirname, "..", "support", "durableRunnerChild.ts")
const turnRunnerChild = join(import.meta.dirname, "..", "support", "durableTurnRunnerChild.ts")

const problems = 60
const evalArgs = ["--architecture", "self_refine", "--max-rounds", "2"]

/** The records of a results file by id, without the one field that differs between two runs: latency. */
const recordsOf = (file: string): Map<string, Record<string, unknown>> => {
  const records = new Map<string, Record<string, unknown>>()
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") continue
    const { latency_ms: _, ...record } = JSON.parse(line) as Record<string, unknown>
    records.set(String(record.id), record)
  }
  return records
}

interface Fixture {
  readonly dir: string
  readonly dataset: string
  readonly server: ScriptedServer.ScriptedModelServer
  /** The records of an uninterrupted, non-durable evaluation. */
  readonly reference: Map<string, Record<string, unknown>>
  /** Requests of that evaluation. */
  readonly referenceCalls: number
}

const withFixture = <A>(latencyMs: number, body: (fixture: Fixture) => Promise<A>): Promise<A> =>
  (async () => {
    const dir = mkdtempSync(join(tmpdir(), "valet-durable-"))
    const server = await ScriptedServer.start({ latencyMs })
    try {
      const dataset = join(dir, "problems.jsonl")
      writeFileSync(dataset, ScriptedServer.dataset(problems))
      const plain = startValet(["eval", dataset, ...evalArgs, "--concurrency", "12", "--out", join(dir, "plain.jsonl"), "--base-url", server.url, "--model", "scripted"])
      expect(await plain.exited).toBe(0)
      const referenceCalls = server.total()
      server.reset()
      return await body({ dir, dataset, server, reference: recordsOf(join(dir, "plain.jsonl")), referenceCalls })
    } finally {
      await server.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })()

/** The ids of the problems in a results file (none when there is no file yet). */
const recordedIn = (out: string): Set<string> => {
  const recorded = new Set<string>()
  try {
    for (const line of readFileSync(out, "utf8").split("\n")) {
      if (line.trim() !== "") recorded.add((JSON.parse(line) as { id: string }).id)
    }
  } catch {
    // No results file yet: nothing is finished.
  }
  return recorded
}

/** The unfinished problems' calls among `latest` (a problem's text → its latest call key). */
const unfinishedCalls = (fixture: Fixture, latest: Iterable<readonly [string, string]>, finished: ReadonlySet<string>): Set<string> => {
  const problemOf = new Map<string, string>()
  for (const line of readFileSync(fixture.dataset, "utf8").split("\n")) {
    if (line.trim() === "") continue
    const problem = JSON.parse(line) as { id: string; problem: string }
    problemOf.set(problem.problem, problem.id)
  }
  const keys = new Set<string>()
  for (const [problem, key] of latest) {
    if (!finished.has(problemOf.get(problem)!)) keys.add(key)
  }
  return keys
}

/**
 * The calls a run may be waiting on at a kill: each unfinished problem's latest call (sent and not answered, or
 * answered and not yet stored). Problems already in the results file are finished.
 */
const inFlightAt = (fixture: Fixture, out: string): Set<string> =>
  unfinishedCalls(fixture, fixture.server.latestByProblem, recordedIn(out))

/**
 * The calls a killed process may have been waiting on: its latest call of each problem not finished before the kill.
 * Another runner may take such a problem further within the moment after the kill (a takeover is that quick), so it
 * is no longer the problem's latest call; it was still one the killed process had sent and not stored.
 */
const waitingOn = (fixture: Fixture, sender: string, finished: ReadonlySet<string>): Set<string> =>
  unfinishedCalls(fixture, fixture.server.latestBySender.get(sender) ?? [], finished)

/**
 * Every call of the uninterrupted run was sent, and a call sent more than once was in flight at a kill — once more
 * at most per kill it was in flight for.
 */
const checkCalls = (fixture: Fixture, inFlightAtKills: ReadonlyArray<ReadonlySet<string>>) => {
  const repeated: Array<string> = []
  for (const [key, count] of fixture.server.counts) {
    if (count === 1) continue
    const kills = inFlightAtKills.filter((keys) => keys.has(key)).length
    expect(kills, `call ${key} was sent ${count} times but was in flight at no kill`).toBeGreaterThan(0)
    expect(count, `call ${key} was sent ${count} times, in flight at ${kills} kills`).toBeLessThanOrEqual(1 + kills)
    repeated.push(key)
  }
  expect(fixture.server.counts.size).toBe(fixture.referenceCalls)
  return repeated
}

/**
 * Lets the server take in the requests a killed process wrote before it died (they are in the loopback socket's
 * buffers): the call the process was waiting on is then its problem's latest call.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 200))

const until = async (condition: () => boolean, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

describePostgres("Durable evaluation on PostgreSQL with three runners", () => {
  it.live("a 60-problem evaluation survives a runner killed with SIGKILL at three points: no stored call sent again, the records of an uninterrupted run", () =>
    Effect.gen(function*() {
      const store = yield* freshDatabase
      yield* Effect.promise(() =>
        withFixture(150, async (fixture) => {
          const runners = new Map<number, ValetProcess>()
          const startRunner = async (name: number) => {
            const runner = startValet([
              "runner", "--store", store,
              "--base-url", fixture.server.url, "--model", "scripted", "--api-key", `runner-${name}`
            ])
            runners.set(name, runner)
            await runner.waitFor(/valet runner: serving/)
          }
          const ports = [1, 2, 3]
          try {
            await Promise.all(ports.map(startRunner))
            const out = join(fixture.dir, "durable.jsonl")
            const client = startValet(["eval", fixture.dataset, ...evalArgs, "--concurrency", "12", "--out", out, "--durable", store])
            let clientDone = false
            void client.exited.then(() => (clientDone = true))
            const inFlightAtKills: Array<Set<string>> = []
            const killed: Array<number> = []
            for (const share of [0.2, 0.45, 0.7]) {
              // Killed while it waits on a call of a problem with calls stored: without durability, those stored
              // calls would be sent again.
              let victim: string | undefined
              await until(
                () => {
                  if (clientDone) throw new Error(`the evaluation ended before the kill at ${share * 100} %:\n${client.lines.join("\n")}`)
                  if (fixture.server.total() < share * fixture.referenceCalls) return false
                  // From here the evaluation waits for the kill: later calls are held in flight until the victim is
                  // started again (a loaded machine ran past a kill point between two polls).
                  fixture.server.holdLaterCalls(true)
                  return (victim = fixture.server.senderWithLaterCallInFlight()) !== undefined
                },
                60_000,
                `${share * 100} % of the calls`
              )
              const port = Number(victim!.replace("runner-", ""))
              const finishedBefore = recordedIn(out)
              runners.get(port)!.kill("SIGKILL")
              await runners.get(port)!.exited
              await settle()
              // The killed runner's calls in flight are among these (the others' are too, which only loosens the check).
              inFlightAtKills.push(new Set([...inFlightAt(fixture, out), ...waitingOn(fixture, victim!, finishedBefore)]))
              killed.push(port)
              await startRunner(port)
              fixture.server.holdLaterCalls(false)
            }
            expect(await client.exited, client.lines.join("\n")).toBe(0)
            const records = recordsOf(out)
            expect(records.size).toBe(problems)
            expect(records).toEqual(fixture.reference)
            const repeated = checkCalls(fixture, inFlightAtKills)
            console.log(
              `durable cluster: ${fixture.referenceCalls} calls, killed runners ${killed.map((port) => ports.indexOf(port) + 1).join("/")}, in flight at the kills ${inFlightAtKills.map((keys) => keys.size).join("/")}, ` +
                `sent again ${repeated.length}`
            )
          } finally {
            for (const runner of runners.values()) runner.kill("SIGKILL")
            await Promise.all([...runners.values()].map((runner) => runner.exited))
          }
        })
      )
    }), 240_000)
})

it.live("SQLite: one process killed with SIGKILL mid-evaluation and started again finishes without resending stored calls", () =>
  Effect.promise(() =>
    withFixture(50, async (fixture) => {
      const store = join(fixture.dir, "durable.db")
      const out = join(fixture.dir, "durable.jsonl")
      const args = ["eval", fixture.dataset, ...evalArgs, "--concurrency", "12", "--out", out, "--durable", store, "--base-url", fixture.server.url, "--model", "scripted"]
      const first = startValet(args)
      await until(
        () => {
          if (fixture.server.total() < 0.5 * fixture.referenceCalls) return false
          // Held there until the kill (see the cluster test).
          fixture.server.holdLaterCalls(true)
          return fixture.server.senderWithLaterCallInFlight() !== undefined
        },
        60_000,
        "half of the calls"
      )
      first.kill("SIGKILL")
      await first.exited
      await settle()
      const inFlight = inFlightAt(fixture, out)
      fixture.server.holdLaterCalls(false)
      const second = startValet(args)
      expect(await second.exited, second.lines.join("\n")).toBe(0)
      expect(recordsOf(out)).toEqual(fixture.reference)
      const repeated = checkCalls(fixture, [inFlight])
      console.log(`durable sqlite: ${fixture.referenceCalls} calls, in flight at the kill ${inFlight.size}, sent again ${repeated.length}`)
    })
  ), 120_000)

describePostgres("Durable runners on a fresh PostgreSQL database", () => {
  it.live("three runners with their task-state store (as `valet runner` builds them), started at once on an empty database, all start", () =>
    Effect.gen(function*() {
      // A guard: valet's engine and stores create their tables under an advisory lock (two `CREATE TABLE IF NOT
      // EXISTS` at once can both fail on PostgreSQL's catalog). The stores' race itself is shown by their own tests.
      for (let round = 0; round < 3; round++) {
        const url = yield* freshDatabase
        const exits = yield* Effect.forEach(
          [1, 2, 3],
          () =>
            Effect.scoped(Effect.exit(Layer.build(
              StateStore.layerSql().pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url })))
            ))),
          { concurrency: "unbounded" }
        )
        expect(exits.flatMap((exit) => (Exit.isFailure(exit) ? [Cause.pretty(exit.cause).split("\n")[0]] : []))).toEqual([])
      }
    }), 120_000)

  it.live(
    "a runner killed with SIGKILL has its runs taken over by the others within a few seconds; each run ends once",
    () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase
        const runners = [1, 2, 3].map(() => startScript(runnerChild, [url]))
        yield* Effect.addFinalizer(() =>
          Effect.promise(async () => {
            for (const runner of runners) runner.kill("SIGKILL")
            await Promise.all(runners.map((runner) => runner.exited))
          })
        )
        yield* Effect.promise(() => Promise.all(runners.map((runner) => runner.waitFor(/^listening$/))))
        // Each runner knows the others once they have beaten (1 s): runs then fall to all three.
        yield* Effect.sleep("1500 millis")
        const victim = runners[0]!
        const runIds = Array.from({ length: 24 }, (_, i) => `run-${i + 1}`)
        const work = yield* Effect.forEach(
          runIds,
          (runId) => Durable.AgentRun.execute({ agent: "worker", prompt: "Go.", runId }),
          { concurrency: "unbounded" }
        ).pipe(Effect.provide(Durable.layerPostgresClient({ url })), Effect.forkScoped)
        // Killed as it starts running its share of the work.
        yield* Effect.promise(() => victim!.waitFor(/^call run-\d+ react\.turn_1$/))
        victim!.kill("SIGKILL")
        yield* Effect.promise(() => victim!.exited)
        const started = new Set(victim!.lines.flatMap((line) => /^call (run-\d+) /.exec(line)?.[1] ?? []))
        const finished = new Set(victim!.lines.flatMap((line) => /^call (run-\d+) react\.turn_3$/.exec(line)?.[1] ?? []))
        const takenOver = [...started].filter((runId) => !finished.has(runId))
        expect(takenOver.length).toBeGreaterThan(0)
        // The bound, counted in polls rather than timed: 40 polls 250 ms apart. The killed runner's session ends
        // with it, so the next runner to beat (1 s) frees its runs; the rest is their replays and last calls (each
        // 200 ms). With effect/cluster (valet's engine before) this took 33-43 polls, 124-146 with its defaults.
        let polls = 0
        while (work.pollUnsafe() === undefined) {
          if (++polls > 40) {
            return yield* Effect.die(new Error(`the killed runner's runs ${takenOver.join(", ")} were not taken over after ${polls - 1} polls`))
          }
          yield* Effect.sleep("250 millis")
        }
        console.log(`durable takeover: ${takenOver.length} runs of the killed runner finished by the others after ${polls} polls`)
        const results = yield* Fiber.join(work)
        expect(results.map((result) => result.output)).toEqual(runIds.map(() => "done"))
        // Each run the victim had started was finished by another runner.
        const survivors = runners.filter((runner) => runner !== victim)
        for (const runId of takenOver) {
          expect(survivors.some((runner) => runner.lines.includes(`call ${runId} react.turn_3`)), runId).toBe(true)
        }
        // No run ran on two live runners: the survivors made each run's last call once between them.
        const lastCalls = survivors.flatMap((runner) => runner.lines.filter((line) => line.endsWith(" react.turn_3")))
        expect(new Set(lastCalls).size).toBe(lastCalls.length)
        // The work fell to all three runners.
        expect(runners.filter((runner) => runner.lines.some((line) => line.startsWith("call "))).length).toBe(3)
      }).pipe(Effect.scoped),
    120_000
  )
})

describePostgres("Durable thread turns on PostgreSQL: a runner killed mid-turn", () => {
  const user = (content: string): Model.Message => ({ role: "user", content })
  const reply = (content: string): Model.Message => ({ role: "assistant", content })

  it.live(
    "a runner killed (SIGKILL) after a turn's last model call and before its append: another resumes it; the thread holds the turn once, no model call sent again",
    () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase
        const server = yield* Effect.acquireRelease(Effect.promise(() => ScriptedServer.start()), (server) => Effect.promise(() => server.close()))
        const dir = mkdtempSync(join(tmpdir(), "valet-durable-turn-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        // One runner at a time: the first does the turn up to its append and is killed there; the second, started
        // after, resumes it. (Two runners started together move shards between them for a while after they start,
        // which interrupts and moves a turn at any point: not the point this test is about.)
        const runners: Array<ValetProcess> = []
        const startRunner = Effect.promise(async () => {
          // The first append of a turn, on whichever runner makes it, never returns (see durableTurnRunnerChild.ts).
          const runner = startScript(turnRunnerChild, [url, String(await freePort()), server.url, join(dir, "held")])
          runners.push(runner)
          await runner.waitFor(/^listening$/)
          return runner
        })
        yield* Effect.addFinalizer(() =>
          Effect.promise(async () => {
            for (const runner of runners) runner.kill("SIGKILL")
            await Promise.all(runners.map((runner) => runner.exited))
          })
        )
        const turn = (runId: string, prompt: string) =>
          Durable.AgentRun.execute({ agent: "assistant", prompt, runId, thread: { id: "chat", owner: "ada" } })
        yield* Effect.gen(function*() {
          yield* Threads.create({ id: "chat", owner: "ada" })
          yield* Threads.append("chat", [user("Hello."), reply("Hi.")])
          const held = yield* startRunner
          const first = yield* Effect.forkScoped(turn("turn-1", "What is 2 + 3?"))
          yield* Effect.promise(() => held.waitFor(/^appending chat$/))
          // The turn's one model call was answered and stored before its append began.
          expect(server.total()).toBe(1)
          held.kill("SIGKILL")
          yield* Effect.promise(() => held.exited)
          expect((yield* Threads.messages("chat")).total).toBe(2)
          // Another runner resumes the turn: its lease taken back at once (held under the turn's key), its model call
          // answered from storage, its messages appended.
          yield* startRunner
          const result = yield* Fiber.join(first)
          expect(result.output).toBe("FINAL: 5")
          const turnOne = [user("Hello."), reply("Hi."), user("What is 2 + 3?"), reply("FINAL: 5")]
          expect((yield* Threads.messages("chat")).messages).toEqual(turnOne)
          expect([...server.counts.values()]).toEqual([1])
          // The next turn runs at once (the lease was given back) on the thread holding the first turn once.
          expect((yield* turn("turn-2", "What is 4 + 4?")).output).toBe("FINAL: 8")
          expect((yield* Threads.messages("chat")).messages).toEqual([...turnOne, user("What is 4 + 4?"), reply("FINAL: 8")])
          expect([...server.counts.values()]).toEqual([1, 1])
        }).pipe(Effect.provide(Layer.merge(
          Durable.layerPostgresClient({ url }),
          Threads.layerSql.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))
        )))
      }).pipe(Effect.scoped),
    120_000
  )
})
