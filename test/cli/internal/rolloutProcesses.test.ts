import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Option } from "effect"
import { inShard, parseShard, shardOf } from "../../../src/cli/internal/shard.js"
import { processArguments } from "../../../src/cli/internal/rolloutProcesses.js"
import { valet } from "../../support/cli.js"
import * as LoopbackServer from "../../support/openAiServer.js"
import { marker, processesWith } from "../../support/processes.js"
import { tempDir } from "../../support/tempDir.js"
import { startValet } from "../../support/valetProcess.js"
import { testIsolation } from "../../support/processes.js"

// The command's sandbox is the real one: on a machine without bubblewrap its commands run as plain processes (as the
// sandbox suites do there; `valet` says so on stderr), inherited by the processes these tests start.
if (testIsolation === "process") process.env["VALET_SANDBOX_ISOLATION"] = "process"

const poolFile = (server: LoopbackServer.LoopbackServer) =>
  `actors:\n  - name: one\n    base_url: ${server.url}\n    model: loopback-model\n    api: openai\n`

const taskLines = (ids: ReadonlyArray<string>) => ids.map((id) => JSON.stringify({ task_id: id, prompt: `Do ${id}.` })).join("\n") + "\n"

/** The trajectory lines of each task file under `<dir>/raw`, by task id. */
const trajectories = (dir: string): Record<string, ReadonlyArray<Record<string, unknown>>> =>
  Object.fromEntries(
    (existsSync(join(dir, "raw")) ? readdirSync(join(dir, "raw")) : [])
      .filter((name) => name.endsWith(".jsonl"))
      .map((name) => [
        name.slice(0, -".jsonl".length),
        readFileSync(join(dir, "raw", name), "utf8").trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
      ])
  )

describe("--shard i/n", () => {
  it.prop("every task id is in exactly one shard of n, the one shardOf names", {
    id: Schema.String,
    count: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 64 }))
  }, ({ count, id }) => {
    const owners = Array.from({ length: count }, (_, index) => index).filter((index) => inShard({ index, count }, id))
    expect(owners).toEqual([shardOf(id, count)])
  })

  it("parses i/n with 0 <= i < n <= 1024 and refuses anything else", () => {
    expect(parseShard("2/8")).toEqual(Option.some({ index: 2, count: 8 }))
    expect(parseShard("0/1")).toEqual(Option.some({ index: 0, count: 1 }))
    for (const bad of ["8/8", "0/0", "-1/4", "1/1025", "a/b", "1", "1/2/3", "1.5/4", ""]) expect(parseShard(bad), bad).toEqual(Option.none())
  })

  it("the split is stable: these ids land where they always have (shards run on other machines must agree)", () => {
    expect(["task-0", "task-1", "task-2", "task-3", "a", "é"].map((id) => shardOf(id, 4))).toEqual([1, 2, 3, 0, 0, 0])
  })

  it.live("two actor-loop runs given 0/2 and 1/2 run each task once between them", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir("valet-shard-")
      const pool = write("pool.yaml", poolFile(server))
      const ids = Array.from({ length: 8 }, (_, i) => `task-${i}`)
      const tasks = write("tasks.jsonl", taskLines(ids))
      const common = ["--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "traj"), "--work-root", dir]
      const zero = yield* valet(["actor-loop", tasks, ...common, "--shard", "0/2"])
      const one = yield* valet(["actor-loop", tasks, ...common, "--shard", "1/2"])
      expect([zero.code, one.code]).toEqual([0, 0])
      expect(zero.out).toContain(`actor-loop: ${ids.filter((id) => shardOf(id, 2) === 0).length} tasks from ${tasks} (shard 0/2)`)
      const written = trajectories(join(dir, "traj"))
      expect(Object.keys(written).sort()).toEqual(ids)
      for (const id of ids) expect(written[id]!.length, id).toBe(1)
      const bad = yield* valet(["actor-loop", tasks, ...common, "--shard", "2/2"])
      expect(bad.code).toBe(2)
      expect(bad.errors.join("\n")).toMatch(/--shard takes i\/n with 0 <= i < n <= 1024 \(shard i of n, e\.g\. 0\/4\), got "2\/2"/)
    }).pipe(Effect.scoped), 60_000)
})

