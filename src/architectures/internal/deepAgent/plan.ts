/**
 * DeepAgent's plan: the `write_todos` tool replaces the run's list of steps (each pending, in progress or done), each
 * change is a `PlanUpdated` event, and the plan is shown to the model on every turn — in the system message, beside
 * the conversation rather than in it, so it is always the current one and never repeated.
 */
import { Effect, Option, Schema } from "effect"
import * as AgentEvent from "../../../core/AgentEvent.js"
import * as Runtime from "../../../core/internal/runtime.js"
import * as Model from "../../../core/Model.js"
import * as Tool from "../../../core/Tool.js"

/** The tool's name. */
export const toolName = "write_todos"

/** Steps a plan holds at most: a model that lists more is told to group them. */
export const maxTodos = 100

/** The plan of one run: replaced whole by each `write_todos` call. */
export interface PlanState {
  todos: ReadonlyArray<AgentEvent.Todo>
  /**
   * The system message last shown with the plan, and what it was made from: the same message object while neither
   * changes, so compaction's size check (which keys on the messages' identity) measures only what is new.
   */
  shown?: { readonly from: Model.Message | undefined; readonly todos: ReadonlyArray<AgentEvent.Todo>; readonly message: Model.Message } | undefined
}

const summary = (todos: ReadonlyArray<AgentEvent.Todo>): string => {
  const done = todos.filter((todo) => todo.status === "done").length
  const current = todos.find((todo) => todo.status === "in_progress")
  const next = todos.find((todo) => todo.status === "pending")
  return `Plan updated: ${done} of ${todos.length} steps done.` +
    (current !== undefined ? ` In progress: ${current.content}` : next !== undefined ? ` Next: ${next.content}` : "")
}

/** The `write_todos` tool over a run's plan; a change emits `PlanUpdated` in the run it is called in. */
export const writeTodos = (state: PlanState): Tool.Tool =>
  Tool.make({
    name: toolName,
    description: "Writes your plan for the task: the whole list of steps, in order, each with its status (pending, in_progress, done). " +
      "Make one at the start of a task of several steps; call it again whenever a step starts or is done, or the plan changes. " +
      "Keep one step in_progress at a time. The current plan is shown to you on every turn.",
    parameters: Schema.Struct({ todos: Schema.Array(AgentEvent.Todo) }),
    handler: ({ todos }) =>
      Effect.gen(function*() {
        if (todos.length > maxTodos) return yield* Effect.fail(`a plan holds at most ${maxTodos} steps, got ${todos.length}: group them`)
        const blank = todos.findIndex((todo) => todo.content.trim() === "")
        if (blank !== -1) return yield* Effect.fail(`todos[${blank}].content is empty: say what the step is`)
        state.todos = todos
        const run = yield* Effect.serviceOption(Runtime.CurrentRun)
        if (Option.isSome(run)) {
          yield* Runtime.emitWith(run.value, (timestamp) => ({ _tag: "PlanUpdated", sessionId: run.value.sessionId, timestamp, todos }))
        }
        return summary(todos)
      })
  })

/** The plan as the model reads it. */
export const render = (todos: ReadonlyArray<AgentEvent.Todo>): string =>
  `## Your plan (update it with ${toolName})\n${todos.map((todo, i) => `${i + 1}. [${todo.status}] ${todo.content}`).join("\n")}`

/**
 * The messages of a call with the plan shown: added to the first system message (or as one, first), when there is a
 * plan. Before the first `write_todos` the messages are left as they are.
 */
export const show = (state: PlanState) => (messages: Array<Model.Message>): Array<Model.Message> => {
  if (state.todos.length === 0) return messages
  const first = messages[0]
  const from = first !== undefined && first.role === "system" ? first : undefined
  let shown = state.shown
  if (shown === undefined || shown.from !== from || shown.todos !== state.todos) {
    const plan = render(state.todos)
    const message = Model.system(from === undefined ? plan : `${Model.textOf(from.content)}\n\n${plan}`)
    shown = state.shown = { from, todos: state.todos, message }
  }
  if (from !== undefined) messages[0] = shown.message
  else messages.unshift(shown.message)
  return messages
}
