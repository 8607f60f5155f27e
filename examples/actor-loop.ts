/**
 * The RL actor loop on `examples/actor-loop/tasks.jsonl`: each task's prompt carries its state, the model's
 * `<action>` runs in the sandbox (ast-grep rewrites in place, python3 checks), its `<state_update>` is saved, and
 * one trajectory line per task is written. Run alone: `npx tsx examples/actor-loop.ts`; the same file runs with
 * `valet actor-loop examples/actor-loop/tasks.jsonl` against a vLLM pool.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, FileSystem, Layer, Result, Stream } from "effect"
import { fileURLToPath } from "node:url"
import type { ScriptedModel } from "../src/index.js"
// Subpath exports: `import * as ActorLoop from "valet/ActorLoop"` (and `valet/Sandbox`, …) in an app.
import * as ActorLoop from "../src/rollouts/ActorLoop.js"
import * as Sandbox from "../src/environment/Sandbox.js"
import * as StateStore from "../src/environment/StateStore.js"
import * as TrajectoryStore from "../src/environment/TrajectoryStore.js"
import { demoModel } from "./support/model.js"

/** The tasks file next to this example. */
export const tasksPath = fileURLToPath(new URL("./actor-loop/tasks.jsonl", import.meta.url))

const action = (command: ReadonlyArray<string>) => `<action>${JSON.stringify({ command })}</action>`

/** What a model would answer to each task, for runs without a server. */
export const answers: Record<string, string> = {
  "log-calls": "<think>ast-grep can rewrite the calls structurally.</think>\n" +
    action(["ast-grep", "run", "--pattern", "print($$$ARGS)", "--rewrite", "logger.info($$$ARGS)", "--lang", "python", "--update-all", "app.py"]) +
    "\n<state_update>{\"decisions\": [\"use ast-grep for the rewrite\"], \"next_focus\": \"check the logger is configured\"}</state_update>",
  "var-to-let": "<think>Every var becomes let; total is reassigned, so const would break it.</think>\n" +
    action(["ast-grep", "run", "-p", "var $NAME = $VALUE", "-r", "let $NAME = $VALUE", "-l", "js", "-U", "src"]) +
    "\n<state_update>{\"constraints\": [\"keep reassigned variables mutable\"]}</state_update>",
  "check-add": "<think>Run the assertion and see.</think>\n" +
    action(["python3", "-c", "import calc; r = calc.add(2, 3); print('add(2, 3) =', r); assert r == 5"]) +
    "\n<state_update>{\"hypotheses\": [\"add subtracts instead of adding\"], \"open_issues\": [\"add(2, 3) is wrong\"]}</state_update>",
  // The closing tag of the last block is missing, as when a server strips the stop string.
  "summarize-csv": "<think>Skip the header line.</think>\n" +
    action(["python3", "-c", "n = len(open('data.csv').read().splitlines()) - 1\nopen('summary.txt', 'w').write(f'{n} rows\\n')\nprint(n)"]) +
    "\n<state_update>{\"history\": [\"counted the rows of data.csv\"]}"
}

/** Answers each request with the answer of the task whose prompt it starts with. */
export const script: ScriptedModel.Script = (request) => {
  const prompt = request.prompt ?? ""
  const lines = prompt.split("\n")
  for (const [taskId, answer] of Object.entries(answers)) if (lines[0]!.includes(hints[taskId]!)) return answer
  return "<think>I do not know this task.</think>"
}

const hints: Record<string, string> = {
  "log-calls": "logger.info",
  "var-to-let": "`var`",
  "check-add": "calc.py",
  "summarize-csv": "data.csv"
}

/** Runs every task once and prints what each step did, with the diffs. */
export const main = Effect.gen(function*() {
  const { layer: model, note } = yield* demoModel(script)
  yield* Console.log(`# Actor loop — ${note}`)
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-actor-loop-" })
  const text = yield* fs.readFileString(tasksPath)
  const tasks: Array<ActorLoop.Task> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() === "") continue
    const decoded = ActorLoop.decodeTaskLine(lines[i]!)
    // A malformed line is reported with its number and skipped; the rest run.
    if (Result.isFailure(decoded)) yield* Console.log(`skipped ${tasksPath}:${i + 1}: ${decoded.failure}`)
    else tasks.push(decoded.success)
  }
  // The sandbox fails closed: without bubblewrap it refuses to build. This demo's commands are scripted, not a
  // model's, so it opts into plain processes explicitly when bubblewrap is missing, and says so.
  const sandboxLayer = (workRoot: string) =>
    Layer.effect(
      Sandbox.Sandbox,
      Sandbox.make({ workRoot }).pipe(
        Effect.catchIf(
          (error) => error.reason === "isolation_unavailable",
          (error) =>
            Effect.andThen(
              Console.log(`sandbox: ${error.message}; this demo opts into plain processes (its commands are scripted)`),
              Sandbox.make({ workRoot, isolation: "process" })
            )
        )
      )
    )
  const layers = Layer.mergeAll(
    model,
    sandboxLayer(`${dir}/work`),
    StateStore.layerSqlite({ filename: `${dir}/state.sqlite3` }),
    TrajectoryStore.layerFile({ root: `${dir}/trajectories` }).pipe(Layer.provide(NodeServices.layer))
  )
  yield* Effect.gen(function*() {
    const info = yield* Sandbox.info
    yield* Console.log(`sandbox: ${info.isolation} isolation, limits by ${info.limiter}${info.pooledUids ? ", pooled uids" : ""}`)
    const outcomes = yield* Stream.runCollect(ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 2 }))
    outcomes.sort((a, b) => tasks.indexOf(a.task) - tasks.indexOf(b.task))
    for (const outcome of outcomes) {
      if (outcome._tag === "Failed") {
        yield* Console.log(`${outcome.task.taskId}: FAILED ${outcome.error._tag}: ${outcome.error.message}`)
        continue
      }
      const { record } = outcome
      const result = record.sandboxResult
      const changed = result?.changedFiles?.length ? ` · changed ${result.changedFiles.join(", ")}` : ""
      yield* Console.log(
        `${record.taskId} step ${record.step}: exit ${result?.exitCode ?? "-"}${changed} · parse ${record.modelOutput.parseError ?? "ok"} · ` +
          `sandbox_failed ${record.metrics.sandboxFailed}`
      )
      const output = `${result?.stdout ?? ""}${result?.stderr ?? ""}`.trim()
      if (output !== "") yield* Console.log(`  output: ${output.split("\n").at(-1)}`)
      for (const line of (result?.diff ?? "").trimEnd().split("\n").filter((line) => line !== "")) yield* Console.log(`  ${line}`)
    }
    const state = yield* StateStore.load("check-add")
    yield* Console.log(`state of check-add:\n${StateStore.render(state)}`)
    const written = yield* Stream.runCount(TrajectoryStore.read("summarize-csv"))
    yield* Console.log(`trajectory lines of summarize-csv: ${written}`)
  }).pipe(Effect.provide(layers))
}).pipe(Effect.scoped, Effect.provide(NodeServices.layer))

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
