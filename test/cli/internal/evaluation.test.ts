import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, FileSystem, Layer, Option, Schema } from "effect"
import { Command } from "effect/cli"
import { evalCommand } from "../../../src/cli/internal/eval.js"
import { defaultOut, evaluateDataset, type FlagValues, settingsOf, solveProblem } from "../../../src/cli/internal/evaluation.js"
import { modelLayer } from "../../../src/cli/internal/model.js"
import { memoryOutput } from "../../../src/cli/internal/output.js"
import { isDataset, solveCommand } from "../../../src/cli/internal/solve.js"
import * as Model from "../../../src/core/Model.js"
import * as ScriptedModel from "../../../src/core/ScriptedModel.js"
import * as Sandbox from "../../../src/environment/Sandbox.js"
import * as Evaluate from "../../../src/rollouts/Evaluate.js"
import * as LoopbackServer from "../../support/openAiServer.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

/** Solvers answer the sum; the critic is calm; the judge is confident. */
const ensembleScript = (request: Model.Request): ScriptedModel.Turn => {
  const prompt = lastUser(request)
  if (prompt.includes("A solver proposed")) return `{"risk": 0.1, "notes": "ok"}`
  if (prompt.includes("Judge a proposed")) return "```json\n{\"score\": 0.9, \"confidence\": 0.9}\n```"
  const match = /(\d+) \+ (\d+)/.exec(prompt)
  return match === null ? "FINAL: ?" : `FINAL: ${Number(match[1]) + Number(match[2])}`
}

const dataset = [
  { id: "a", problem: "What is 1 + 2?", reference: "3" },
  { id: "b", problem: "What is 20 + 22?", reference: "42" }
].map((line) => JSON.stringify(line)).join("\n") + "\n"

const files = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped()
  yield* fs.writeFileString(`${dir}/problems.jsonl`, dataset)
  return { fs, data: `${dir}/problems.jsonl`, out: `${dir}/results.jsonl` }
})

const noSandbox = Layer.effect(Sandbox.Sandbox, Effect.die(new Error("the sandbox is only built for tool-vote")))

