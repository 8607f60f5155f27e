/**
 * Interrupting a run of any of the six multi-agent architectures of DESIGN §5 stops everything in flight at once:
 * every model call that is waiting is interrupted (none is left running), and the run ends interrupted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Schema } from "effect"
import * as Blackboard from "../../src/architectures/Blackboard.js"
import * as MultiAgentDebate from "../../src/architectures/MultiAgentDebate.js"
import * as ReWOO from "../../src/architectures/ReWOO.js"
import * as Router from "../../src/architectures/Router.js"
import * as Swarm from "../../src/architectures/Swarm.js"
import * as TreeOfThoughts from "../../src/architectures/TreeOfThoughts.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const worker = (name: string) => Agent.make({ name, instructions: `You are ${name}.` })

/** Each case: the architecture, and the replies that lead it to a call that never answers. */
const cases: ReadonlyArray<readonly [string, Architecture.Architecture<Model.Model>, ReadonlyArray<string>]> = [
  ["MultiAgentDebate", MultiAgentDebate.makeUnsafe({ debaters: [worker("a"), worker("b"), worker("c")] }), []],
  ["TreeOfThoughts", TreeOfThoughts.makeUnsafe({ branchFactor: 3 }), ["1. x\n2. y\n3. z"]],
  ["ReWOO", ReWOO.architecture, ['[{"tool": "slow"}, {"tool": "slow"}]']],
  ["Router", Router.makeUnsafe({ routes: [{ name: "w", agent: worker("w") }] }), ["route: w"]],
  ["Swarm", Swarm.makeUnsafe({ agents: [worker("a"), worker("b")], entry: "a" }), []],
  ["Blackboard", Blackboard.makeUnsafe({ agents: [worker("a")], coordinator: worker("lead") }), ['{"agent": "a"}']]
]

describe("interrupting a multi-agent run", () => {
  for (const [name, architecture, replies] of cases) {
    it.effect(`${name}: every call in flight is interrupted at once`, () =>
      Effect.gen(function*() {
        const waiting = yield* Ref.make(0)
        const stopped = yield* Ref.make(0)
        const someWaiting = yield* Deferred.make<void>()
        // Waits forever, counting itself: what every call after the scripted replies does, and the tool ReWOO runs.
        const hang = <A>() =>
          Effect.gen(function*() {
            yield* Ref.update(waiting, (n) => n + 1)
            yield* Deferred.succeed(someWaiting, undefined)
            return yield* Effect.never as Effect.Effect<A>
          }).pipe(Effect.onInterrupt(() => Ref.update(stopped, (n) => n + 1)))
        const model = ScriptedModel.layer((_request, index) => index < replies.length ? Effect.succeed(replies[index]!) : hang<string>())
        const slowTool = Tool.make({ name: "slow", description: "", parameters: Schema.Struct({}), handler: () => hang<string>() })
        const agent = Agent.make({ name: "host", instructions: "", tools: [slowTool], architecture })
        const fiber = yield* Agent.run(agent, "task").pipe(Effect.provide(model), Effect.forkChild)
        yield* Deferred.await(someWaiting)
        // Let every concurrent call reach the model before interrupting.
        yield* Effect.yieldNow
        yield* Fiber.interrupt(fiber)
        expect(Exit.hasInterrupts(yield* Effect.exit(Fiber.join(fiber)))).toBe(true)
        expect(yield* Ref.get(stopped)).toBe(yield* Ref.get(waiting))
        expect(yield* Ref.get(waiting)).toBeGreaterThan(0)
      }))
  }
})
