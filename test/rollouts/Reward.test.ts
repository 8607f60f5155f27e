import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Reward from "../../src/rollouts/Reward.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import { testIsolation } from "../support/processes.js"

const dir = mkdtempSync(join(tmpdir(), "valet-reward-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A real sandbox (bubblewrap where it works, else plain processes, opted into). */
const sandboxLayer = Sandbox.layerProcess({ workRoot: join(dir, "work"), isolation: testIsolation, allow: ["python3", "ast-grep"] })

/** A step whose commands run in a real workspace seeded with `files`. */
const stepIn = (files: Sandbox.Files, parts: Partial<Reward.Step> = {}) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox.Sandbox
    const workspace = yield* sandbox.workspace("reward", files)
    const step: Reward.Step = {
      taskId: "reward",
      prompt: "Make add() correct.",
      output: "",
      action: null,
      sandboxResult: null,
      run: Reward.runnerIn(sandbox, Effect.succeed(workspace)),
      ...parts
    }
    return step
  })

/** A step with no workspace: its commands are a sandbox error. */
const plainStep = (parts: Partial<Reward.Step> = {}): Reward.Step => ({
  taskId: "plain",
  prompt: "What is 6 × 7?",
  output: "",
  action: null,
  sandboxResult: null,
  run: () => Effect.fail(new Sandbox.SandboxError({ reason: "workspace_closed", message: "no workspace in this test" })),
  ...parts
})

const good = { "calc.py": "def add(a, b):\n    return a + b\n" }
const bad = { "calc.py": "def add(a, b):\n    return a - b\n" }
const unittests = {
  "test_calc.py": [
    "import unittest",
    "from calc import add",
    "class T(unittest.TestCase):",
    "    def test_zero(self): self.assertEqual(add(0, 0), 0)",
    "    def test_two(self): self.assertEqual(add(2, 3), 5)",
    "    def test_neg(self): self.assertEqual(add(-1, 1), 0)",
    "    def test_same(self): self.assertEqual(add(2, 2), 4)",
    ""
  ].join("\n")
}

describe("Reward, sandbox built-ins (real processes)", () => {
  it.live("exitCode: 1 when the command exits 0 in the step's workspace, 0 otherwise", () =>
    Effect.scoped(Effect.gen(function*() {
      const check = Reward.exitCode(["python3", "-c", "import calc; assert calc.add(2, 3) == 5"])
      expect(yield* Reward.score(check, yield* stepIn(good))).toEqual({
        value: 1,
        parts: [{ name: "exit_code(python3 -c import calc; assert calc.add(2, 3) == 5)", value: 1, weight: 1 }]
      })
      expect((yield* Reward.score(check, yield* stepIn(bad))).value).toBe(0)
    })).pipe(Effect.provide(sandboxLayer)))

  it.live("testsPass: the share of the tests that pass, by unittest's summary (3 of 4 fail with add = a - b)", () =>
    Effect.scoped(Effect.gen(function*() {
      const tests = Reward.testsPass(["python3", "-m", "unittest", "-q"], { name: "unit" })
      // a - b: add(0, 0) = 0 passes, add(-1, 1) = -2 fails, add(2, 3) = -1 fails, add(2, 2) = 0 fails.
      expect(yield* Reward.score(tests, yield* stepIn({ ...bad, ...unittests }))).toEqual({
        value: 0.25,
        parts: [{ name: "unit", value: 0.25, weight: 1 }]
      })
      expect((yield* Reward.score(tests, yield* stepIn({ ...good, ...unittests }))).value).toBe(1)
    })).pipe(Effect.provide(sandboxLayer)))

  it.live("a command the sandbox refuses is a failed part with its reason, not a failure", () =>
    Effect.scoped(Effect.gen(function*() {
      const scored = yield* Reward.score(Reward.exitCode(["bash", "-c", "true"], { name: "bash" }), yield* stepIn(good))
      expect(scored.value).toBe(0)
      expect(scored.parts).toHaveLength(1)
      expect(scored.parts[0]).toMatchObject({ name: "bash", value: null, weight: 1, error: { reason: "sandbox_error" } })
      expect(scored.parts[0]!.error!.message).toMatch(/^not_allowed: /)
    })).pipe(Effect.provide(sandboxLayer)))

  it.live("astGrep: 1 when the rule matches in the workspace, 0 when not; matches: none inverts; a bad rule fails its part", () =>
    Effect.scoped(Effect.gen(function*() {
      const step = yield* stepIn({ "src/app.py": "def f(x):\n    print(x)\n    return x\n" })
      const value = (reward: Reward.Reward) => Effect.map(Reward.score(reward, step), (scored) => scored.value)
      expect(yield* value(Reward.astGrep({ language: "python", pattern: "print($A)" }))).toBe(1)
      expect(yield* value(Reward.astGrep({ language: "python", pattern: "print($A)", matches: "none" }))).toBe(0)
      expect(yield* value(Reward.astGrep({ language: "python", pattern: "logger.info($A)" }))).toBe(0)
      expect(yield* value(Reward.astGrep({ language: "python", rule: { pattern: "print($A)", inside: { kind: "function_definition", stopBy: "end" } } })))
        .toBe(1)
      expect(yield* value(Reward.astGrep({ language: "python", pattern: "print($A)", paths: ["tests"] }))).toBe(0)
      const broken = yield* Reward.score(Reward.astGrep({ language: "cobol-ish", pattern: "x", name: "bad_rule" }), step)
      expect(broken.parts[0]).toMatchObject({ name: "bad_rule", value: null, error: { reason: "invalid_output" } })
      expect(broken.parts[0]!.error!.message).toMatch(/^ast-grep exited \d+: /)
    })).pipe(Effect.provide(sandboxLayer)))
})

