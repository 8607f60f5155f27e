import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ActorCritic from "../../src/architectures/ActorCritic.js"
import * as MultiAgentDebate from "../../src/architectures/MultiAgentDebate.js"
import * as PlanAndExecute from "../../src/architectures/PlanAndExecute.js"
import * as ReAct from "../../src/architectures/ReAct.js"
import * as Reflexion from "../../src/architectures/Reflexion.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Supervisor from "../../src/architectures/Supervisor.js"
import * as Agent from "../../src/core/Agent.js"
import { InvalidOptions } from "../../src/core/AgentError.js"
import * as Architecture from "../../src/core/Architecture.js"

const actor = Agent.make({ name: "actor", instructions: "" })
const critic = Agent.make({ name: "critic", instructions: "" })

// One bad option per architecture, with the exact line a user reads, and a misspelt key.
const cases = [
  {
    module: "ReAct",
    make: (options: object) => ReAct.make(options as ReAct.Options),
    makeUnsafe: (options: object) => ReAct.makeUnsafe(options as ReAct.Options),
    valid: {},
    bad: { maxTurns: 0 },
    message: "ReAct: maxTurns must be an integer >= 1, got 0",
    typo: { maxTurn: 3 }
  },
  {
    module: "SelfRefine",
    make: (options: object) => SelfRefine.make(options),
    makeUnsafe: (options: object) => SelfRefine.makeUnsafe(options),
    valid: { maxRounds: undefined },
    bad: { maxRounds: 0 },
    message: "SelfRefine: maxRounds must be an integer >= 1, got 0",
    typo: { maxRound: 3 }
  },
  {
    module: "ActorCritic",
    make: (options: object) => ActorCritic.make({ actor, critic, ...options }),
    makeUnsafe: (options: object) => ActorCritic.makeUnsafe({ actor, critic, ...options }),
    valid: { approvalThreshold: undefined },
    bad: { approvalThreshold: 1.5 },
    message: "ActorCritic: approvalThreshold must be a number between 0 and 1, got 1.5",
    typo: { treshold: 0.5 }
  },
  {
    module: "PlanAndExecute",
    make: (options: object) => PlanAndExecute.make(options),
    makeUnsafe: (options: object) => PlanAndExecute.makeUnsafe(options),
    valid: { maxSteps: undefined },
    bad: { maxSteps: -1 },
    message: "PlanAndExecute: maxSteps must be an integer >= 1, got -1",
    typo: { maxStep: 3 }
  },
  {
    module: "Reflexion",
    make: (options: object) => Reflexion.make(options),
    makeUnsafe: (options: object) => Reflexion.makeUnsafe(options),
    valid: { threshold: undefined },
    bad: { maxRounds: 2.5 },
    message: "Reflexion: maxRounds must be an integer >= 1, got 2.5",
    typo: { attempts: 3 }
  },
  {
    module: "MultiAgentDebate",
    make: (options: object) => MultiAgentDebate.make({ debaters: [actor, critic], ...options }),
    makeUnsafe: (options: object) => MultiAgentDebate.makeUnsafe({ debaters: [actor, critic], ...options }),
    valid: { maxRounds: undefined },
    bad: { convergence: -1 },
    message: "MultiAgentDebate: convergence must be a number between 0 and 1, got -1",
    typo: { round: 2 }
  },
  {
    module: "Supervisor",
    make: (options: object) => Supervisor.make({ workers: [actor], ...options }),
    makeUnsafe: (options: object) => Supervisor.makeUnsafe({ workers: [actor], ...options }),
    valid: { concurrency: undefined },
    bad: { concurrency: 0 },
    message: "Supervisor: concurrency must be an integer >= 1, got 0",
    typo: { concurency: 2 }
  }
]

describe("architecture options", () => {
  for (const c of cases) {
    it.effect(`${c.module}: a bad option is one line naming the field, the rule and the value`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(c.make(c.bad))
        expect(error).toBeInstanceOf(InvalidOptions)
        expect(error.message).toBe(c.message)
      }))

    it.effect(`${c.module}: an unknown key is refused, an undefined one takes the default`, () =>
      Effect.gen(function*() {
        const typo = yield* Effect.flip(c.make(c.typo))
        expect(typo.message).toBe(`${c.module}: ${Object.keys(c.typo)[0]} is not a known option`)
        const valid = yield* c.make(c.valid)
        expect(Architecture.isArchitecture(valid)).toBe(true)
      }))

    it(`${c.module}: makeUnsafe answers the architecture or throws the InvalidOptions`, () => {
      expect(Architecture.isArchitecture(c.makeUnsafe(c.valid))).toBe(true)
      expect(() => c.makeUnsafe(c.bad)).toThrow(c.message)
      try {
        c.makeUnsafe(c.bad)
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidOptions)
      }
    })
  }
})