describe("valet solve / eval (the commands' work)", () => {
  it.effect("eval with the Ensemble: a plain line per problem, the summary table, the results file", () =>
    Effect.gen(function*() {
      const { data, fs, out } = yield* files
      const output = memoryOutput(false)
      const report = yield* evaluateDataset(
        data,
        { architecture: "ensemble", maxCalls: 5, concurrency: 1, out },
        { model: ScriptedModel.layer(ensembleScript), sandbox: noSandbox },
        output
      )
      expect(report.summary).toMatchObject({ completed: 2, correct: 2, accuracy: 1, totalCalls: 10, accepted: 2 })
      expect(output.lines[0]).toBe("evaluating 2 of 2 problems with ensemble")
      expect(output.lines[1]).toMatch(/^\[1\/2\] a: correct · answer "3" · 5 calls · [\d.]+ s · 1\/2 done · 5 calls · [\d.]+ problems\/s · ETA .* · 1 correct · 0 failed$/)
      expect(output.lines[2]).toMatch(/^\[2\/2\] b: correct · answer "42" · 5 calls/)
      expect(output.lines.join("\n")).toContain("accuracy               100.0 % (2 of 2 with a reference)")
      expect(output.lines.at(-1)).toBe(`results: ${out}`)
      expect((yield* fs.readFileString(out)).trim().split("\n")).toHaveLength(2)

      // Again: everything is resumed, nothing is asked.
      const again = memoryOutput(false)
      yield* evaluateDataset(
        data,
        { architecture: "ensemble", out },
        { model: ScriptedModel.layer([]), sandbox: noSandbox },
        again
      )
      expect(again.lines[0]).toBe(`evaluating 0 of 2 problems with ensemble (2 already in ${out})`)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("on a terminal, progress is one status line rewritten in place", () =>
    Effect.gen(function*() {
      const { data } = yield* files
      const output = memoryOutput(true)
      yield* evaluateDataset(data, { architecture: "ensemble", concurrency: 1 }, { model: ScriptedModel.layer(ensembleScript), sandbox: noSandbox }, output)
      const status = output.lines.filter((line) => line.startsWith("\r"))
      expect(status).toHaveLength(2)
      expect(status[1]).toMatch(/^\r2\/2 done · 10 calls · [\d.]+ problems\/s · ETA 0 s · 2 correct · 0 failed$/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("eval with tool-vote runs Python through the sandbox layer it is given; --max-calls is a per-problem budget", () =>
    Effect.gen(function*() {
      const { data } = yield* files
      const commands: Array<ReadonlyArray<string>> = []
      const sandbox = Sandbox.layerTest((call) => {
        commands.push(call.command)
        return { stdout: "the sum\n" }
      })
      // Every attempt asks for Python once, then answers with the sum.
      const script = (request: Model.Request): ScriptedModel.Turn => {
        const messages = request.messages ?? []
        const problem = Model.textOf(messages.find((m) => m.role === "user")!.content)
        if (!lastUser(request).startsWith("PYTHON_OUTPUT:")) return `{"tool": "python", "code": "print(1)"}`
        const match = /(\d+) \+ (\d+)/.exec(problem)!
        return `FINAL: ${Number(match[1]) + Number(match[2])}`
      }
      const output = memoryOutput(false)
      const report = yield* evaluateDataset(
        data,
        { architecture: "tool_vote", attempts: 2, earlyStop: 2, maxCalls: 3, concurrency: 1 },
        { model: ScriptedModel.layer(script), sandbox },
        output
      )
      // Problem a: 2 attempts × 2 calls would be 4 calls; the budget of 3 stops the second attempt.
      expect(report.results[0]).toMatchObject({ answer: "3", isCorrect: true, calls: 3, interrupted: true, interruptionReason: "budget:max_calls" })
      expect(commands.length).toBeGreaterThanOrEqual(2)
      expect(commands[0]).toEqual(["python3", "-c", "print(1)"])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("solve prints the Ensemble's milestones, the answer and the candidates table", () =>
    Effect.gen(function*() {
      const output = memoryOutput(false)
      const result = yield* solveProblem("What is 40 + 2?", { architecture: "ensemble" }, {
        model: ScriptedModel.layer(ensembleScript),
        sandbox: noSandbox
      }, output)
      expect(result.output).toBe("42")
      const text = output.lines.join("\n")
      expect(text).toMatch(/ensemble\.round_started \{"round":1,"callsUsed":0\}/)
      expect(text).toMatch(/ensemble\.judgement/)
      expect(text).toMatch(/ensemble\.accepted/)
      expect(output.lines).toContain("answer: 42")
      expect(output.lines.find((line) => line.startsWith("accepted · 5 model calls"))).toBeDefined()
      expect(output.lines.slice(-2)).toEqual([
        "#  answer  support  risk  confidence  score",
        "1  42      3        0.1   0.9         0.9"
      ])
    }))

  it("tells a dataset from a problem, and names the default results file", () => {
    expect(isDataset("problems.jsonl")).toBe(true)
    expect(isDataset("data/set.JSONL")).toBe(true)
    expect(isDataset("What is in problems.jsonl?")).toBe(false)
    expect(isDataset("What is 2 + 2?")).toBe(false)
    expect(defaultOut("data/problems.jsonl")).toBe("data/problems.results.jsonl")
    const none = Option.none()
    const values: FlagValues = {
      architecture: "tool_vote",
      out: none,
      maxCalls: Option.some(9),
      maxRounds: none,
      maxConcurrency: Option.some(2),
      deprecatedMaxConcurrency: Option.some(5),
      n: none,
      attempts: Option.some(4),
      earlyStop: Option.some(3),
      concurrency: none,
      shareReference: true,
      baseUrl: none,
      model: none,
      apiKey: none,
      config: none
    }
    expect(settingsOf(values, "p.jsonl")).toEqual({
      architecture: "tool_vote",
      maxCalls: 9,
      maxRounds: undefined,
      maxConcurrency: 2,
      n: undefined,
      attempts: 4,
      earlyStop: 3,
      concurrency: undefined,
      shareReference: true,
      out: "p.results.jsonl"
    })
    // --max-concurrency, the deprecated name of --call-concurrency, is read when the current one is absent; and the
    // old --architecture spelling stands for the one name.
    expect(settingsOf({ ...values, architecture: "tool-vote", maxConcurrency: none }, "p.jsonl")).toMatchObject({ architecture: "tool_vote", maxConcurrency: 5 })
  })

  it.effect("no base URL and no pool file: a clear error saying how to configure a model", () =>
    Effect.gen(function*() {
      const none = Option.none<string>()
      const error = yield* Effect.flip(
        Layer.build(modelLayer({ baseUrl: none, model: none, apiKey: none, config: Option.some("/nonexistent/pool.yaml") })).pipe(Effect.scoped)
      )
      expect(error._tag).toBe("NoModelConfigured")
      expect(error.message).toMatch(/pass --base-url \(and --model\), set VALET_BASE_URL \(and VALET_MODEL\), or write \/nonexistent\/pool\.yaml/)
    }).pipe(withEnv({})))
})

describe("valet eval / solve (parsed from the command line, against a loopback OpenAI-compatible server)", () => {
  const run = Command.runWith(Command.make("valet").pipe(Command.withSubcommands([evalCommand, solveCommand])), {
    version: "test"
  })
  const decodeLine = Schema.decodeUnknownSync(Schema.fromJsonString(Evaluate.ProblemResult))

  it.effect("eval --max-calls 4 --max-concurrency 2: the model from VALET_BASE_URL, the results file resumable", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { data, fs, out } = yield* files
      // The command prints to stdout: keep the test's output clean.
      yield* Effect.acquireRelease(Effect.sync(() => (process.stdout.write = (() => true) as typeof process.stdout.write)), () =>
        Effect.sync(() => void (process.stdout.write = writeStdout)))
      const evaluate = run(["eval", data, "--max-calls", "4", "--max-concurrency", "2", "--out", out]).pipe(
        withEnv({ VALET_BASE_URL: server.url })
      )
      yield* evaluate
      const lines = (yield* fs.readFileString(out)).trim().split("\n").map((line) => decodeLine(line))
      // The loopback model answers words, not sums: 3 solver calls + 1 critic, then the judge does not fit in 4.
      expect(lines.map((line) => [line.id, line.calls, line.isCorrect, line.interruptionReason])).toEqual(
        expect.arrayContaining([["a", 4, false, "budget:max_calls"], ["b", 4, false, "budget:max_calls"]])
      )
      const chats = server.requests.filter((request) => request.path === "/v1/chat/completions")
      expect(chats).toHaveLength(8)
      // Without VALET_MODEL the server's first model was asked for, and used.
      expect(server.requests.some((request) => request.path === "/v1/models")).toBe(true)
      expect(chats.every((request) => request.body.model === "loopback-model")).toBe(true)

      // Run again: both problems are in the results file, no model call is made.
      yield* evaluate
      expect(server.requests.filter((request) => request.path === "/v1/chat/completions")).toHaveLength(8)
    }).pipe(Effect.provide(NodeServices.layer)), 30_000)
})

const writeStdout = process.stdout.write.bind(process.stdout)

/** Runs with exactly these environment variables (and no others) as the configuration. */
function withEnv(env: Record<string, string>) {
  return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, ConfigProvider.ConfigProvider, ConfigProvider.fromEnvRecord(env))
}
