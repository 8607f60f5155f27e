import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Logger, Result, Schema, Stream } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import { testIsolation } from "../support/processes.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"

const task = (parts: Partial<ActorLoop.Task> = {}): ActorLoop.Task => ({
  taskId: "fix-1",
  prompt: "Make add() correct.",
  workspaceFiles: { "calc.py": "def add(a, b):\n    return a - b\n" },
  ...parts
})

const fullOutput = [
  "<think>add subtracts; the test will show it.</think>",
  "<action>{\"command\": [\"python3\", \"-c\", \"import calc; print(calc.add(2, 3))\"]}</action>",
  "<state_update>{\"goals\": [\"make add correct\"], \"hypotheses\": [\"add uses -\"], \"next_focus\": \"rewrite add\"}</state_update>"
].join("\n")

/** Memory stores, a scripted sandbox that answers "-1" to every command, and a scripted model. */
const testLayers = (script: ScriptedModel.Script, respond: Sandbox.TestResponder = () => ({ stdout: "-1\n" })) =>
  Layer.mergeAll(
    ScriptedModel.layer(script),
    Sandbox.layerTest(respond),
    StateStore.layerMemory(),
    TrajectoryStore.layerMemory
  )

const records = (taskId: string) => Stream.runCollect(TrajectoryStore.read(taskId))

describe("ActorLoop.step: token data", () => {
  it.effect("a vLLM actor asked for tokens: the record carries them packed, its other fields as before", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      server.enqueue("/v1/completions", Server.json(JSON.parse(Server.fixture("vllm-completion-tokens.json"))))
      const dir = mkdtempSync(join(tmpdir(), "valet-actor-tokens-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      writeFileSync(join(dir, "vllm_actors.yaml"), `actors:\n  - name: a\n    base_url: ${server.url}\n    api: openai\n`)
      const pool = Vllm.layer({ configPath: join(dir, "vllm_actors.yaml"), tokens: { promptLogprobs: true } }).pipe(
        Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
      )
      const record = yield* ActorLoop.step(task({ prompt: "The capital of France is" })).pipe(
        Effect.provide(Layer.mergeAll(pool, Sandbox.layerTest(() => ({ stdout: "" })), StateStore.layerMemory(), TrajectoryStore.layerMemory))
      )
      expect(record.modelOutput.raw).toBe(" Paris.")
      expect(record.metrics).toMatchObject({ inputTokens: 5, outputTokens: 2, finishReason: "stop" })
      const tokens = TrajectoryStore.decodeTokens(record.tokens!)
      expect(Array.from(tokens.promptIds!)).toEqual([785, 6722, 315, 9625, 374])
      expect(Array.from(tokens.completionIds!)).toEqual([12095, 13])
      expect(Array.from(tokens.completionLogprobs!)).toEqual([Math.fround(-0.012345678901234), -0.25])
      expect(Array.from(tokens.promptLogprobs!)).toEqual([Number.NaN, -7.53125, -0.0859375, -3.28125, -0.6171875])
    }))

  it.effect("log-probabilities that do not pair with the token ids are left out (the ids kept), said once", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const body = JSON.parse(Server.fixture("vllm-completion-tokens.json"))
      // One id more than log-probabilities, then as many but naming another token.
      server.enqueue(
        "/v1/completions",
        Server.json({ ...body, choices: [{ ...body.choices[0], token_ids: [12095, 13, 2] }] }),
        Server.json({ ...body, choices: [{ ...body.choices[0], token_ids: [12095, 14] }] })
      )
      const dir = mkdtempSync(join(tmpdir(), "valet-actor-tokens-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      writeFileSync(join(dir, "vllm_actors.yaml"), `actors:\n  - name: a\n    base_url: ${server.url}\n    api: openai\n`)
      const pool = Vllm.layer({ configPath: join(dir, "vllm_actors.yaml"), tokens: true }).pipe(
        Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
      )
      const seen: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") seen.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
      })
      const layers = Layer.mergeAll(pool, Sandbox.layerTest(() => ({ stdout: "" })), StateStore.layerMemory(), TrajectoryStore.layerMemory, Logger.layer([logger]))
      const first = yield* ActorLoop.step(task({ taskId: "more-ids", prompt: "The capital of France is" })).pipe(Effect.provide(layers))
      const second = yield* ActorLoop.step(task({ taskId: "other-id", prompt: "The capital of France is" })).pipe(Effect.provide(layers))
      const tokens = [first, second].map((record) => TrajectoryStore.decodeTokens(record.tokens!))
      expect(Array.from(tokens[0]!.completionIds!)).toEqual([12095, 13, 2])
      expect(Array.from(tokens[1]!.completionIds!)).toEqual([12095, 14])
      for (const each of tokens) expect(each.completionLogprobs).toBeUndefined()
      const mismatches = seen.filter((line) => line.includes("log-probabilities are not stored"))
      expect(mismatches).toHaveLength(1)
      expect(mismatches[0]).toContain("3 token ids but 2 log-probabilities")
    }))

  it.effect("a model that sends no token data: the record has no `tokens` key", () =>
    Effect.gen(function*() {
      const record = yield* ActorLoop.step(task())
      expect(record).not.toHaveProperty("tokens")
    }).pipe(Effect.provide(testLayers([fullOutput]))))
})

