import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Ensemble from "../../src/architectures/Ensemble.js"
import * as Evaluate from "../../src/rollouts/Evaluate.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

const solver = Agent.make({ name: "solver", instructions: "Answer with FINAL: <answer>." })

/** A model that answers `a + b` problems, wrongly for the ones listed. */
const arithmetic = (wrong: ReadonlyArray<string> = []) => (request: Model.Request): ScriptedModel.Turn => {
  const prompt = lastUser(request)
  const match = /(\d+) \+ (\d+)/.exec(prompt)
  if (match === null) return "FINAL: ?"
  const sum = Number(match[1]) + Number(match[2])
  return `Adding them.\nFINAL: ${wrong.some((w) => prompt.includes(w)) ? sum + 1 : sum}`
}

const line = (value: unknown) => `${JSON.stringify(value)}\n`
const dataset = [
  line({ id: "p1", problem: "What is 1 + 1?", reference: "2" }),
  line({ id: "p2", problem: "What is 2 + 2?", reference: 4 }),
  line({ id: 3, problem: "What is 3 + 3?", reference: "6.0" }),
  line({ id: "p4", problem: "What is 4 + 4?", reference: "8" })
].join("")

const tempFiles = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped()
  return { fs, data: `${dir}/problems.jsonl`, out: `${dir}/results.jsonl` }
})

const decodeResultLine = Schema.decodeUnknownSync(Schema.fromJsonString(Evaluate.ProblemResult))
const readResults = (fs: FileSystem.FileSystem, path: string) =>
  Effect.map(fs.readFileString(path), (text) => {
    expect(text.endsWith("\n")).toBe(true)
    return text.trimEnd().split("\n").map((l) => decodeResultLine(l))
  })

