/**
 * A remote A2A agent as a Swarm member: a swarm runs its members' turns with a program of its own (their instructions
 * and a handoff tool), which a remote agent has not here; it runs where it lives, on the task and the conversation so
 * far, and its answer ends the run.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Swarm from "../../src/architectures/Swarm.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as A2A from "../../src/providers/A2A.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

describe("A2A.agent in a Swarm", () => {
  it.live("a local member hands off to a remote one: the remote agent gets the task and the conversation, and its answer is the run's", () =>
    Effect.gen(function*() {
      const asked: Array<string> = []
      const billing = scriptedAgent("billing", (request: Model.Request) => {
        asked.push(String(request.messages?.at(-1)?.content))
        return "I have refunded the duplicate charge."
      })
      const url = yield* serveAgents([billing])
      const triage = Agent.make({ name: "triage", instructions: "You triage customer messages." })
      const desk = Agent.make({
        name: "desk",
        instructions: "",
        architecture: Swarm.makeUnsafe({ agents: [triage, A2A.agent(`${url}/a2a/billing`, { name: "billing" })], entry: "triage" })
      })
      const result = yield* Agent.run(desk, "I was charged twice.").pipe(
        Effect.provide(ScriptedModel.layer([
          { text: "A billing question.", toolCalls: [{ name: "handoff", arguments: { target: "billing", message: "duplicate charge" } }] }
        ]))
      )
      expect(result.output).toBe("I have refunded the duplicate charge.")
      expect(result.metadata).toMatchObject({ handoffs: 1, last: "billing" })
      // The remote agent's task: the swarm's task and the conversation so far (triage's text and the handoff).
      expect(asked.at(-1)).toBe("I was charged twice.\n\nThe conversation so far:\ntriage: A billing question.\n[handoff triage → billing] duplicate charge")
    }).pipe(Effect.scoped), 30_000)
})