describe("ActorLoop spans", () => {
  it.effect("a failed step's cause names the step's span without a stack trace of it (one per step was ~1.5 % of a rollout's CPU)", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(ActorLoop.step(task()))
      expect(Exit.isFailure(exit)).toBe(true)
      const pretty = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
      expect(pretty).toContain("valet/ActorLoop.step")
      expect(pretty).not.toMatch(/valet\/ActorLoop\.step \(/)
    }).pipe(Effect.provide(testLayers([{ error: new ModelError.ServerError({ status: 503, message: "overloaded" }) }]))))
})

describe("ActorLoop.step", () => {
  it.effect("parses think / action / state_update, runs the action, saves the state and appends the record", () =>
    Effect.gen(function*() {
      const record = yield* ActorLoop.step(task({ seed: 7, maxTokens: 256, stop: ["</state_update>"] }))
      expect(record).toMatchObject({
        taskId: "fix-1",
        step: 1,
        prompt: "Make add() correct.",
        stateBefore: StateStore.empty,
        stateAfter: {
          ...StateStore.empty,
          goals: ["make add correct"],
          hypotheses: ["add uses -"],
          nextFocus: "rewrite add"
        },
        modelOutput: {
          raw: fullOutput,
          think: "add subtracts; the test will show it.",
          action: { command: ["python3", "-c", "import calc; print(calc.add(2, 3))"] },
          stateUpdate: { goals: ["make add correct"], hypotheses: ["add uses -"], next_focus: "rewrite add" },
          parseError: null
        },
        sandboxResult: {
          command: ["python3", "-c", "import calc; print(calc.add(2, 3))"],
          exitCode: 0,
          stdout: "-1\n",
          isolation: "test"
        },
        reward: null,
        metrics: { sandboxFailed: false, actorLatencySec: 0, model: "scripted", finishReason: "stop" }
      })
      expect(record.modelOutput.parseErrorDetail).toBeUndefined()
      expect(yield* records("fix-1")).toEqual([record])
      expect(yield* StateStore.load("fix-1")).toEqual(record.stateAfter)
      const [request] = yield* ScriptedModel.calls
      expect(request).toEqual({ prompt: "Make add() correct.", temperature: 0.1, seed: 7, maxTokens: 256, stop: ["</state_update>"] })
    }).pipe(Effect.provide(testLayers([fullOutput]))))

  it.effect("puts the rendered state in the next step's prompt", () =>
    Effect.gen(function*() {
      yield* ActorLoop.step(task())
      const second = yield* ActorLoop.step(task())
      expect(second.step).toBe(2)
      expect(second.prompt).toBe(
        "Make add() correct.\n\n<state>\nGoals:\n- make add correct\n\nHypotheses:\n- add uses -\n\nNext focus:\nrewrite add\n</state>"
      )
      expect(second.stateBefore).toEqual(second.stateAfter)
      const calls = yield* ScriptedModel.calls
      expect(calls[1]!.prompt).toBe(second.prompt)
    }).pipe(Effect.provide(testLayers([fullOutput, "<think>now fix it</think>"]))))

  it.effect("broken action JSON records invalid_action_json, runs nothing, and still saves the state update", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const record = yield* ActorLoop.step(task()).pipe(
        Effect.provide(testLayers(
          ["<think>x</think><action>{\"command\": [\"python3\", </action><state_update>{\"decisions\": [\"retry\"]}</state_update>"],
          ({ command }) => {
            ran.push(command)
            return {}
          }
        ))
      )
      expect(ran).toEqual([])
      expect(record.modelOutput.parseError).toBe("invalid_action_json")
      expect(record.modelOutput.parseErrorDetail).toMatch(/^<action>: no JSON found in/)
      expect(record.modelOutput.action).toBeNull()
      expect(record.sandboxResult).toBeNull()
      expect(record.metrics.sandboxFailed).toBe(true)
      expect(record.stateAfter.decisions).toEqual(["retry"])
    }))

  it.effect("broken state_update JSON records invalid_state_update_json; the action still runs", () =>
    Effect.gen(function*() {
      const record = yield* ActorLoop.step(task())
      expect(record.modelOutput.parseError).toBe("invalid_state_update_json")
      expect(record.sandboxResult?.exitCode).toBe(0)
      expect(record.stateAfter).toEqual(StateStore.empty)
      expect(yield* StateStore.load("fix-1")).toEqual(StateStore.empty)
      const shape = yield* ActorLoop.step(task())
      expect(shape.modelOutput.parseError).toBe("invalid_state_update_json")
      expect(shape.modelOutput.parseErrorDetail).toContain("state_update.goals must be a list of strings")
    }).pipe(Effect.provide(testLayers([
      "<action>{\"command\": [\"python3\", \"-V\"]}</action><state_update>{goals: [oops]}</state_update>",
      "<action>[\"python3\", \"-V\"]</action><state_update>{\"goals\": {\"a\": 1}}</state_update>"
    ]))))

  it.effect("accepts a block whose closing tag was stripped at the very end", () =>
    Effect.gen(function*() {
      const record = yield* ActorLoop.step(task())
      expect(record.modelOutput.parseError).toBeNull()
      expect(record.sandboxResult?.command).toEqual(["python3", "-V"])
      expect(record.modelOutput.think).toBe("short")
    }).pipe(Effect.provide(testLayers(["<think>short</think>\n<action>{\"command\": [\"python3\", \"-V\"]}"]))))

  it.effect("no action: sandbox_failed, nothing run; a refused command: its result recorded, sandbox_failed", () =>
    Effect.gen(function*() {
      const none = yield* ActorLoop.step(task())
      expect(none.sandboxResult).toBeNull()
      expect(none.metrics.sandboxFailed).toBe(true)
      expect(none.modelOutput.think).toBe("reasoning from the server")
      const refused = yield* ActorLoop.step(task())
      expect(refused.sandboxResult).toMatchObject({ exitCode: 126, error: "not_allowed" })
      expect(refused.metrics.sandboxFailed).toBe(true)
      const invalid = yield* ActorLoop.step(task())
      expect(invalid.sandboxResult).toMatchObject({ exitCode: 127, error: "invalid_command" })
    }).pipe(Effect.provide(testLayers([
      { text: "I have nothing to run.", reasoning: "reasoning from the server" },
      "<action>{\"command\": [\"bash\", \"-c\", \"rm -rf /\"]}</action>",
      "<action>{\"cmd\": \"python3\"}</action>"
    ]))))

  it.effect("a model error fails the step and records nothing", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(ActorLoop.step(task()))
      expect(error._tag).toBe("ServerError")
      expect(yield* TrajectoryStore.count("fix-1")).toBe(0)
    }).pipe(Effect.provide(testLayers([{ error: new ModelError.ServerError({ status: 503, message: "overloaded" }) }]))))

  it.effect("stream emits the run's events, the record in RunCompleted's metadata", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(ActorLoop.stream(task(), { textDeltas: false }))
      expect(events.map((event) => (event._tag === "Progress" ? event.name : event._tag))).toEqual([
        "RunStarted",
        "ModelCalled",
        "ModelReplied",
        "actor_loop.parsed",
        "actor_loop.sandbox_ran",
        "actor_loop.state_saved",
        "actor_loop.recorded",
        "RunCompleted"
      ])
      const completed = events.at(-1)!
      if (completed._tag !== "RunCompleted") throw new Error("no RunCompleted")
      const [written] = yield* records("fix-1")
      expect(completed.result.metadata.record).toEqual(Schema.encodeSync(TrajectoryStore.TrajectoryRecord)(written!))
      expect(completed.result.metadata.record).toMatchObject({ task_id: "fix-1", step: 1, metrics: { sandbox_failed: false } })
      expect(written!.sessionId).toBe(completed.sessionId)
    }).pipe(Effect.provide(testLayers([fullOutput]))))
})

