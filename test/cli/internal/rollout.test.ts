import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Logger, Result, Schema } from "effect"
import { Command } from "effect/cli"
import { TestClock } from "effect/testing"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { flags } from "../../../src/cli/internal/actorLoop.js"
import { memoryOutput } from "../../../src/cli/internal/output.js"
import { parseRewardSpec, rewardOfSpecs } from "../../../src/cli/internal/rewardFlag.js"
import { makeCommand, rolloutModel, runRollout } from "../../../src/cli/internal/rollout.js"
import { progressLine } from "../../../src/cli/internal/rolloutReport.js"
import * as ModelError from "../../../src/core/ModelError.js"
import * as ScriptedModel from "../../../src/core/ScriptedModel.js"
import * as Sandbox from "../../../src/environment/Sandbox.js"
import * as StateStore from "../../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../../src/environment/TrajectoryStore.js"
import * as Reward from "../../../src/rollouts/Reward.js"
import { sleeps, trackSleeps } from "../../support/clock.js"
import { eventually, realDelay } from "../../support/testClockIo.js"
import * as Server from "../../support/openAiServer.js"
import { marker, processesWith, testIsolation } from "../../support/processes.js"
import { tempDir } from "../../support/tempDir.js"
import { startValet } from "../../support/valetProcess.js"

// The command's sandbox is the real one: on a machine without bubblewrap its commands run as plain processes (as the
// sandbox suites do there; `valet` says so on stderr), inherited by the processes these tests start.
if (testIsolation === "process") process.env["VALET_SANDBOX_ISOLATION"] = "process"

const dir = mkdtempSync(join(tmpdir(), "valet-cli-rollout-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const tasksFile = (name: string, lines: ReadonlyArray<string>) => {
  const path = join(dir, name)
  writeFileSync(path, lines.join("\n") + "\n")
  return path
}

const task = (taskId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ task_id: taskId, prompt: `Do ${taskId}.`, ...extra })

const answer = `<think>look</think><action>{"command": ["ls"]}</action>`

// Each step's model call takes 400 ms of the TestClock and writes 10 tokens; the action exits 0; the reward is the
// same 1 for every step, so every step and episode (summed over 3 steps) scores.
const layers = (script: ScriptedModel.Script = () => ({ text: answer, delay: "400 millis", usage: { outputTokens: 10 } })) =>
  Layer.mergeAll(
    ScriptedModel.layer(script),
    Sandbox.layerTest(() => ({ exitCode: 0 })),
    StateStore.layerMemory(),
    TrajectoryStore.layerMemory,
    Reward.layer(Reward.make("one", () => Effect.succeed(1)))
  )