describe("valet rollout --processes", () => {
  it("a process's arguments: the parent's without --processes, --progress and --concurrency, then its shard", () => {
    expect(processArguments(["rollout", "t.jsonl", "--processes", "2", "--group=8", "--progress=line", "--concurrency", "9", "--verbose"], { index: 1, count: 2 }, 5))
      .toEqual(["rollout", "t.jsonl", "--group=8", "--verbose", "--shard", "1/2", "--concurrency", "5", "--progress", "json"])
    expect(processArguments(["rollout", "t.jsonl", "--processes=3"], { index: 0, count: 3 }, 2))
      .toEqual(["rollout", "t.jsonl", "--shard", "0/3", "--concurrency", "2", "--progress", "json"])
  })

  it.live("two processes run the file's tasks once each: one header, the skipped line once, one summary of all", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir("valet-processes-")
      const pool = write("pool.yaml", poolFile(server))
      const ids = Array.from({ length: 6 }, (_, i) => `task-${i}`)
      const tasks = write("tasks.jsonl", taskLines(ids) + "not json\n")
      const run = startValet([
        "rollout", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "traj"),
        "--work-root", dir, "--group", "2", "--max-steps", "2", "--processes", "2", "--concurrency", "4"
      ])
      expect(yield* Effect.promise(() => run.exited)).toBe(0)
      const lines = run.lines
      expect(lines.filter((line) => line.startsWith("skipped "))).toEqual([`skipped ${tasks}:7: not JSON (Unexpected token 'o', "not json" is not valid JSON)`])
      expect(lines.filter((line) => line.startsWith("rollout: 6 tasks"))).toEqual([
        `rollout: 6 tasks from ${tasks}, 2 rollouts each, up to 2 steps, 2 processes × 2 episodes at a time`
      ])
      expect(lines.at(-1)).toMatch(/^rollout: 12 episodes of 6 tasks · 12 recorded · 0 failed · 24 steps · 192 tokens \(\d+ tokens\/s\) · [\d.]+ episodes\/s · reward mean – · 1 malformed line skipped · [\d.]+ s$/)
      const written = trajectories(join(dir, "traj"))
      expect(Object.keys(written).sort()).toEqual(ids)
      // Each task: 2 episodes × 2 steps, one group, written by one process (the file's one writer).
      for (const id of ids) {
        expect(written[id]!.length, id).toBe(4)
        expect(new Set(written[id]!.map((record) => record["group_id"])).size, id).toBe(1)
      }
      // A group's first steps are one request with n = 2 (the pool is vLLM's client): per task 1 + 2 requests.
      expect(server.requests.filter((request) => request.method === "POST").length).toBe(18)
    }).pipe(Effect.scoped), 60_000)

  it.live("interrupted: the processes are stopped with it, and no workspace is left behind", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make({ latencyMs: 60_000 })
      const { dir, write } = yield* tempDir("valet-processes-int-")
      const pool = write("pool.yaml", poolFile(server))
      const tag = marker()
      const tasks = write(`${tag}.jsonl`, taskLines(["a", "b", "c", "d"]))
      const work = join(dir, "work")
      const run = startValet([
        "rollout", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "traj"),
        "--work-root", work, "--processes", "2", "--progress", "json"
      ])
      // Both processes have a model call waiting: every task's request reached the server.
      yield* Effect.promise(async () => {
        while (server.requests.filter((request) => request.method === "POST").length < 4) await new Promise((wake) => setTimeout(wake, 50))
      })
      expect(processesWith(tag).length).toBe(3)
      run.kill("SIGINT")
      expect(yield* Effect.promise(() => run.exited)).toBe(130)
      expect(processesWith(tag)).toEqual([])
      // The work root holds only its empty `kept` directory (made with the sandbox): every workspace was removed.
      expect(readdirSync(work)).toEqual(["kept"])
      expect(readdirSync(join(work, "kept"))).toEqual([])
      const json = run.lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as { type: string; text?: string })
      expect(json.at(-1)).toEqual({ type: "line", text: "rollout: interrupted after 0/4 episodes (0 steps); partial episodes have no episode_end line" })
    }).pipe(Effect.scoped), 60_000)

  it.live("refused: --processes with --durable or --shard (one line, exit 2); processes that cannot start fail the run", () =>
    Effect.gen(function*() {
      const { dir, write } = yield* tempDir("valet-processes-bad-")
      const tasks = write("tasks.jsonl", taskLines(["a"]))
      const durable = yield* valet(["rollout", tasks, "--processes", "2", "--durable", join(dir, "d.sqlite")])
      expect(durable.code).toBe(2)
      expect(durable.errors).toEqual([expect.stringMatching(/^valet rollout: --processes does not go with --durable \(/)])
      const shard = yield* valet(["rollout", tasks, "--processes", "2", "--shard", "0/2"])
      expect(shard.code).toBe(2)
      expect(shard.errors).toEqual([expect.stringMatching(/give --processes or --shard, not both/)])
      const pool = write("pool.yaml", "actors:\n  - name: one\n    base_url:\n")
      const run = startValet(["rollout", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "traj"), "--processes", "2"])
      expect(yield* Effect.promise(() => run.exited)).toBe(1)
      expect(run.lines.filter((line) => line.includes("base_url must be a string")).length).toBe(2)
      expect(run.lines.at(-1)).toBe(
        "valet rollout: the processes of shard 0/2 (exit code 2), 1/2 (exit code 2) ended without finishing (the reason is on stderr above)"
      )
    }).pipe(Effect.scoped), 60_000)
})

describe("valet rollout --processes --tokens (issue 31: a server that omits token ids, a warning once)", () => {
  it.live("the warning a process says once is said once for the run, not once per process; the records have no tokens", () =>
    Effect.gen(function*() {
      // The loopback server sends no token data (logprobs null, no token ids).
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir("valet-processes-tokens-")
      const pool = write("pool.yaml", poolFile(server))
      const ids = Array.from({ length: 6 }, (_, i) => `task-${i}`)
      const tasks = write("tasks.jsonl", taskLines(ids))
      const run = startValet([
        "rollout", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", join(dir, "traj"),
        "--work-root", dir, "--max-steps", "1", "--processes", "2", "--concurrency", "2", "--tokens"
      ])
      expect(yield* Effect.promise(() => run.exited)).toBe(0)
      const written = trajectories(join(dir, "traj"))
      expect(Object.keys(written).sort()).toEqual(ids)
      // Both processes asked for token data, and both were answered without it.
      const posts = server.requests.filter((request) => request.method === "POST")
      expect(posts.length).toBe(6)
      for (const request of posts) expect(request.body.return_token_ids).toBe(true)
      for (const id of ids) expect(written[id]![0]).not.toHaveProperty("tokens")
      expect(run.lines.filter((line) => line.includes("asked for token data"))).toHaveLength(1)
    }).pipe(Effect.scoped), 60_000)
})
