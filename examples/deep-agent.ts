/**
 * DeepAgent on a copy of `examples/deep-agent/project/` in the sandbox: the agent plans four steps (`write_todos`),
 * runs the failing test, asks a sub-agent (`task`) why it fails, fixes `calc.py` with `edit_file`, runs the test again
 * (it passes), and answers with the sub-agent's finding folded in. The project directory is never touched: the run
 * ends with the diff of the copy — what `valet run --architecture deep_agent --workspace DIR` prints.
 * Run alone: `npx tsx examples/deep-agent.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Stream } from "effect"
import { fileURLToPath } from "node:url"
import { Agent, AgentEvent, DeepAgent, type Model, type ScriptedModel } from "../src/index.js"
// Subpath exports in an app: `import * as Sandbox from "valet/Sandbox"`, `import * as Workspace from "valet/Workspace"`.
import * as Sandbox from "../src/environment/Sandbox.js"
import * as Workspace from "../src/environment/Workspace.js"
import { demoModel } from "./support/model.js"

/** The project the agent works on (a copy of it). */
export const projectPath = fileURLToPath(new URL("./deep-agent/project", import.meta.url))

export const prompt = "Make test_calc.py pass."

const todos = (...steps: ReadonlyArray<readonly [string, "pending" | "in_progress" | "done"]>) => ({
  todos: steps.map(([content, status]) => ({ content, status }))
})
const plan = ["Run the test", "Find out why it fails", "Fix calc.py", "Run the test again"] as const
/** The plan with the first `done` steps done and the next one in progress. */
const planAt = (done: number) => todos(...plan.map((step, i) => [step, i < done ? "done" : i === done ? "in_progress" : "pending"] as const))

const userText = (request: Model.Request): string =>
  request.messages?.filter((message) => message.role === "user").map((message) => typeof message.content === "string" ? message.content : "").join("\n") ?? ""
const toolResults = (request: Model.Request): number => request.messages?.filter((message) => message.role === "tool").length ?? 0

/**
 * What a model would answer, for runs without a server. The sub-agent (its task names calc.py) reads the file and
 * answers; the agent's own turns follow its plan, one tool call a turn.
 */
export const script: ScriptedModel.Script = (request) => {
  if (userText(request).includes("Read calc.py")) {
    return toolResults(request) === 0
      ? { toolCalls: [{ name: "read_file", arguments: { path: "calc.py" } }] }
      : "add returns a - b: it subtracts. It should return a + b."
  }
  const turns: ReadonlyArray<ScriptedModel.Turn> = [
    { toolCalls: [{ name: "write_todos", arguments: planAt(0) }] },
    { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_calc.py"] } }] },
    { toolCalls: [{ name: "write_todos", arguments: planAt(1) }] },
    { toolCalls: [{ name: "task", arguments: { description: "Read calc.py and say in one line why add(2, 3) is not 5." } }] },
    { toolCalls: [{ name: "write_todos", arguments: planAt(2) }] },
    { toolCalls: [{ name: "edit_file", arguments: { path: "calc.py", old_string: "return a - b", new_string: "return a + b" } }] },
    { toolCalls: [{ name: "write_todos", arguments: planAt(3) }] },
    { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_calc.py"] } }] },
    { toolCalls: [{ name: "write_todos", arguments: planAt(4) }] },
    "test_calc.py passes: add subtracted (a - b, found by the sub-agent); it now returns a + b."
  ]
  return turns[Math.min(toolResults(request), turns.length - 1)]!
}

export const agent = Agent.make({
  name: "coder",
  instructions: "You fix small Python projects.",
  architecture: DeepAgent.makeUnsafe({ maxTurns: 20 })
})

// The sandbox fails closed: without bubblewrap it refuses to build. This demo's commands are scripted, not a
// model's, so it opts into plain processes explicitly when bubblewrap is missing, and says so.
const sandbox = Layer.effect(
  Sandbox.Sandbox,
  Sandbox.make({ allow: ["python3"] }).pipe(
    Effect.catchIf(
      (error) => error.reason === "isolation_unavailable",
      (error) =>
        Effect.andThen(
          Console.log(`sandbox: ${error.message}; this demo opts into plain processes (its commands are scripted)`),
          Sandbox.make({ allow: ["python3"], isolation: "process" })
        )
    )
  )
)

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# DeepAgent — ${note}`)
  yield* Effect.scoped(Effect.gen(function*() {
    // The agent works on a copy: the project stays as it is; `copy.apply` would write the changes back.
    const copy = yield* Workspace.makeSandboxCopy("deep-agent-demo", projectPath)
    yield* Console.log(`sandbox: ${(yield* Sandbox.info).isolation} isolation, a copy of examples/deep-agent/project`)
    yield* Agent.stream(agent, prompt, { textDeltas: false }).pipe(
      Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
      Effect.provideService(Workspace.Workspace, copy.workspace),
      Effect.provide(layer)
    )
    const changes = yield* copy.changes
    yield* Console.log(`changed: ${changes.changedFiles.join(", ")}\n${changes.diff.trimEnd()}`)
  })).pipe(Effect.provide(sandbox))
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