describe("ActorLoop.run", () => {
  it.effect("steps a stream of tasks concurrently; a failed task is an outcome, the others are recorded", () =>
    Effect.gen(function*() {
      const tasks = ["a", "b", "c", "d", "e"].map((taskId) => task({ taskId, prompt: `task ${taskId}` }))
      const outcomes = yield* Stream.runCollect(ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 3 }))
      expect(outcomes).toHaveLength(5)
      const failed = outcomes.filter((outcome) => outcome._tag === "Failed")
      expect(failed.map((outcome) => outcome.task.taskId)).toEqual(["c"])
      for (const id of ["a", "b", "d", "e"]) expect(yield* TrajectoryStore.count(id)).toBe(1)
    }).pipe(Effect.provide(testLayers((request) =>
      request.prompt === "task c"
        ? { error: new ModelError.Timeout({ message: "slow", timeoutMs: 1 }) }
        : fullOutput
    ))))
})

describe("ActorLoop options", () => {
  it.effect("invalid options fail with InvalidOptions on one line, before anything runs; an unknown key is refused", () =>
    Effect.gen(function*() {
      const zero = yield* Effect.flip(ActorLoop.step(task(), { sandboxTimeoutMs: 0 }))
      expect(zero).toMatchObject({ _tag: "InvalidOptions", module: "ActorLoop", message: "ActorLoop: sandboxTimeoutMs must be an integer >= 1, got 0" })
      const typo = yield* Effect.flip(ActorLoop.step(task(), { keepWorkspace: true } as ActorLoop.Options))
      expect(typo.message).toBe("ActorLoop: keepWorkspace is not a known option")
      const streamed = yield* Effect.flip(Stream.runCollect(ActorLoop.stream(task(), { chat: "yes" } as unknown as ActorLoop.StreamOptions)))
      expect(streamed.message).toBe(`ActorLoop: chat must be a boolean, got "yes"`)
      const ran = yield* Effect.flip(Stream.runCollect(ActorLoop.run(Stream.make(task()), { concurrency: 0 })))
      expect(ran.message).toBe("ActorLoop: concurrency must be an integer >= 1, got 0")
      expect(yield* TrajectoryStore.count("fix-1")).toBe(0)
      expect(yield* ScriptedModel.calls).toEqual([])
    }).pipe(Effect.provide(testLayers([]))))

  it.effect("an option given as undefined is as if absent", () =>
    Effect.gen(function*() {
      const settings: { concurrency?: number | undefined; sandboxTimeoutMs?: number | undefined } = {}
      const outcomes = yield* Stream.runCollect(
        ActorLoop.run(Stream.make(task()), { concurrency: settings.concurrency, sandboxTimeoutMs: settings.sandboxTimeoutMs, budget: undefined })
      )
      expect(outcomes.map((outcome) => outcome._tag)).toEqual(["Recorded"])
    }).pipe(Effect.provide(testLayers([fullOutput]))))
})