describe("Evaluate", () => {
  it.effect("accuracy on a scripted dataset: per-problem JSONL records and a summary", () =>
    Effect.gen(function*() {
      const { data, fs, out } = yield* tempFiles
      yield* fs.writeFileString(data, dataset)
      const report = yield* Evaluate.run(data, { agent: solver, out, concurrency: 2 }).pipe(
        Effect.provide(ScriptedModel.layer(arithmetic(["What is 4 + 4?"])))
      )
      expect(report.summary).toMatchObject({
        problems: 4,
        completed: 4,
        resumed: 0,
        failures: 0,
        scored: 4,
        correct: 3,
        accuracy: 0.75,
        totalCalls: 4,
        meanCalls: 1,
        accuracyPer100Calls: 75,
        judgeAgreement: null,
        skippedLines: 0
      })
      expect(report.results.map((r) => [r.id, r.answer, r.isCorrect])).toEqual([
        ["p1", "2", true],
        ["p2", "4", true],
        ["3", "6", true],
        ["p4", "9", false]
      ])
      const written = yield* readResults(fs, out)
      expect(written.map((r) => r.id).sort()).toEqual(["3", "p1", "p2", "p4"])
      const raw = JSON.parse((yield* fs.readFileString(out)).split("\n")[0]!)
      expect(Object.keys(raw)).toEqual(expect.arrayContaining(["is_correct", "judge_is_correct", "latency_ms", "session_id", "calls", "rounds"]))
      expect(raw).toMatchObject({ accepted: null, judge_is_correct: null, rounds: null, interrupted: false, calls: 1 })
      expect(Evaluate.formatSummary(report.summary)).toMatch(/^problems +4 of 4 done\naccuracy +75\.0 % \(3 of 4 with a reference\)/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a malformed line is reported with its line number and skipped; the rest run", () =>
    Effect.gen(function*() {
      const { data, fs } = yield* tempFiles
      yield* fs.writeFileString(
        data,
        [
          line({ id: "a", problem: "What is 1 + 2?", reference: "3" }),
          "{not json\n",
          "\n",
          line({ id: "b", reference: "1" }),
          line({ id: "a", problem: "What is 9 + 9?" }),
          line({ id: "c", problem: "What is 2 + 5?" })
        ].join("")
      )
      const report = yield* Evaluate.run(data, { agent: solver }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      expect(report.issues.map((issue) => [issue.source, issue.line])).toEqual([["dataset", 2], ["dataset", 4], ["dataset", 5]])
      expect(report.issues[1]!.message).toMatch(/problem/)
      // One line each, saying what was wrong.
      expect(report.issues[0]!.message).toMatch(/^not JSON \(.+\)$/)
      expect(report.issues[1]!.message).toBe("problem is required")
      expect(report.issues[2]!.message).toBe(`id "a" is already used on line 1`)
      expect(report.results.map((r) => [r.id, r.isCorrect])).toEqual([["a", true], ["c", null]])
      // Without a reference a problem is not scored.
      expect(report.summary).toMatchObject({ problems: 2, completed: 2, scored: 1, correct: 1, accuracy: 1, skippedLines: 3 })
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("resume: problems already recorded are skipped, failed ones run again, the summary covers them all", () =>
    Effect.gen(function*() {
      const { data, fs, out } = yield* tempFiles
      yield* fs.writeFileString(data, dataset)
      const down = new ModelError.ServerError({ status: 503, message: "down" })
      const failing = (request: Model.Request): ScriptedModel.Turn =>
        lastUser(request).includes("3 + 3") ? { error: down } : arithmetic()(request)
      const first = yield* Evaluate.run(data, { agent: solver, out }).pipe(Effect.provide(ScriptedModel.layer(failing)))
      expect(first.summary).toMatchObject({ completed: 4, failures: 1, correct: 3, accuracy: 0.75 })
      expect(first.results[2]).toMatchObject({ id: "3", answer: "", isCorrect: false, calls: 1, error: "ServerError: down" })

      const second = yield* Effect.gen(function*() {
        const report = yield* Evaluate.run(data, { agent: solver, out })
        // Only the failed problem was asked again.
        expect((yield* ScriptedModel.calls).map(lastUser)).toEqual(["What is 3 + 3?"])
        return report
      }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      expect(second.summary).toMatchObject({ problems: 4, completed: 4, resumed: 3, failures: 0, correct: 4, accuracy: 1 })
      const written = yield* readResults(fs, out)
      // Nothing rewritten: the failure stays in the file, the new record after it.
      expect(written.map((r) => [r.id, r.error ?? null])).toEqual(expect.arrayContaining([["3", "ServerError: down"], ["3", null]]))
      expect(written).toHaveLength(5)

      const third = yield* Evaluate.run(data, { agent: solver, out }).pipe(Effect.provide(ScriptedModel.layer([])))
      expect(third.summary).toMatchObject({ completed: 4, resumed: 4, correct: 4 })
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a results file cut mid-write: the partial last line is reported and removed, its problem runs again", () =>
    Effect.gen(function*() {
      const { data, fs, out } = yield* tempFiles
      yield* fs.writeFileString(data, dataset)
      yield* Evaluate.run(data, { agent: solver, out, concurrency: 1 }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      const full = yield* fs.readFileString(out)
      const lines = full.trimEnd().split("\n")
      // The crash: the last record only half written, and a garbage line in the middle.
      const torn = [lines[0], "garbage", lines[1], lines[2], lines[3]!.slice(0, 40)].join("\n")
      yield* fs.writeFileString(out, torn)
      const report = yield* Evaluate.run(data, { agent: solver, out }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      expect(report.issues.map((issue) => [issue.source, issue.line])).toEqual([["results", 2], ["results", 5]])
      expect(report.issues[1]!.message).toMatch(/cut off mid-write/)
      expect(report.summary).toMatchObject({ completed: 4, resumed: 3, correct: 4 })
      const text = yield* fs.readFileString(out)
      expect(text.startsWith([lines[0], "garbage", lines[1], lines[2], ""].join("\n"))).toBe(true)
      expect(text.split("\n").filter((l) => l.startsWith("{")).map((l) => decodeResultLine(l).id)).toEqual(["p1", "p2", "3", "p4"])

      // A whole last record without its newline is kept, and the next record starts on a line of its own.
      yield* fs.writeFileString(out, lines.slice(0, 3).join("\n"))
      const again = yield* Evaluate.run(data, { agent: solver, out }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      expect(again.issues).toEqual([])
      expect(again.summary.resumed).toBe(3)
      expect((yield* readResults(fs, out)).map((r) => r.id)).toEqual(["p1", "p2", "3", "p4"])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("at most `concurrency` problems run at once", () =>
    Effect.gen(function*() {
      let inFlight = 0
      let most = 0
      const script = (request: Model.Request) =>
        Effect.gen(function*() {
          inFlight++
          most = Math.max(most, inFlight)
          for (let i = 0; i < 10; i++) yield* Effect.yieldNow
          inFlight--
          return arithmetic()(request)
        })
      const problems = Array.from({ length: 9 }, (_, i) => ({ id: `q${i}`, problem: `What is ${i} + 1?`, reference: String(i + 1) }))
      const report = yield* Evaluate.runProblems(problems, { agent: solver, concurrency: 3 }).pipe(
        Effect.provide(ScriptedModel.layer(script))
      )
      expect(report.summary.accuracy).toBe(1)
      expect(most).toBe(3)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("an Ensemble evaluated with shared references: accepted, rounds and the judge's verdict beside is_correct", () =>
    Effect.gen(function*() {
      const ensemble = yield* Ensemble.make({ maxRounds: 1 })
      const agent = Agent.make({ name: "team", instructions: "", architecture: ensemble })
      const script = (request: Model.Request): ScriptedModel.Turn => {
        const prompt = lastUser(request)
        if (prompt.includes("A solver proposed")) return `{"risk": 0.1}`
        if (prompt.includes("Judge a proposed")) {
          const reference = /Reference answer \(decide is_correct against it\): (.*)/.exec(prompt)?.[1]
          const answer = /Proposed answer: (.*)/.exec(prompt)![1]
          // A judge that always believes the answer is right.
          return JSON.stringify({ score: 0.9, confidence: 0.9, is_correct: reference !== undefined ? true : null, seen: answer })
        }
        return arithmetic(["What is 2 + 2?"])(request)
      }
      const problems = [
        { id: "x", problem: "What is 1 + 1?", reference: "2" },
        { id: "y", problem: "What is 2 + 2?", reference: "4" }
      ]
      const shared = yield* Evaluate.runProblems(problems, { agent, shareReference: true }).pipe(Effect.provide(ScriptedModel.layer(script)))
      expect(shared.results.map((r) => [r.id, r.answer, r.accepted, r.isCorrect, r.judgeIsCorrect, r.calls, r.rounds])).toEqual([
        ["x", "2", true, true, true, 5, 1],
        ["y", "5", true, false, true, 5, 1]
      ])
      expect(shared.summary).toMatchObject({ accuracy: 0.5, accepted: 2, judgeAgreement: 0.5, accuracyPer100Calls: 10 })

      // Blind (the default): the judge is not told the reference, so it has no verdict; accuracy is still computed.
      const blind = yield* Evaluate.runProblems(problems, { agent }).pipe(Effect.provide(ScriptedModel.layer(script)))
      expect(blind.results.map((r) => [r.isCorrect, r.judgeIsCorrect])).toEqual([[true, null], [false, null]])
      expect(blind.summary).toMatchObject({ accuracy: 0.5, judgeAgreement: null })
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a missing dataset file and bad options fail with typed errors", () =>
    Effect.gen(function*() {
      const { data } = yield* tempFiles
      const missing = yield* Effect.flip(Evaluate.run(data, { agent: solver }).pipe(Effect.provide(ScriptedModel.layer([]))))
      expect(missing._tag).toBe("EvaluateError")
      expect(missing.message).toMatch(/cannot read the dataset/)
      const bad = yield* Effect.flip(Evaluate.runProblems([], { agent: solver, concurrency: 0 }).pipe(Effect.provide(ScriptedModel.layer([]))))
      expect(bad).toMatchObject({ _tag: "InvalidOptions", module: "Evaluate" })
      expect(bad.message).toBe("Evaluate: concurrency must be an integer >= 1, got 0")
      const typo = yield* Effect.flip(
        Evaluate.runProblems([], { agent: solver, concurency: 2 } as Evaluate.Options<Model.Model>).pipe(Effect.provide(ScriptedModel.layer([])))
      )
      expect(typo.message).toBe("Evaluate: concurency is not a known option")
      const limits = yield* Effect.flip(
        Evaluate.runProblems([], { agent: solver, budget: { maxCalls: -1 } }).pipe(Effect.provide(ScriptedModel.layer([])))
      )
      expect(limits.message).toBe("Evaluate: budget.maxCalls must be a value greater than or equal to 0, got -1")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("an option given as undefined is as if absent", () =>
    Effect.gen(function*() {
      const settings: { concurrency?: number | undefined; out?: string | undefined } = {}
      const report = yield* Evaluate.runProblems([{ id: "u", problem: "What is 2 + 3?", reference: "5" }], {
        agent: solver,
        concurrency: settings.concurrency,
        out: settings.out,
        budget: undefined,
        shareReference: undefined
      }).pipe(Effect.provide(ScriptedModel.layer(arithmetic())))
      expect(report.summary).toMatchObject({ completed: 1, correct: 1 })
    }).pipe(Effect.provide(NodeServices.layer)))
})
