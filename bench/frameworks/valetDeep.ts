/**
 * valet's `DeepAgent` on the deep-agent benchmark's work (`deepWork.ts`): `Agent.run` / `Agent.stream` (read to the
 * end), a fresh in-memory `Workspace` (`Workspace.makeMemory()`) and a `ScriptedModel` of its own per session. The agent is made once per N
 * and shared by the sessions, as a server makes it once (`deepagents.ts` does the same with its agent).
 */
import { Effect, Stream } from "effect"
import { Agent, DeepAgent, ScriptedModel, Workspace } from "valet"
import { type Call, callAt, type Check, finalText, instructions, prompt, yieldToEventLoop } from "./deepWork.js"
import type { Framework } from "./work.js"

/** A call as valet's tools take it. */
const toolCall = (call: Call): ScriptedModel.ScriptedToolCall => {
  switch (call.tool) {
    case "write_todos":
      return { name: "write_todos", arguments: { todos: call.todos } }
    case "write_file":
      return { name: "write_file", arguments: { path: call.path, content: call.content } }
    case "read_file":
      return { name: "read_file", arguments: { path: call.path } }
    case "edit_file":
      return { name: "edit_file", arguments: { path: call.path, old_string: call.oldString, new_string: call.newString } }
    case "ls":
      return { name: "ls", arguments: {} }
  }
}

const makeAgent = (steps: number) =>
  Agent.make({ name: "notes", instructions, architecture: DeepAgent.makeUnsafe({ maxTurns: steps + 1, execute: false }) })

const agents = new Map<number, ReturnType<typeof makeAgent>>()
/** The agent of `steps`-step sessions: DeepAgent's defaults (plan, file tools, `task`), no `execute` (no sandbox here, as `deepagents`' state backend has none). */
const agentFor = (steps: number) => {
  let agent = agents.get(steps)
  if (agent === undefined) {
    agent = makeAgent(steps)
    agents.set(steps, agent)
  }
  return agent
}

/** A session's scripted model: a context of its own, as each session of the other frameworks has its own mock. */
const modelFor = (steps: number, yieldPerCall: boolean) => {
  const turn = (index: number): ScriptedModel.Turn => {
    const call = callAt(index + 1, steps)
    return call === undefined ? finalText : { toolCalls: [toolCall(call)] }
  }
  return ScriptedModel.context(
    yieldPerCall ? (_request, index) => Effect.as(Effect.promise(yieldToEventLoop), turn(index)) : (_request, index) => turn(index)
  )
}

/** A fresh workspace in memory per session (what DeepAgent makes itself when none is in context). */
const freshWorkspace = Effect.orDie(Workspace.makeMemory())

export const valetDeep: Framework = {
  name: "valet-deep",
  run: (steps, options) => {
    const agent = agentFor(steps)
    const program = options.stream
      ? Agent.stream(agent, prompt).pipe(
        Stream.runFold(() => "", (output, event) => (event._tag === "RunCompleted" ? event.result.output : output))
      )
      : Effect.map(Agent.run(agent, prompt), (result) => result.output)
    return Effect.runPromise(
      program.pipe(Effect.provideServiceEffect(Workspace.Workspace, freshWorkspace), Effect.provide(modelFor(steps, options.yieldPerCall)))
    )
  }
}

/**
 * One session of `steps`, then what it did and left: the answer, each tool result (name, error or not, text), the
 * file and the plan — the benchmark checks that the work was done, the same on both sides.
 */
export const check = (steps: number): Promise<Check> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const workspace = yield* freshWorkspace
      const events = yield* Agent.stream(agentFor(steps), prompt).pipe(
        Stream.runCollect,
        Effect.provideService(Workspace.Workspace, workspace),
        Effect.provide(modelFor(steps, false))
      )
      let output = ""
      let plan: unknown = undefined
      const results: Array<Check["results"][number]> = []
      for (const event of events) {
        if (event._tag === "ToolReturned") results.push({ tool: event.name, isError: event.isError, content: event.content })
        if (event._tag === "PlanUpdated") plan = event.todos
        if (event._tag === "RunCompleted") output = event.result.output
      }
      const file = yield* Effect.orDie(workspace.readText("notes.md"))
      return { output, results, file, plan: JSON.stringify(plan) }
    })
  )
