/**
 * DeepAgent: the tool loop of ReAct for long tasks, with a plan and a workspace of files. The model keeps a plan with
 * `write_todos` (steps pending, in progress, done; each change a `PlanUpdated` event), shown to it on every turn;
 * works on files with `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep`; and runs commands with
 * `execute` where the workspace has a sandbox. A result too large for the context — of these tools or the agent's
 * own — is written to a file in the workspace, and the model gets its path and its head.
 *
 * The workspace is the `Workspace` in context — `Workspace.layerSandbox(taskId)` for a sandbox's workspace on disk
 * (commands in bubblewrap), `Workspace.layerMemory(files)` in memory — or, without one, a fresh workspace in memory
 * for each run. The agent's own tools come with these; its instructions come first, then `systemPrompt`. What goes
 * wrong in a tool (a path out of the workspace, a string to edit that is absent or not unique, a command that fails)
 * is a result the model reads, not a failed run. `RunResult.metadata.todos` is the plan at the end.
 *
 * With `skills` (a directory), the model sees each skill's name and description and opens one with `open_skill`.
 *
 * `task` starts a sub-agent on a described sub-task — one of `subAgents` by name, or a general one (this agent, with
 * its own context over the same workspace) — and returns only its final answer; the sub-run's events carry its own
 * session id (`<session>__task_<n>`). `maxTaskDepth` (default 1: a sub-agent gets no `task`) and `maxTasks` per run
 * (default 8) bound them.
 *
 * With `approvals` (the rules of valet.yaml's agent `approvals:`, by tool name), calls of `execute`, `write_file`,
 * `edit_file` (or any file tool) wait for a person's decision on the `HumanLoop` in context, as any tool with
 * `needsApproval`: approved, the call runs; rejected, the model reads the rejection and nothing ran. Rules are judged on
 * the arguments as the workspace acts on them (`path` normalized, `execute`'s program by its name); `matches` tests
 * the command's text, not what it does (`python3 -c …` can do anything), so a gate on a program is `true` or an
 * allow-list (`^(?!python3 -m pytest( |$))`), never a deny-list.
 *
 * In a durable run (`Durable`), the file tools and `execute` are activities (through `Architecture.addTools`): a
 * resumed run answers a finished edit or command from storage instead of doing it again. `write_todos` is not — a
 * resumed run calls it again and so rebuilds the plan — nor is `task`, whose sub-run's calls are activities under its
 * own session. This holds on a workspace that outlives the process (a directory, or a sandbox's kept with `keep: true`):
 * a fresh workspace (in memory, or a new sandbox copy) does not have the edits a resumed run's stored results report.
 * `valet run --workspace DIR` runs the agent on a sandbox copy of DIR and prints its diff (DESIGN §17).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, DeepAgent, ScriptedModel, Workspace } from "valet"
 *
 * const agent = Agent.make({ name: "coder", instructions: "You write small Python programs.", architecture: DeepAgent.makeUnsafe({ maxTurns: 30 }) })
 * const model = ScriptedModel.layer([
 *   { toolCalls: [{ name: "write_todos", arguments: { todos: [{ content: "Write hello.py", status: "in_progress" }] } }] },
 *   { toolCalls: [{ name: "write_file", arguments: { path: "hello.py", content: "print('hello')\n" } }] },
 *   "hello.py is written."
 * ])
 *
 * // In memory here; `Workspace.layerSandbox("task-1")` with a `Sandbox` puts it on disk, where `execute` runs commands.
 * const program = Effect.gen(function*() {
 *   const result = yield* Agent.run(agent, "Write hello.py")
 *   return { output: result.output, plan: result.metadata.todos, file: yield* Workspace.readText("hello.py") }
 * }).pipe(Effect.provide(Workspace.layerMemory()), Effect.provide(model))
 * ```
 *
 * @since 0.2.0
 */