describe("Reward, answers and judges", () => {
  it.effect("exactAnswer and normalizedAnswer read the FINAL: answer as Evaluate does", () =>
    Effect.gen(function*() {
      const step = plainStep({ output: "Six sevens.\nFINAL: $42.0$", reference: "42" })
      expect((yield* Reward.score(Reward.normalizedAnswer(), step)).value).toBe(1)
      expect((yield* Reward.score(Reward.exactAnswer(), step)).value).toBe(0)
      expect((yield* Reward.score(Reward.exactAnswer({ reference: "$42.0$" }), step)).value).toBe(1)
      expect((yield* Reward.score(Reward.normalizedAnswer(), plainStep({ output: "FINAL: 41", reference: "42" }))).value).toBe(0)
    }))

  it.effect("an answer reward without a reference is a failed part (no_reference)", () =>
    Effect.gen(function*() {
      const scored = yield* Reward.score(Reward.normalizedAnswer(), plainStep({ output: "FINAL: 42" }))
      expect(scored).toEqual({
        value: 0,
        parts: [{
          name: "normalized_answer",
          value: null,
          weight: 1,
          error: { reason: "no_reference", message: "task plain has no reference, and normalized_answer was given none" }
        }]
      })
    }))

  it.effect("judged: the judge's {\"score\": …} or score: 8/10, parsed with the score parser; no score is a failed part", () =>
    Effect.gen(function*() {
      const reward = yield* Reward.CurrentReward
      const step = plainStep({ output: "42" })
      expect((yield* reward.evaluate(step)).value).toBe(0.7)
      expect((yield* reward.evaluate(step)).value).toBe(0.8)
      const none = yield* reward.evaluate(step)
      expect(none.parts[0]).toMatchObject({ name: "judged", value: null, error: { reason: "unparsed_score" } })
      expect(none.parts[0]!.error!.message).toMatch(/^no score found in: /)
      // Never clamped: 7 with no scale is another scale, not 1.
      const seven = yield* reward.evaluate(step)
      expect(seven.parts[0]!.error).toEqual({ reason: "unparsed_score", message: "the score 7 is outside [0, 1]" })
      const [first] = yield* ScriptedModel.calls
      expect(first!.temperature).toBe(0)
      expect(JSON.stringify(first!.messages)).toContain("correct arithmetic")
    }).pipe(Effect.provide(
      Layer.provideMerge(
        Reward.layer(Reward.judged({ rubric: "correct arithmetic" })),
        ScriptedModel.layer(["```json\n{\"score\": 0.7}\n```", "Score: 8/10", "looks fine to me", "{\"score\": 7}"])
      )
    )))

  it("parseJudgeScore reads what the judges write", () => {
    expect(Reward.parseJudgeScore("{\"score\": \"70%\"}")).toEqual(Reward.parseJudgeScore("score = 0.7"))
    expect(Reward.testCounts("===\n1 failed, 3 passed in 0.12s\n")).toEqual({ passed: 3, total: 4 })
    expect(Reward.testCounts("Tests:  2 failed, 6 passed, 8 total")).toEqual({ passed: 6, total: 8 })
    expect(Reward.testCounts("Ran 4 tests in 0.001s\n\nFAILED (failures=1, errors=1)")).toEqual({ passed: 2, total: 4 })
    expect(Reward.testCounts("hello")).toBeUndefined()
  })
})

describe("Reward composition", () => {
  const constant = (name: string, value: number) => Reward.make(name, () => Effect.succeed(value))

  it.effect("weighted sums its rewards; nested sums flatten with weights multiplied", () =>
    Effect.gen(function*() {
      const reward = Reward.weighted([
        { reward: constant("a", 1), weight: 0.5 },
        { reward: Reward.weighted([{ reward: constant("b", 0.5), weight: 1 }, { reward: constant("c", 1), weight: 1 }]), weight: 0.25 }
      ])
      expect(yield* Reward.score(reward, plainStep())).toEqual({
        value: 0.5 + 0.125 + 0.25,
        parts: [
          { name: "a", value: 1, weight: 0.5 },
          { name: "b", value: 0.5, weight: 0.25 },
          { name: "c", value: 1, weight: 0.25 }
        ]
      })
    }))

  it.effect("a failing part is kept with its reason and counts 0; a NaN score or weight is a failed part too", () =>
    Effect.gen(function*() {
      const scored = yield* Reward.score(
        Reward.weighted([
          { reward: constant("ok", 1), weight: 0.6 },
          { reward: Reward.exactAnswer(), weight: 0.4 },
          { reward: constant("nan", Number.NaN), weight: 1 },
          { reward: constant("w", 1), weight: Number.POSITIVE_INFINITY }
        ]),
        plainStep()
      )
      expect(scored.value).toBe(0.6)
      expect(scored.parts.map((part) => [part.name, part.error?.reason])).toEqual([
        ["ok", undefined],
        ["exact_answer", "no_reference"],
        ["nan", "invalid_value"],
        ["w", "invalid_value"]
      ])
      // What is stored is what the schema says.
      expect(Schema.decodeUnknownSync(Reward.Scored)(Schema.encodeSync(Reward.Scored)(scored))).toEqual(scored)
    }))

  it("episode: the steps' rewards summed, averaged or the last; a step without one is a failed part", () => {
    const steps = [{ step: 1, reward: 0.5 }, { step: 2, reward: null }, { step: 3, reward: 1 }]
    expect(Reward.episode(steps).value).toBe(1.5)
    expect(Reward.episode(steps, "mean").value).toBe(0.5)
    expect(Reward.episode(steps, "last")).toEqual({ value: 1, parts: [{ name: "step_3", value: 1, weight: 1 }] })
    expect(Reward.episode(steps).parts[1]).toMatchObject({ name: "step_2", value: null, error: { reason: "invalid_value" } })
  })
})