describe("ActorLoop.Task", () => {
  it("decodes snake-case JSON lines and says what is wrong with a bad one", () => {
    expect(ActorLoop.decodeTaskLine(JSON.stringify({ task_id: "t1", prompt: "p", workspace_files: { "a.py": "" }, max_tokens: 5 })))
      .toEqual(Result.succeed({ taskId: "t1", prompt: "p", workspaceFiles: { "a.py": "" }, maxTokens: 5 }))
    const bad = (value: unknown) => {
      const decoded = ActorLoop.decodeTaskLine(typeof value === "string" ? value : JSON.stringify(value))
      if (Result.isSuccess(decoded)) throw new Error("decoded")
      return decoded.failure
    }
    expect(bad({ prompt: "p" })).toBe("task_id is required")
    expect(bad({ task_id: "../x", prompt: "p" })).toBe(
      `task_id is not a safe name: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-', got "../x"`
    )
    expect(bad({ task_id: "t", prompt: "p", workspace_files: { "../x": "" } })).toContain("contains '..'")
    expect(bad({ task_id: "t", prompt: "p", temperature: 3 })).toBe("temperature must be a value between 0 and 2, got 3")
    expect(bad("{not json")).toMatch(/^not JSON \(/)
    for (const line of [{ prompt: "p" }, { task_id: "t", prompt: "p", workspace_files: { "../x": "" } }, "{not json"]) {
      expect(bad(line)).not.toContain("\n")
    }
  })
})

describe("ActorLoop with real processes", () => {
  const dir = mkdtempSync(join(tmpdir(), "valet-actor-loop-"))
  const realLayers = (script: ScriptedModel.Script) =>
    Layer.mergeAll(
      ScriptedModel.layer(script),
      Sandbox.layerProcess({ workRoot: join(dir, "work"), isolation: testIsolation }),
      StateStore.layerSqlite({ filename: join(dir, "state.sqlite3") }),
      TrajectoryStore.layerFile({ root: join(dir, "trajectories") }).pipe(Layer.provide(NodeServices.layer))
    )

  it.live("ast-grep rewrites the seeded file: the diff is in the JSONL record", () =>
    Effect.gen(function*() {
      const record = yield* ActorLoop.step(task({ taskId: "astgrep" }))
      expect(record.sandboxResult).toMatchObject({ exitCode: 0, changedFiles: ["calc.py"] })
      expect(record.sandboxResult!.diff).toContain("-    return a - b\n+    return a + b\n")
      const line = JSON.parse(readFileSync(join(dir, "trajectories", "raw", "astgrep.jsonl"), "utf8").trim())
      expect(line.sandbox_result.changed_files).toEqual(["calc.py"])
      expect(line.metrics.sandbox_failed).toBe(false)
    }).pipe(Effect.provide(realLayers([
      "<action>{\"command\": [\"ast-grep\", \"run\", \"-p\", \"$A - $B\", \"-r\", \"$A + $B\", \"-l\", \"python\", \"-U\", \".\"]}</action>"
    ]))))

  it.live("keepWorkspaces keeps edits across steps; a symlink left by an action is recorded as sandbox_error", () =>
    Effect.gen(function*() {
      const options = { keepWorkspaces: true }
      const files = { taskId: "kept", workspaceFiles: { "notes.txt": "seed\n" } }
      yield* ActorLoop.step(task(files), options)
      const second = yield* ActorLoop.step(task(files), options)
      expect(second.sandboxResult?.stdout).toBe("seed\nstep\n")
      const third = yield* ActorLoop.step(task({ taskId: "kept", workspaceFiles: { "out/x.txt": "x" } }), options)
      expect(third.sandboxResult).toBeNull()
      expect(third.metrics.sandboxFailed).toBe(true)
      expect(third.metrics.sandboxError).toMatch(/^symlink_escape: /)
      expect(third.step).toBe(3)
      yield* Sandbox.discard("kept")
    }).pipe(Effect.provide(realLayers([
      "<action>{\"command\": [\"python3\", \"-c\", \"open('notes.txt', 'a').write('step\\\\n')\"]}</action>",
      `<action>{"command": ["python3", "-c", "import os; print(open('notes.txt').read(), end=''); os.symlink('${tmpdir()}', 'out')"]}</action>`,
      "<action>{\"command\": [\"python3\", \"-V\"]}</action>"
    ]))))

  afterAll(() => rmSync(dir, { recursive: true, force: true }))
})