import { type Duration, Effect, Option, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"
import * as ApprovalPolicy from "../core/internal/approvalPolicy.js"
import * as internal from "../core/internal/toolLoop.js"
import type * as Tool from "../core/Tool.js"
import * as Workspace from "../environment/Workspace.js"
import * as Plan from "./internal/deepAgent/plan.js"
import * as Skills from "./internal/deepAgent/skills.js"
import * as Task from "./internal/deepAgent/task.js"

/**
 * What DeepAgent adds to the agent's instructions by default: how to use the plan and the files.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultSystemPrompt = `You work on tasks of several steps in a workspace of files.
- Plan first: for a task of more than two steps, write the steps with write_todos, then keep it current (one step in_progress at a time; mark each done when it is).
- Files: ls, glob and grep to find them; read_file before you edit; edit_file replaces an exact string (include enough context to make it unique); write_file writes a whole file. Paths are relative to the workspace.
- Commands: execute runs a program with its arguments as a list (no shell), in a sandbox; use it to run tests.
- A large tool result is saved to a file: read the parts you need with read_file.
When the task is done, answer with a short summary of what you did.`

const { agents, duration, int, optional, withDefault } = Architecture.option

/** The names of the file tools and `execute`, which `approvals` may name. */
const fileToolNames = Workspace.tools().map((tool) => tool.name)

/**
 * DeepAgent, declared once: its name, options and program.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "deep_agent",
  // As the issue that asked for it spelled it (`valet run --architecture deep`).
  shortNames: ["deep"],
  title: "DeepAgent",
  description: "the tool loop for long tasks: a plan (write_todos) shown every turn, file tools over a workspace, commands in its sandbox",
  options: {
    ...internal.optionFields,
    /** Tool results longer than this (characters) are written to a file in the workspace; the model gets the path and the head. */
    largeResultChars: int(1).pipe(withDefault(20_000)),
    /** How much of such a result the model sees (characters). */
    headChars: int(0).pipe(withDefault(2_000)),
    /** Whether the model gets `execute` (commands in the workspace's sandbox). */
    execute: Schema.Boolean.pipe(withDefault(true)),
    /** Added to the agent's instructions: how to work with the plan and the files. */
    systemPrompt: Schema.String.pipe(withDefault(defaultSystemPrompt)),
    /**
     * A directory of skills (folders with a `SKILL.md`): their names and descriptions are listed to the model, which
     * opens one with `open_skill`; a broken one is logged and in `RunResult.metadata.skillErrors`.
     */
    skills: optional(Schema.String),
    /** Agents the `task` tool can start by name (their names and first lines of instructions are in its description). */
    subAgents: optional(agents),
    /** How deep `task` sub-agents go: a sub-agent this deep gets no `task` tool (0: no `task` at all). */
    maxTaskDepth: int(0).pipe(withDefault(1)),
    /** Tasks one run may start; past it `task` answers an error the model reads. */
    maxTasks: int(0).pipe(withDefault(8)),
    /**
     * Which calls of the file tools and `execute` wait for a person's decision (`HumanLoop`), by tool name — the rules
     * of valet.yaml's agent `approvals:`: `true` (every call) or `{ when: { argument, above | below | equals | matches } }`
     * (`execute`'s `command` is matched as its words joined by spaces, its program by name; a `path` as normalized).
     * `matches` tests the text, not what the command does: gate a program with `true` or an allow-list, not a deny-list.
     * A rejected call is a result the model reads.
     */
    approvals: optional(ApprovalPolicy.PolicyOf(fileToolNames)),
    /** How long a call of `approvals` waits before it is rejected; default: no limit. */
    approvalTimeout: optional(duration)
  },
  agentOptions: ["subAgents.*"],
  pathOptions: ["skills"],
  approvalTools: fileToolNames,
  // The file tools a run gets, made once per options value: a durable decision editing a call checks it against them.
  addedTools: (options) => fileTools(options),
  program: (input, options) =>
    Effect.gen(function*() {
      const found = yield* Effect.serviceOption(Workspace.Workspace)
      // An empty workspace in memory cannot fail to build.
      const workspace = Option.isSome(found) ? found.value : yield* Effect.orDie(Workspace.makeMemory())
      const state: Plan.PlanState = { todos: [] }
      const skills = options.skills === undefined ? undefined : yield* Skills.load(options.skills)
      const skillErrors = skills === undefined ? {} : { skillErrors: skills.errors.map(({ message, path }) => ({ path, message })) }
      yield* Architecture.setMetadata(() => ({ todos: state.todos, ...skillErrors }))
      const loaded = skills === undefined ? [] : skills.skills
      const listed = loaded.length > 0 ? Skills.render(loaded) : ""
      const depth = yield* Task.Depth
      const tasks = depth < options.maxTaskDepth
        ? [Task.task({ self: input.agent as Agent.Agent<unknown>, subAgents: options.subAgents ?? [], maxTasks: options.maxTasks, depth: depth + 1 })]
        : []
      const instructions = [input.agent.instructions, options.systemPrompt, listed].filter((text) => text.trim() !== "").join("\n\n")
      // The tools that touch the world, prepared as the runner prepares the agent's own (in a durable run, each call
      // an activity: a resumed run does not redo a finished edit or command). Not `write_todos`: its effect is the
      // plan in this run's memory, which a resumed run rebuilds by calling it again; not `task`: its sub-run's calls
      // are activities themselves, under its own session.
      const files = yield* Architecture.addTools(fileTools(options))
      const agent = {
        ...input.agent,
        instructions,
        // The agent's own tools keep their large results out of the context as the file tools do.
        tools: [...input.agent.tools.map((tool) => Workspace.withLargeResults(tool, sizes(options))), ...files, Plan.writeTodos(state), ...(loaded.length > 0 ? [Skills.openSkill(loaded)] : []), ...tasks]
      }
      const outcome = yield* internal.program(options, { messages: Plan.show(state) })({ ...input, agent }).pipe(
        Effect.provideService(Workspace.Workspace, workspace)
      )
      return { ...outcome, metadata: { ...outcome.metadata, todos: state.todos, ...skillErrors } }
    })
})

/** The sizes of large results in an options value. */
const sizes = (options: { readonly largeResultChars: number; readonly headChars: number }) => ({
  largeResultChars: options.largeResultChars,
  headChars: options.headChars
})

/**
 * The file tools of an options value, made once for it (each run of the architecture shares them), their calls
 * waiting for approval as `approvals` says.
 */
const made = new WeakMap<object, ReadonlyArray<Tool.Tool<unknown>>>()
const fileTools = (options: {
  readonly largeResultChars: number
  readonly headChars: number
  readonly execute: boolean
  readonly approvals?: ApprovalPolicy.Policy | undefined
  readonly approvalTimeout?: Duration.Input | undefined
}): ReadonlyArray<Tool.Tool<unknown>> => {
  let tools = made.get(options)
  if (tools === undefined) {
    const approvals = options.approvals ?? {}
    tools = (Workspace.tools({ largeResultChars: options.largeResultChars, headChars: options.headChars, execute: options.execute }) as ReadonlyArray<Tool.Tool<unknown>>)
      .map((tool) => {
        const rule = approvals[tool.name]
        // Judged on the arguments as the workspace acts on them: `./deploy/x` is `deploy/x`, `/usr/bin/rm` is `rm`.
        return rule === undefined ? tool : ApprovalPolicy.apply(tool, rule, options.approvalTimeout, (args) => Workspace.effectiveArguments(tool.name, args))
      })
    made.set(options, tools)
  }
  return tools
}

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of DeepAgent.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * DeepAgent with options, checked here (`InvalidOptions` names the field, the rule and the value).
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe
