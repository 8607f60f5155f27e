/**
 * A process that runs one durable DeepAgent run on a SQLite file over a sandbox's kept workspace, for the kill test:
 * `durableDeepChild.ts <dir> <phase> <isolation>`. Its model answers by the call's session and step and prints
 * `call <session> <step>` for each call it receives: a plan, a `write_file`, an `edit_file` (every `a` doubled in
 * `counter.txt`, seeded `a`), an `execute` that appends `main` to `log.txt`, a `task` whose sub-agent appends `sub`
 * with its own `execute`, the plan done; in phase 1 the next call never answers (the test kills the process there),
 * in phase 2 it is the answer. Prints `result <output>`, `todos <json>` and `results <json>` (the tool results the
 * last call read).
 */
import { Effect, Layer } from "effect"
import { join } from "node:path"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [dir, phase, isolation] = process.argv.slice(2)
const todos = (status: "pending" | "done") => ({
  todos: [
    { content: "Write notes.txt", status: status === "done" ? "done" : "in_progress" },
    { content: "Double the a's of counter.txt", status },
    { content: "Log a line", status },
    { content: "Have a sub-agent log one", status }
  ]
})
const append = (line: string) => ({ command: ["python3", "-c", `open('log.txt', 'a').write('${line}\\n')`] })
const main: Record<string, ScriptedModel.Turn> = {
  "react.turn_1": { toolCalls: [{ id: "c1", name: "write_todos", arguments: todos("pending") }] },
  "react.turn_2": { toolCalls: [{ id: "c2", name: "write_file", arguments: { path: "notes.txt", content: "notes\n" } }] },
  "react.turn_3": { toolCalls: [{ id: "c3", name: "edit_file", arguments: { path: "counter.txt", old_string: "a", new_string: "aa", replace_all: true } }] },
  "react.turn_4": { toolCalls: [{ id: "c4", name: "execute", arguments: append("main") }] },
  "react.turn_5": { toolCalls: [{ id: "c5", name: "task", arguments: { description: "Append sub to log.txt" } }] },
  "react.turn_6": { toolCalls: [{ id: "c6", name: "write_todos", arguments: todos("done") }] }
}
const sub: Record<string, ScriptedModel.Turn> = {
  "react.turn_1": { toolCalls: [{ id: "s1", name: "execute", arguments: append("sub") }] },
  "react.turn_2": "Appended."
}

const model = ScriptedModel.layer((request) =>
  Effect.flatMap(Effect.service(Model.currentCallContext), (call): Effect.Effect<ScriptedModel.Turn> => {
    const session = call?.sessionId ?? "?"
    const step = call?.step ?? "?"
    console.log(`call ${session} ${step}`)
    const turn = (session.endsWith("__task_1") ? sub : main)[step]
    if (turn !== undefined) return Effect.succeed(turn)
    if (phase === "1") return Effect.never
    const results = (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))
    console.log(`results ${JSON.stringify(results)}`)
    return Effect.succeed("Done.")
  })
)

const agent = Agent.make({ name: "deep", instructions: "", architecture: DeepAgent.makeUnsafe({ maxTurns: 20 }) })
const workspace = Workspace.layerSandbox("deep", { keep: true, files: { "counter.txt": "a\n" } }).pipe(
  Layer.provide(Sandbox.layerProcess({ isolation: isolation as "bwrap" | "process", workRoot: join(dir!, "sandbox"), allow: ["python3"] }))
)

Durable.AgentRun.execute({ agent: "deep", prompt: "Keep notes, double the a's, log lines.", runId: "run-1" }).pipe(
  Effect.provide(
    Durable.layer<Model.Model | Workspace.Workspace>([agent]).pipe(
      Layer.provideMerge(Durable.layerSqlite(join(dir!, "runs.db"))),
      Layer.provide(Layer.merge(model, workspace))
    )
  ),
  Effect.runPromise
).then(
  (result) => {
    console.log(`result ${result.output}`)
    console.log(`todos ${JSON.stringify(result.metadata.todos)}`)
    process.exit(0)
  },
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)