describe("Reward in the actor loop", () => {
  const layers = (script: ScriptedModel.Script, reward: Reward.Reward | undefined, root: string) =>
    Layer.mergeAll(
      ScriptedModel.layer(script),
      sandboxLayer,
      StateStore.layerMemory(),
      TrajectoryStore.layerFile({ root }).pipe(Layer.provide(NodeServices.layer)),
      ...(reward !== undefined ? [Reward.layer(reward)] : [])
    )

  // The action fixes calc.py; the reward's command runs after it, in the same (not kept) workspace.
  const fix = [
    "<think>add subtracts</think>",
    `<action>{"command": ["python3", "-c", "open('calc.py', 'w').write('def add(a, b):\\\\n    return a + b\\\\n')"]}</action>`,
    "FINAL: 5"
  ].join("\n")
  const task: ActorLoop.Task = { taskId: "fix-add", prompt: "Make add() correct; what is add(2, 3)?", workspaceFiles: bad, reference: "5.0" }

  it.live("each step's record gets reward and reward_parts; the reward's command sees the action's edits; read back", () =>
    Effect.gen(function*() {
      const reward = Reward.weighted([
        { reward: Reward.exitCode(["python3", "-c", "import calc; assert calc.add(2, 3) == 5"], { name: "fixed" }), weight: 0.7 },
        { reward: Reward.normalizedAnswer(), weight: 0.3 }
      ])
      const root = join(dir, "trajectories-scored")
      const record = yield* ActorLoop.step(task).pipe(Effect.provide(layers([fix], reward, root)))
      const parts = [{ name: "fixed", value: 1, weight: 0.7 }, { name: "normalized_answer", value: 1, weight: 0.3 }]
      expect(record.reward).toBe(1)
      expect(record.rewardParts).toEqual(parts)
      const line = JSON.parse(readFileSync(join(root, "raw", "fix-add.jsonl"), "utf8").trim())
      expect(line.reward).toBe(1)
      expect(line.reward_parts).toEqual(parts)
      const back = yield* Stream.runCollect(TrajectoryStore.read("fix-add")).pipe(
        Effect.provide(TrajectoryStore.layerFile({ root }).pipe(Layer.provide(NodeServices.layer)))
      )
      expect(back).toEqual([record])
    }).pipe(Effect.scoped))

  it.effect("the module example: 0.8 × 0.75 (3 of 4 tests, scripted sandbox) + 0.2 × 1 (the answer) = 0.8", () =>
    Effect.gen(function*() {
      const reward = Reward.weighted([
        { reward: Reward.testsPass(["pytest", "-q"]), weight: 0.8 },
        { reward: Reward.normalizedAnswer(), weight: 0.2 }
      ])
      const commands: Array<ReadonlyArray<string>> = []
      const record = yield* ActorLoop.step({ taskId: "fix-sort", prompt: "Make the tests pass.", reference: "42" }).pipe(
        Effect.provide(Layer.mergeAll(
          ScriptedModel.layer([`<action>{"command": ["pytest", "-q"]}</action>\nFINAL: 42`]),
          Sandbox.layerTest(({ command }) => {
            commands.push(command)
            return { exitCode: 1, stdout: "1 failed, 3 passed" }
          }, { allow: ["pytest"] }),
          StateStore.layerMemory(),
          TrajectoryStore.layerMemory,
          Reward.layer(reward)
        ))
      )
      expect(record.reward).toBeCloseTo(0.8, 12)
      expect(record.rewardParts).toEqual([
        { name: "tests_pass(pytest -q)", value: 0.75, weight: 0.8 },
        { name: "normalized_answer", value: 1, weight: 0.2 }
      ])
      // The action's command, then the reward's.
      expect(commands).toEqual([["pytest", "-q"], ["pytest", "-q"]])
    }))

  it.live("without a Reward: reward null and no reward_parts, as before", () =>
    Effect.gen(function*() {
      const root = join(dir, "trajectories-plain")
      const record = yield* ActorLoop.step(task).pipe(Effect.provide(layers([fix], undefined, root)))
      expect(record.reward).toBeNull()
      const line = JSON.parse(readFileSync(join(root, "raw", "fix-add.jsonl"), "utf8").trim())
      expect(line.reward).toBeNull()
      expect("reward_parts" in line).toBe(false)
    }).pipe(Effect.scoped))

  it.live("run: a reward that fails is recorded with its reason, the task's outcome kept with its episode reward", () =>
    Effect.gen(function*() {
      const root = join(dir, "trajectories-failed")
      const reward = Reward.weighted([
        { reward: Reward.exitCode(["bash", "-c", "true"], { name: "refused" }), weight: 0.5 },
        { reward: Reward.normalizedAnswer(), weight: 0.5 }
      ])
      const outcomes = yield* Stream.runCollect(ActorLoop.run(Stream.make({ ...task, taskId: "fails" }))).pipe(
        Effect.provide(layers([fix], reward, root))
      )
      expect(outcomes).toHaveLength(1)
      const outcome = outcomes[0]!
      if (outcome._tag !== "Recorded") return expect.unreachable(`the task failed: ${outcome.error.message}`)
      expect(outcome.record.reward).toBe(0.5)
      expect(outcome.record.rewardParts![0]).toMatchObject({ name: "refused", value: null, weight: 0.5, error: { reason: "sandbox_error" } })
      expect(outcome.reward).toEqual({ value: 0.5, parts: [{ name: "step_1", value: 0.5, weight: 1 }] })
      const line = JSON.parse(readFileSync(join(root, "raw", "fails.jsonl"), "utf8").trim())
      expect(line.reward_parts[0].error.message).toMatch(/^not_allowed: bash/)
    }).pipe(Effect.scoped))
})
