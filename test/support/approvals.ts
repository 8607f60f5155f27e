/**
 * What the served approval tests share: a "support" agent on its own scripted model whose `refund` tool waits for a
 * person's approval on every call, and the amounts it refunded.
 */
import { type Duration, Effect, Layer, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

/** The agent (named "support") and the amounts its `refund` tool ran with, in order. */
export const supportAgent = (script: ScriptedModel.Script, options: { readonly approvalTimeout?: Duration.Input } = {}) => {
  const ran: Array<number> = []
  const refund = Tool.make({
    name: "refund",
    description: "Refunds",
    parameters: Schema.Struct({ amount: Schema.Number }),
    handler: ({ amount }) => Effect.sync(() => (ran.push(amount), `refunded ${amount}`)),
    needsApproval: true,
    ...(options.approvalTimeout !== undefined ? { approvalTimeout: options.approvalTimeout } : {})
  })
  const agent = Agent.make({
    name: "support",
    instructions: "Help.",
    tools: [refund],
    model: Layer.orDie(ScriptedModel.layer(script))
  }) as Agent.Agent<never>
  return { agent, ran }
}

/** A model's call of `refund`. */
export const refundCall = (id: string, amount: number) => ({ id, name: "refund", arguments: { amount } })