describe("valet rollout (runRollout)", () => {
  it.effect("one progress line a second at most, with episodes, steps, tokens/s, reward mean and ETA; then a summary", () =>
    Effect.gen(function*() {
      const path = tasksFile("progress.jsonl", [task("a"), "{\"task_id\": \"b\"", task("c", { colour: "red" }), task("d")])
      const output = memoryOutput(true)
      const fiber = yield* Effect.forkChild(runRollout(path, { concurrency: 2, group: 2, maxSteps: 3 }, layers(), output))
      yield* eventually(() => output.lines.some((line) => line.startsWith("rollout: 2 tasks")), "the run to start")
      // 4 episodes of 3 steps, 2 at a time: steps end at 400, 800, 1200 ms (first two), 1600, 2000, 2400 ms.
      for (let ms = 0; ms < 2400; ms += 100) {
        yield* TestClock.adjust("100 millis")
        yield* Effect.yieldNow
      }
      const summary = yield* Fiber.join(fiber)
      expect(summary).toMatchObject({ total: 4, done: 4, failed: 0, steps: 12, outputTokens: 120, rewarded: 4, rewardSum: 12, tasks: 2, skippedLines: 2 })
      expect(output.lines.slice(0, 3)).toEqual([
        expect.stringMatching(new RegExp(`^skipped ${path}:2: not JSON \\(`)),
        `skipped ${path}:3: colour is not a known task field`,
        `rollout: 2 tasks from ${path}, 2 rollouts each, up to 3 steps, 2 episodes at a time`
      ])
      const status = output.lines.filter((line) => line.startsWith("\r")).map((line) => line.slice(1))
      // At 0 s, 1 s, 2 s (the schedule, before the steps ending at 2 s) and at the end (2.4 s): never two in a second.
      expect(status).toEqual([
        "rollout: 0/4 episodes · 0 failed · 0 steps · 0 tokens/s · reward mean – · ETA ?",
        "rollout: 0/4 episodes · 0 failed · 4 steps · 40 tokens/s · reward mean – · ETA ?",
        "rollout: 2/4 episodes · 0 failed · 8 steps · 40 tokens/s · reward mean 3.000 · ETA 2.0 s",
        "rollout: 4/4 episodes · 0 failed · 12 steps · 50 tokens/s · reward mean 3.000 · ETA 0 s"
      ])
      expect(output.lines.at(-1)).toBe(
        "rollout: 4 episodes of 2 tasks · 4 recorded · 0 failed · 12 steps · 120 tokens (50 tokens/s) · 1.67 episodes/s · " +
          "reward mean 3.000 · 2 malformed lines skipped · 2.4 s"
      )
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a seed too large for the group's steps skips its line with the number; the run goes on", () =>
    Effect.gen(function*() {
      // 2 rollouts of 3 steps use seed … seed + 5: the largest seed that stays exact is MAX_SAFE_INTEGER - 5.
      const largest = Number.MAX_SAFE_INTEGER - 5
      const path = tasksFile("seeds.jsonl", [task("big", { seed: largest + 1 }), task("edge", { seed: largest })])
      const output = memoryOutput()
      const summary = yield* runRollout(path, { concurrency: 2, group: 2, maxSteps: 3 }, layers(() => ({ text: answer })), output)
      expect(summary).toMatchObject({ total: 2, done: 2, failed: 0, tasks: 1, skippedLines: 1 })
      expect(output.lines[0]).toBe(
        `skipped ${path}:1: seed must be at most ${largest} for 2 rollout(s) of 3 step(s) (it uses seed … seed + 5), got ${largest + 1}`
      )
      expect(output.lines.at(-1)).toMatch(/^rollout: 2 episodes of 1 tasks · 2 recorded · 0 failed · 6 steps · .* · 1 malformed line skipped · /)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("the reward mean is of the rewards known: an episode whose reward counted a failed part is left out of it", () =>
    Effect.gen(function*() {
      const path = tasksFile("reward-failed.jsonl", [task("ok"), task("broken")])
      const output = memoryOutput()
      // Task "broken"'s check cannot run (a failed part, counted 0 in its records); task "ok" scores 1.
      const reward = Reward.layer(Reward.make("check", (step) =>
        step.taskId === "broken"
          ? Effect.fail(new Reward.RewardFailed({ reward: "check", reason: "sandbox_error", message: "the check could not run" }))
          : Effect.succeed(1)))
      const services = Layer.mergeAll(
        ScriptedModel.layer(() => ({ text: answer })),
        Sandbox.layerTest(() => ({ exitCode: 0 })),
        StateStore.layerMemory(),
        TrajectoryStore.layerMemory,
        reward
      )
      for (const settings of [{ concurrency: 1 }, { concurrency: 1, maxSteps: 2 }]) {
        const summary = yield* runRollout(path, settings, services, output)
        expect(summary).toMatchObject({ done: 2, failed: 0, rewarded: 1, rewardSum: settings.maxSteps === undefined ? 1 : 2 })
      }
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a failed episode gets a line and counts in the progress", () =>
    Effect.gen(function*() {
      const path = tasksFile("failing.jsonl", [task("f"), task("g")])
      const output = memoryOutput()
      let calls = 0
      const script = () => (++calls === 2 ? { error: new ModelError.ServerError({ status: 500, message: "boom" }) } : answer)
      const summary = yield* runRollout(path, { concurrency: 1, maxSteps: 2 }, layers(script), output)
      expect(summary).toMatchObject({ total: 2, done: 2, failed: 1, steps: 3 })
      expect(output.lines).toContain("f FAILED: ServerError: boom")
      expect(output.lines.at(-1)).toMatch(/^rollout: 2 episodes of 2 tasks · 1 recorded · 1 failed · 3 steps · /)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("interrupted: a line says how far it got, and the trajectory files hold whole lines only", () =>
    Effect.gen(function*() {
      const path = tasksFile("interrupted.jsonl", [task("i1"), task("i2")])
      const root = join(dir, "interrupted-trajectories")
      const output = memoryOutput()
      const services = Layer.mergeAll(
        ScriptedModel.layer(() => ({ text: answer, delay: "400 millis" })),
        Sandbox.layerTest(() => ({ exitCode: 0 })),
        StateStore.layerMemory(),
        TrajectoryStore.layerFile({ root }).pipe(Layer.provide(NodeServices.layer))
      )
      yield* trackSleeps
      const fiber = yield* Effect.forkChild(runRollout(path, { concurrency: 4, group: 2, maxSteps: 6 }, services, output))
      yield* eventually(() => output.lines.some((line) => line.startsWith("rollout: 2 tasks")), "the run to start")
      const written = () =>
        ["i1", "i2"].reduce((sum, id) => {
          const file = join(root, "raw", `${id}.jsonl`)
          return sum + (existsSync(file) ? readFileSync(file, "utf8").split("\n").length - 1 : 0)
        }, 0)
      // Two steps of each of the 4 episodes (each step's model call takes 400 ms), then Ctrl-C in the third.
      // The 4 model calls (and the progress schedule) asleep on the TestClock, then the clock moved: no call misses it.
      const allAsleep = Effect.gen(function*() {
        for (let waited = 0; waited < 5_000; waited += 5) {
          if ((yield* sleeps).length >= 5) return
          yield* realDelay(5)
        }
      })
      for (const steps of [4, 8]) {
        yield* allAsleep
        yield* TestClock.adjust("400 millis")
        yield* eventually(() => written() === steps, `${steps} lines written`)
      }
      yield* allAsleep
      yield* TestClock.adjust("200 millis")
      yield* Fiber.interrupt(fiber)
      expect(output.lines.at(-1)).toBe("rollout: interrupted after 0/4 episodes (8 steps); partial episodes have no episode_end line")
      const lines = ["i1", "i2"].flatMap((id) => readFileSync(join(root, "raw", `${id}.jsonl`), "utf8").split("\n"))
      expect(lines.filter((line) => line !== "")).toHaveLength(8)
      // Every line whole: each ends with its newline and parses; none ends its episode.
      expect(lines.at(-1)).toBe("")
      for (const line of lines.filter((line) => line !== "")) expect(JSON.parse(line).episode_end).toBeUndefined()
    }).pipe(Effect.provide(NodeServices.layer)))

  it("the progress line's ETA is the episodes left at the rate so far", () => {
    expect(progressLine({ total: 256, done: 64, failed: 1, steps: 400, outputTokens: 20_000, rewardSum: 32, rewarded: 63, elapsedMs: 10_000 }))
      .toBe("rollout: 64/256 episodes · 1 failed · 400 steps · 2000 tokens/s · reward mean 0.508 · ETA 30 s")
  })
})

describe("--reward specs", () => {
  it("parse into the built-ins, with weights; a bad one names the spec and why", () => {
    const tests = parseRewardSpec("0.8*tests-pass:pytest -q")
    expect(Result.isSuccess(tests) && tests.success.weight).toBe(0.8)
    expect(Result.isSuccess(tests) && tests.success.reward.name).toBe("tests_pass(pytest -q)")
    const json = parseRewardSpec(`exit-code:["python3","-c","print(1)"]`)
    expect(Result.isSuccess(json) && json.success.reward.name).toBe("exit_code(python3 -c print(1))")
    const grep = parseRewardSpec("ast-grep-none:python:eval($X)")
    expect(Result.isSuccess(grep) && grep.success.reward.name).toBe("ast_grep(eval($X))")
    expect(parseRewardSpec("tets-pass:pytest")).toEqual(Result.fail(
      `unknown reward kind "tets-pass" (known: exit-code, tests-pass, ast-grep, ast-grep-none, exact-answer, normalized-answer, judged)`
    ))
    expect(parseRewardSpec("tests-pass:")).toEqual(Result.fail("the command is empty"))
    expect(parseRewardSpec("ast-grep:python")).toEqual(Result.fail(`ast-grep needs <language>:<pattern> after "ast-grep:"`))
    expect(parseRewardSpec("exact-answer:42")).toEqual(Result.fail("exact-answer takes no argument (it compares with the task's reference)"))
  })

  it.effect("several are a weighted sum; a bad one is a UsageError naming it", () =>
    Effect.gen(function*() {
      const reward = yield* rewardOfSpecs(["0.5*exact-answer", "normalized-answer"])
      expect(reward?.name).toBe("weighted")
      expect(yield* rewardOfSpecs([])).toBeUndefined()
      const bad = yield* Effect.flip(rewardOfSpecs(["exact-answer", "nope"]))
      expect(bad._tag).toBe("UsageError")
      expect(bad.message).toBe(`--reward "nope": unknown reward kind "nope" (known: exit-code, tests-pass, ast-grep, ast-grep-none, exact-answer, normalized-answer, judged)`)
    }))
})

describe("valet rollout (the command)", () => {
  it.live("runs a tasks file with --group, --max-steps and --reward into JSONL trajectories; progress on the given output", () =>
    Effect.gen(function*() {
      const path = tasksFile("command.jsonl", [task("t1", { reference: "42" })])
      const trajectories = join(dir, "trajectories")
      const output = memoryOutput()
      const command = makeCommand(() => ScriptedModel.layer(() => `${answer}<done/>\nFINAL: 42`), () => output)
      yield* Command.runWith(command, { version: "test" })([
        path,
        "--group", "2",
        "--max-steps", "3",
        "--reward", "normalized-answer",
        "--trajectories", trajectories,
        "--state-db", join(dir, "state.db"),
        "--work-root", dir
      ]).pipe(Effect.provide(NodeServices.layer))
      const lines = readFileSync(join(trajectories, "raw", "t1.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line))
      expect(lines).toHaveLength(2)
      expect(lines.map((line) => [line.episode_end, line.reward, line.episode_reward])).toEqual([["done", 1, 1], ["done", 1, 1]])
      expect(new Set(lines.map((line) => line.group_id)).size).toBe(1)
      expect(output.lines.at(-1)).toMatch(/^rollout: 2 episodes of 1 tasks · 2 recorded · 0 failed · 2 steps · .* · reward mean 1\.000 · 0 malformed lines skipped · /)
      expect(Object.keys(flags)).toContain("reward")
    }))

  it.live("--durable file.sqlite --group 2 --max-steps 3: every rollout a workflow; run again, the episodes done answer their outcome (no call, no line)", () =>
    Effect.gen(function*() {
      const path = tasksFile("durable.jsonl", [task("d1", { seed: 5 })])
      const trajectories = join(dir, "durable-trajectories")
      let calls = 0
      const run = (output: ReturnType<typeof memoryOutput>) =>
        Command.runWith(makeCommand(() => ScriptedModel.layer(() => (++calls, answer)), () => output), { version: "test" })([
          path,
          "--durable", join(dir, "durable.sqlite"),
          "--group", "2",
          "--max-steps", "3",
          "--trajectories", trajectories,
          "--state-db", join(dir, "durable-state.db"),
          "--work-root", dir
        ]).pipe(Effect.provide(NodeServices.layer))
      const first = memoryOutput()
      yield* run(first)
      const lines = () => readFileSync(join(trajectories, "raw", "d1.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line))
      // The two rollouts run at once (--concurrency 4): in seed order, rollout i's step s has seed 5 + (s - 1) × 2 + i.
      expect(lines().map((line) => [line.episode_step, line.seed, line.episode_end ?? null]).sort((a, b) => a[1] - b[1])).toEqual([
        [1, 5, null], [1, 6, null], [2, 7, null], [2, 8, null], [3, 9, "max_steps"], [3, 10, "max_steps"]
      ])
      expect(new Set(lines().map((line) => line.group_id)).size).toBe(1)
      expect(new Set(lines().map((line) => line.episode_id)).size).toBe(2)
      expect(first.lines.at(-1)).toMatch(/^rollout: 2 episodes of 1 tasks · 2 recorded · 0 failed · 6 steps · /)
      expect(calls).toBe(6)
      const second = memoryOutput()
      yield* run(second)
      expect(calls).toBe(6)
      expect(lines()).toHaveLength(6)
      expect(second.lines.at(-1)).toMatch(/^rollout: 2 episodes of 1 tasks · 2 recorded · 0 failed · 0 steps · /)
    }))
})

// The real command's model: the vLLM pool, asked for token data with --tokens (issue 31, part 3 and "Bad input").
describe("valet rollout --tokens (the vLLM pool of the command)", () => {
  const warnings = () => {
    const seen: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") seen.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
    })
    return { seen, layer: Logger.layer([logger]) }
  }
  const runCommand = (name: string, url: string, extra: ReadonlyArray<string>, log: Layer.Layer<never>) =>
    Effect.gen(function*() {
      const path = tasksFile(`${name}.jsonl`, [task(`${name}1`), task(`${name}2`)])
      const config = join(dir, `${name}-pool.yaml`)
      writeFileSync(config, `actors:\n  - name: a\n    base_url: ${url}\n    api: openai\n`)
      const trajectories = join(dir, `${name}-trajectories`)
      const output = memoryOutput()
      yield* Command.runWith(makeCommand(rolloutModel, () => output), { version: "test" })([
        path,
        "--config", config,
        "--max-steps", "1",
        "--concurrency", "1",
        ...extra,
        "--trajectories", trajectories,
        "--state-db", join(dir, `${name}-state.db`),
        "--work-root", dir
      ]).pipe(Effect.provide(Layer.merge(NodeServices.layer, log)))
      const records = (taskId: string) =>
        readFileSync(join(trajectories, "raw", `${taskId}.jsonl`), "utf8").trim().split("\n").map((line) => JSON.parse(line))
      return [...records(`${name}1`), ...records(`${name}2`)]
    })

  /** A loopback OpenAI-compatible server answering the two tasks' completions with the fixture `name`. */
  const answering = (name: string) =>
    Effect.map(Server.make({ api: "openai" }), (server) => {
      const sent = JSON.parse(Server.fixture(name))
      server.enqueue("/v1/completions", Server.json(sent), Server.json(sent))
      return server
    })
  /** The bodies of the requests the server got at `path`. */
  const bodies = (server: Server.LoopbackServer, path: string) =>
    server.requests.filter((request) => request.path === path).map((request) => request.body)

  it.live("--tokens asks vLLM for token ids and logprobs and packs what it sent beside each step", () =>
    Effect.gen(function*() {
      const server = yield* answering("vllm-completion-tokens.json")
      const log = warnings()
      const lines = yield* runCommand("tok", server.url, ["--tokens"], log.layer)
      const asked = bodies(server, "/v1/completions")
      expect(asked).toHaveLength(2)
      for (const body of asked) {
        expect(body).toMatchObject({ return_token_ids: true, return_tokens_as_token_ids: true, logprobs: 0 })
        expect(body.prompt_logprobs).toBeUndefined()
      }
      expect(lines).toHaveLength(2)
      for (const line of lines) {
        const tokens = TrajectoryStore.decodeTokens(Schema.decodeUnknownSync(TrajectoryStore.StepTokens)(line.tokens))
        expect(Array.from(tokens.promptIds ?? [])).toEqual([785, 6722, 315, 9625, 374])
        expect(Array.from(tokens.completionIds ?? [])).toEqual([12095, 13])
        expect(Array.from(tokens.completionLogprobs ?? [], (value) => Math.fround(value))).toEqual(
          [-0.012345678901234, -0.25].map(Math.fround)
        )
      }
      expect(log.seen).toEqual([])
    }))

  it.live("--prompt-logprobs asks for prompt_logprobs too (and the token data)", () =>
    Effect.gen(function*() {
      const server = yield* answering("vllm-completion-tokens.json")
      const lines = yield* runCommand("plp", server.url, ["--prompt-logprobs"], Layer.empty)
      const asked = bodies(server, "/v1/completions")
      for (const body of asked) expect(body).toMatchObject({ return_token_ids: true, prompt_logprobs: 0 })
      expect(lines.every((line) => line.tokens !== undefined)).toBe(true)
    }))

  it.live("--tokens with a judged reward: the actor's calls ask for the token data, the judge's do not", () =>
    Effect.gen(function*() {
      const server = yield* answering("vllm-completion-tokens.json")
      const verdict = Server.chatCompletion("{\"score\": 1}")
      server.enqueue("/v1/chat/completions", Server.json(verdict), Server.json(verdict))
      const lines = yield* runCommand("judge", server.url, ["--tokens", "--reward", "judged:Is the answer right?"], Layer.empty)
      expect(bodies(server, "/v1/completions")).toHaveLength(2)
      for (const body of bodies(server, "/v1/completions")) expect(body).toMatchObject({ return_token_ids: true, logprobs: 0 })
      const judged = bodies(server, "/v1/chat/completions")
      expect(judged).toHaveLength(2)
      for (const body of judged) {
        for (const key of ["return_token_ids", "return_tokens_as_token_ids", "logprobs", "prompt_logprobs"]) expect(body).not.toHaveProperty(key)
      }
      expect(lines.map((line) => line.reward)).toEqual([1, 1])
    }))

  it.live("a server that omits the token data: no tokens in the records, one warning for the run", () =>
    Effect.gen(function*() {
      const server = yield* answering("vllm-completion.json")
      const log = warnings()
      const lines = yield* runCommand("none", server.url, ["--tokens"], log.layer)
      expect(lines).toHaveLength(2)
      for (const line of lines) expect(line).not.toHaveProperty("tokens")
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("completion token ids")
    }))

  it.live("without --tokens nothing extra is asked and no warning is logged", () =>
    Effect.gen(function*() {
      const server = yield* answering("vllm-completion.json")
      const log = warnings()
      const lines = yield* runCommand("off", server.url, [], log.layer)
      const asked = bodies(server, "/v1/completions")
      for (const body of asked) {
        expect(body.return_token_ids).toBeUndefined()
        expect(body.logprobs).toBeUndefined()
      }
      for (const line of lines) expect(line).not.toHaveProperty("tokens")
      expect(log.seen).toEqual([])
    }))
})

// Issue 31 ("Bad input"): interrupting a rollout leaves complete trajectory lines only and no process or workspace
// behind — here the real command (one process), stopped while its episodes' actions run in the real sandbox.
describe("valet rollout interrupted in the sandbox (the real command)", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it.live(`${signal} while actions run: whole lines only, no sandboxed process and no workspace left`, () => interrupted(signal, false), 60_000)
  }
  // A durable episode's workspace is what its replayed steps left: removing it would resume the episode elsewhere
  // than its recorded steps left it. So it stays, and the line says where and why.
  it.live("--durable (SQLite), SIGTERM while actions run: whole lines, no process; the line says the unfinished episodes' workspaces are kept for the next run", () =>
    interrupted("SIGTERM", true), 60_000)

  const interrupted = (signal: "SIGINT" | "SIGTERM", durable: boolean) =>
      Effect.gen(function*() {
        const server = yield* Server.make({ api: "openai" })
        const tag = marker()
        // An episode's first action is quick (its step's line is written); every later one, in the same workspace,
        // sleeps in the sandbox. The same answer to every request: which request is whose does not matter.
        const action = "import os, time\nlater = os.path.exists('o.txt')\nopen('o.txt', 'a').write('x')\ntime.sleep(60 if later else 0)"
        const completion = {
          id: "cmpl-int",
          object: "text_completion",
          created: 1,
          model: "loopback-model",
          choices: [{
            index: 0,
            text: `<action>${JSON.stringify({ command: ["python3", "-c", action, tag] })}</action>`,
            logprobs: null,
            finish_reason: "stop"
          }],
          usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 }
        }
        server.enqueue("/v1/completions", ...Array.from({ length: 6 }, () => Server.json(completion)))
        const { dir: root, write } = yield* tempDir("valet-rollout-int-")
        const pool = write("pool.yaml", `actors:\n  - name: one\n    base_url: ${server.url}\n    model: loopback-model\n    api: openai\n`)
        const tasks = write(`${tag}.jsonl`, ["a", "b"].map((id) => JSON.stringify({ task_id: id, prompt: `Do ${id}.` })).join("\n") + "\n")
        const work = join(root, "work")
        const traj = join(root, "traj")
        const run = startValet([
          "rollout", tasks, "--config", pool, "--state-db", join(root, "state.db"), "--trajectories", traj,
          "--work-root", work, "--max-steps", "3", "--concurrency", "2",
          ...(durable ? ["--durable", join(root, "durable.sqlite")] : [])
        ])
        // Both episodes' first lines are written and their second actions are running (sleeping, with the marker).
        const lineCount = (id: string) => {
          const file = join(traj, "raw", `${id}.jsonl`)
          return existsSync(file) ? readFileSync(file, "utf8").split("\n").length - 1 : 0
        }
        yield* Effect.promise(async () => {
          while (
            lineCount("a") < 1 || lineCount("b") < 1 ||
            processesWith(tag).filter((pid) => pid !== run.child.pid).length < 2
          ) {
            await new Promise((wake) => setTimeout(wake, 50))
          }
        })
        run.kill(signal)
        expect(yield* Effect.promise(() => run.exited)).toBe(130)
        expect(processesWith(tag)).toEqual([])
        expect(readdirSync(work)).toEqual(["kept"])
        expect(readdirSync(join(work, "kept")).map((name) => name.replace(/-[0-9a-f-]{36}$/, "-<id>"))).toEqual(
          durable ? ["episode-<id>", "episode-<id>"] : []
        )
        for (const id of ["a", "b"]) {
          const text = readFileSync(join(traj, "raw", `${id}.jsonl`), "utf8")
          expect(text.endsWith("\n")).toBe(true)
          const lines = text.trim().split("\n").map((line) => JSON.parse(line))
          expect(lines.map((line) => [line.episode_step, line.episode_end])).toEqual([[1, undefined]])
        }
        expect(run.lines.at(-1)).toBe(
          "rollout: interrupted after 0/2 episodes (2 steps); partial episodes have no episode_end line" +
            (durable
              ? `; run the same command again to go on: the unfinished durable episodes' workspaces are kept for it in ${join(work, "kept")}`
              : "")
        )
      }).pipe(Effect.scoped)
})

describe("valet rollout --tokens with --durable postgres://", () => {
  it.effect("is refused: the runners call the model there, and they ask for no token data (it would be silently absent)", () =>
    Effect.gen(function*() {
      const path = tasksFile("pg-tokens.jsonl", [task("p1")])
      const error = yield* Command.runWith(makeCommand(() => ScriptedModel.layer(() => answer), () => memoryOutput()), { version: "test" })([
        path, "--durable", "postgres://127.0.0.1:1/none", "--tokens", "--max-steps", "2"
      ]).pipe(Effect.provide(NodeServices.layer), Effect.flip)
      expect(error._tag).toBe("UsageError")
      expect(error.message).toBe(
        "--tokens (or --prompt-logprobs) does not go with --durable postgres://…: the `valet runner`s call the model " +
          "there and ask it for no token data; use --durable <file.sqlite> (this process calls the model)"
      )
    }))
})
