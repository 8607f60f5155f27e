/**
 * People in the loop (DESIGN §15): a tool call that needs approval (`Tool.make({ needsApproval })`,
 * `Tool.withApproval`) waits for a person's decision. The run emits `ApprovalRequested` and the call waits — the
 * other calls of its turn go on, and each waiting call resumes on its own decision: approved, the tool runs with the
 * arguments as approved (edited ones checked by the tool's schema when the decision is made); rejected, the model
 * reads `ERROR: rejected: <reason>`; a call whose `approvalTimeout` passes is rejected. `ApprovalDecided` says how.
 *
 * `HumanLoop` is where waiting calls are found and decided: `pending` lists them, `decide` resumes one. `layer` keeps
 * them in this process (a waiting call is a fiber on a `Deferred`: it holds no thread and costs a few objects).
 * Without a `HumanLoop` in context, a call that needs approval is rejected at once: nobody can approve it.
 *
 * @example
 * ```ts
 * import { Effect, Fiber, Schema } from "effect"
 * import { Agent, HumanLoop, ScriptedModel, Tool } from "valet"
 *
 * const refund = Tool.make({
 *   name: "refund",
 *   description: "Refunds an order",
 *   parameters: Schema.Struct({ order: Schema.String, amount: Schema.Number }),
 *   handler: ({ order, amount }) => Effect.succeed(`refunded ${amount} on ${order}`),
 *   needsApproval: ({ amount }) => Effect.succeed(amount > 100)
 * })
 * const agent = Agent.make({ name: "support", instructions: "Help.", tools: [refund] })
 *
 * const program = Effect.gen(function*() {
 *   const run = yield* Effect.forkChild(Agent.run(agent, "Refund order 7, 250 EUR."))
 *   // Someone looks at what waits, and decides (an app would do this from its UI, over HTTP).
 *   const [waiting] = yield* HumanLoop.awaitPending(1)
 *   yield* HumanLoop.decide(waiting!.toolCallId, { approved: true, arguments: { order: "7", amount: 200 } })
 *   return yield* Fiber.join(run)
 * }).pipe(
 *   Effect.provide(HumanLoop.layer),
 *   Effect.provide(ScriptedModel.layer([
 *     { toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7", amount: 250 } }] },
 *     "Refunded 200 EUR."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { type Duration, Effect, Option, Schema } from "effect"
import * as Question from "./internal/question.js"
import * as Runtime from "./internal/runtime.js"
import * as Tool from "./Tool.js"

export * from "./internal/humanLoop.js"

/**
 * The built-in tool that lets an agent ask a person (`ask_human` by default): its argument is the question, its
 * result the person's answer (text); nobody to ask, or no answer within `timeout`, is an `ERROR:` result the model
 * reads. Give it to an agent like any tool: `Agent.make({ tools: [HumanLoop.askTool()] })`.
 *
 * @example
 * ```ts
 * import { Agent, HumanLoop } from "valet"
 *
 * const agent = Agent.make({ name: "planner", instructions: "Ask when unsure.", tools: [HumanLoop.askTool({ timeout: "30 minutes" })] })
 * ```
 *
 * @since 0.2.0
 * @category tools
 */
export const askTool = (options: {
  readonly name?: string | undefined
  readonly description?: string | undefined
  readonly timeout?: Duration.Input | undefined
} = {}): Tool.Tool => {
  const tool = Tool.make({
    name: options.name ?? "ask_human",
    description: options.description ??
      "Asks the person you work for a question and waits for the answer. Use it when you need a fact or a choice only they can give.",
    parameters: Schema.Struct({ question: Schema.String }),
    // The run's own ask (its events, its question ids) when the tool runs inside one.
    handler: ({ question }) =>
      Effect.flatMap(Effect.serviceOption(Runtime.CurrentRun), (run) =>
        Option.isNone(run)
          ? Effect.fail(`nobody can answer here: the tool ran outside a run`)
          : Runtime.ask(question, Schema.String, { timeout: options.timeout }).pipe(
            Effect.provideService(Runtime.CurrentRun, run.value),
            Effect.mapError((error) => `no answer: ${error.reason}`)
          )),
    // A question waits as long as the person takes (its own timeout decides), not the tool default's 30 seconds.
    timeout: "365 days"
  })
  Question.asksPeople.add(tool.call)
  return tool
}
