/**
 * DeepAgent's sub-agents: the `task` tool starts a sub-agent — one of the configured ones, by name, or a general one
 * (the running agent itself: its instructions and tools, DeepAgent's file tools over the same workspace) — with its
 * own context on a described sub-task. Only its final answer returns to the model; its events are the child run's
 * (`runChild`: `<session>__task_<n>`, framed by `SubRunStarted` / `SubRunCompleted`). A sub-agent deeper than
 * `maxTaskDepth` gets no `task` tool; past `maxTasks` in one run, or for an unknown agent, the tool answers an error
 * the model reads. A turn's calls run concurrently in the tool loop, so several tasks of one turn run at once.
 */
import { Context, Duration, Effect, Schema } from "effect"
import type * as Agent from "../../../core/Agent.js"
import * as Architecture from "../../../core/Architecture.js"
import * as Tool from "../../../core/Tool.js"

/** The tool's name. */
export const toolName = "task"

/** How deep the current run is in `task` sub-agents: 0 for a run not started by `task`. */
export const Depth = Context.Reference<number>("valet/DeepAgent/TaskDepth", { defaultValue: () => 0 })

/** What the `task` tool is made from. */
export interface TaskOptions {
  /** The running agent, run as the general sub-agent (with its architecture: DeepAgent). */
  readonly self: Agent.Agent<unknown>
  /** The configured sub-agents, by name. */
  readonly subAgents: ReadonlyArray<Agent.Agent<unknown>>
  /** Tasks this run may start at most. */
  readonly maxTasks: number
  /** The depth the sub-agents run at (the current run's depth + 1). */
  readonly depth: number
}

/** What the model is told about an agent: the first line of its instructions, cut to 200 characters. */
const describe = (agent: Agent.Agent<unknown>): string => {
  const line = agent.instructions.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "") ?? "(no instructions)"
  return line.length <= 200 ? line : `${line.slice(0, 199)}…`
}

/** The `task` tool of one run: counts the run's tasks and numbers their session ids. */
export const task = (options: TaskOptions): Tool.Tool<Architecture.CurrentRun> => {
  const byName = new Map(options.subAgents.map((agent) => [agent.name, agent]))
  const known = options.subAgents.map((agent) => agent.name)
  const roster = options.subAgents.map((agent) => `- ${agent.name}: ${describe(agent)}`).join("\n")
  let started = 0
  return Tool.make({
    name: toolName,
    description: "Give a self-contained sub-task to a sub-agent with its own context; only its final answer comes back. " +
      "Describe everything it needs to know. Several task calls in one turn run at the same time." +
      (known.length > 0
        ? ` Without \`agent\`, a general agent like you (same tools and files) does it; or name one of these agents:\n${roster}`
        : " A general agent like you (same tools and files) does it."),
    parameters: Schema.Struct({
      description: Schema.String.annotate({ description: "the sub-task: everything the sub-agent needs to know" }),
      agent: Schema.optional(Schema.String.annotate({ description: "the name of a configured sub-agent; omit for a general one" }))
    }),
    // A sub-agent is a whole agent run: the run's budget bounds it, not a tool timeout.
    timeout: Duration.infinity,
    handler: ({ agent: name, description }) =>
      Effect.gen(function*() {
        let agent = options.self
        if (name !== undefined) {
          const found = byName.get(name)
          if (found === undefined) {
            return yield* Effect.fail(
              `unknown agent ${JSON.stringify(name)}: ` +
                (known.length > 0 ? `the agents are ${known.join(", ")} (or omit agent for a general one)` : "there are no configured agents: omit agent")
            )
          }
          agent = found
        }
        if (started >= options.maxTasks) {
          return yield* Effect.fail(`this run may start at most ${options.maxTasks} tasks, and has: do the rest yourself`)
        }
        started += 1
        const n = started
        const ran = yield* Architecture.roleResult(agent, description, { role: toolName, index: n }).pipe(
          Effect.provideService(Depth, options.depth)
        )
        if (ran._tag === "Completed") return ran.result.output
        if (ran._tag === "Interrupted") {
          return yield* Effect.fail(`task ${n} stopped early (${ran.reason})` + (ran.result.output !== "" ? `; its partial answer: ${ran.result.output}` : ""))
        }
        return yield* Effect.fail(`task ${n} failed: ${ran.reason}: ${ran.error.error.message}`)
      })
  }) as unknown as Tool.Tool<Architecture.CurrentRun>
}
