/**
 * Evaluates the solver / critic / judge Ensemble on `examples/eval/arithmetic.jsonl` (30 problems) and prints the
 * summary table, the answers it got wrong, and a second run that resumes from the results file.
 *
 * Without a model server it runs on a scripted recipe (`recipe` below): solvers that mostly agree, sometimes
 * split, and on one problem all make the same slip that the judge does not catch — enough to show pooling,
 * critics and judges per distinct answer, acceptance, and an accuracy that is not 100 %.
 * Run alone: `npx tsx examples/evaluation.ts`.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, FileSystem } from "effect"
import { Agent, Ensemble, Model, type ScriptedModel } from "../src/index.js"
// A subpath export: `import * as Evaluate from "valet/Evaluate"` in an app.
import * as Evaluate from "../src/rollouts/Evaluate.js"
import { demoModel } from "./support/model.js"

/** The dataset, relative to the repository root. */
export const dataset = "examples/eval/arithmetic.jsonl"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

/**
 * A scripted model that knows the dataset's answers (it is a recipe for a demo, not a model): the `invariants`
 * solver is off by one on every seventh problem (two distinct answers: the critic and the judge sort them out),
 * and every solver rounds 250 / 4 down to 62 (one wrong answer, judged confidently: accepted, and wrong).
 */
export const recipe = (references: ReadonlyMap<string, string>): ScriptedModel.Script => (request) => {
  const prompt = lastUser(request)
  const problemOf = (text: string) => [...references.keys()].find((problem) => text.includes(problem))
  const answerIn = (text: string) => /Proposed answer: (.*)/.exec(text)?.[1]?.trim() ?? ""
  if (prompt.includes("A solver proposed")) {
    const right = references.get(problemOf(prompt) ?? "") === answerIn(prompt)
    return right ? `{"risk": 0.1, "notes": "the steps check out"}` : `{"risk": 0.55, "notes": "the arithmetic looks off"}`
  }
  if (prompt.includes("Judge a proposed")) {
    const answer = answerIn(prompt)
    const right = references.get(problemOf(prompt) ?? "") === answer
    return right || answer === "62"
      ? "```json\n{\"score\": 0.9, \"confidence\": 0.9, \"is_correct\": null, \"notes\": \"consistent\"}\n```"
      : `{"score": 0.3, "confidence": 0.25, "is_correct": null, "notes": "does not hold up"}`
  }
  const problem = problemOf(prompt) ?? ""
  const reference = references.get(problem) ?? "?"
  const solver = Model.textOf((request.messages ?? [])[0]?.content ?? "")
  const index = [...references.keys()].indexOf(problem) + 1
  if (reference === "62.5") return "250 / 4 is about 62.\nFINAL: 62"
  if (solver.includes("invariants") && index % 7 === 0) return `Working it out...\nFINAL: ${Number(reference) + 1}`
  return `Working it out...\nFINAL: ${reference}`
}

export const main = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const text = yield* fs.readFileString(dataset)
  const { problems } = Evaluate.parseDataset(text, dataset)
  const references = new Map(problems.map((problem) => [problem.problem, problem.reference ?? ""]))
  const { layer, note } = yield* demoModel(recipe(references))
  yield* Console.log(`# Evaluation of the Ensemble on ${dataset} — ${note}`)

  const ensemble = yield* Ensemble.make({ maxCalls: 12 })
  const agent = Agent.make({ name: "arithmetic-team", instructions: "", architecture: ensemble })
  const dir = yield* fs.makeTempDirectoryScoped()
  const out = `${dir}/results.jsonl`

  const report = yield* Evaluate.run(dataset, { agent, out, concurrency: 4 }).pipe(Effect.provide(layer))
  yield* Console.log(Evaluate.formatSummary(report.summary))
  for (const result of report.results.filter((r) => r.isCorrect === false)) {
    yield* Console.log(`wrong: ${result.id}: answered ${result.answer}, reference ${result.reference} (accepted: ${result.accepted})`)
  }
  const split = report.results.filter((r) => r.calls > 5).length
  yield* Console.log(`${split} problems had two distinct answers (3 solvers + 2 critics + 2 judges = 7 calls)`)

  // The same results file again: every problem is already there, no model call is made.
  const again = yield* Evaluate.run(dataset, { agent, out }).pipe(Effect.provide(layer))
  yield* Console.log(`resumed: ${again.summary.resumed} of ${again.summary.problems} problems skipped, accuracy ${again.summary.accuracy}`)
}).pipe(Effect.scoped, Effect.provide(NodeServices.layer))

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
