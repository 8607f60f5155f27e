/**
 * MultiAgentDebate: rounds of answers with a transcript in debater order (whoever finishes first), convergence as
 * DESIGN §5 defines it (and on its own example), the judge or the vote, failures and budgets, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MultiAgentDebate from "../../src/architectures/MultiAgentDebate.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import * as Journal from "../../src/core/Journal.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const lastUser = (request: Model.Request) => request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? ""

/** A debater on its own scripted model: `answers[r]` in round r, after `delays[r]` ms. */
const debater = (name: string, answers: ReadonlyArray<string>, delays: ReadonlyArray<number> = []) => {
  const seen: Array<string> = []
  const agent = Agent.make({
    name,
    instructions: `You are ${name}.`,
    model: Layer.orDie(ScriptedModel.layer((request, index) => {
      seen.push(lastUser(request))
      return { text: answers[index] ?? answers.at(-1)!, delay: `${delays[index] ?? 0} millis` }
    }))
  }) as Agent.Agent<never>
  return { agent, seen }
}

/** The debate's own agent: it makes no model call itself (its debaters and judge have their models). */
const moderator = <R>(architecture: Architecture.Architecture<R>) =>
  Agent.make({ name: "moderator", instructions: "", architecture, model: Layer.orDie(ScriptedModel.layer([])) })

describe("MultiAgentDebate", () => {
  it.effect("round 0 answers alone; later rounds see the transcript in debater order, theirs marked; agreement ends it without a judge", () =>
    Effect.gen(function*() {
      // Debater 1 is always the slowest: the transcript must still list it first.
      const a = debater("a", ["Paris", "Paris."], [300, 300])
      const b = debater("b", ["Lyon", "paris"], [10, 10])
      const judge = debater("judge", ["should not be asked"])
      const architecture = MultiAgentDebate.makeUnsafe({ debaters: [a.agent, b.agent], judge: judge.agent })
      const fiber = yield* Stream.runCollect(Agent.stream(moderator(architecture), "Capital of France?", { sessionId: "d" })).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 second")
      const events = yield* Fiber.join(fiber)
      expect(a.seen[0]).toBe("Capital of France?")
      expect(b.seen[1]).toBe(a.seen[1]!.replace("- debater_1 (you): Paris", "- debater_1: Paris").replace("- debater_2: Lyon", "- debater_2 (you): Lyon"))
      expect(a.seen[1]).toContain("Round 0:\n- debater_1 (you): Paris\n- debater_2: Lyon")
      expect(judge.seen).toEqual([])
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      expect(sessions).toEqual(expect.arrayContaining(["d__debater_1_round_0", "d__debater_2_round_0", "d__debater_1_round_1", "d__debater_2_round_1"]))
      const last = events.at(-1)!
      expect(last).toMatchObject({ _tag: "RunCompleted", result: { output: "Paris.", metadata: { decided_by: "convergence", converged_at: 1 } } })
      const names = events.filter((event) => event._tag === "Progress").map((event) => event.name)
      expect(names.filter((n) => n === "debate.response")).toHaveLength(4)
      expect(names.at(-1)).toBe("debate.converged")
    }))

  it.effect("no agreement after the last round: the judge, seeing the whole transcript, writes the answer", () =>
    Effect.gen(function*() {
      const a = debater("a", ["Paris", "Paris, clearly", "Paris it is"])
      const b = debater("b", ["Lyon", "Lyon, surely", "Lyon, final"])
      const judge = debater("judge", ["Paris is the capital of France."])
      const result = yield* Agent.run(moderator(MultiAgentDebate.makeUnsafe({ debaters: [a.agent, b.agent], judge: judge.agent })), "Capital?")
      expect(result).toMatchObject({ output: "Paris is the capital of France.", metadata: { decided_by: "judge", rounds: 2 } })
      expect(judge.seen[0]).toContain("Round 2:\n- debater_1: Paris it is\n- debater_2: Lyon, final")
      expect(result.modelCalls).toBe(7)
    }))

  it.effect("without a judge, a majority vote over normalized answers; a tie goes to the lowest debater", () =>
    Effect.gen(function*() {
      const vote = (answers: ReadonlyArray<string>) =>
        Agent.run(
          moderator(MultiAgentDebate.makeUnsafe({ debaters: answers.map((answer, i) => debater(`d${i}`, [answer]).agent), rounds: 1, convergence: 1 })),
          "?"
        )
      expect((yield* vote(["Lyon", "PARIS!", "paris"])).output).toBe("PARIS!")
      expect((yield* vote(["Lyon", "Paris"])).output).toBe("Lyon")
      expect((yield* vote(["Lyon", "Paris"])).metadata).toMatchObject({ decided_by: "vote", votes: 1 })
    }))

  it("convergence: equal once normalized, or a word-set Jaccard at the threshold; DESIGN's own example holds", () => {
    expect(MultiAgentDebate.normalize("  The  Answer: 42!  ")).toBe("the answer 42")
    expect(MultiAgentDebate.agree("The answer is 42.", "the answer is 42", 1)).toBe(true)
    // 6 shared words of 7 in all: 0.857 — agrees at 0.85, not at 0.9.
    const a = "the capital of france is paris indeed"
    const b = "the capital of france is paris"
    expect(MultiAgentDebate.jaccard(a, b)).toBeCloseTo(6 / 7)
    expect(MultiAgentDebate.agree(a, b, 0.85)).toBe(true)
    expect(MultiAgentDebate.agree(a, b, 0.9)).toBe(false)
    expect(MultiAgentDebate.converged([a, b, "Paris"], 0.85)).toBe(false)
    expect(MultiAgentDebate.converged(["Paris.", "paris", "PARIS"], 0.85)).toBe(true)
    expect(MultiAgentDebate.majority(["b", "a", "A", "b"])).toEqual({ answer: "b", votes: 2, debater: 1 })
  })

  it.effect("options are checked: fewer than two debaters, rounds 0, convergence outside [0, 1]", () =>
    Effect.gen(function*() {
      const one = debater("a", ["x"]).agent
      const message = (options: MultiAgentDebate.Options<never>) => Effect.map(Effect.flip(MultiAgentDebate.make(options)), (e) => e.message)
      expect(yield* message({ debaters: [one] })).toMatch(/^MultiAgentDebate: debaters must be at least two debaters/)
      expect(yield* message({ debaters: [one, one], rounds: 0 })).toBe("MultiAgentDebate: rounds must be an integer >= 1, got 0")
      expect(yield* message({ debaters: [one, one], convergence: 2 })).toBe("MultiAgentDebate: convergence must be a number between 0 and 1, got 2")
    }))

  it.effect("a debater that fails fails the run; a spent budget ends it interrupted with the last round's majority", () =>
    Effect.gen(function*() {
      const broken = Agent.make({ name: "broken", instructions: "", model: Layer.orDie(ScriptedModel.layer([])) }) as Agent.Agent<never>
      const failed = yield* Effect.flip(Agent.run(moderator(MultiAgentDebate.makeUnsafe({ debaters: [debater("a", ["x"]).agent, broken] })), "?"))
      expect(failed).toMatchObject({ _tag: "SubAgentFailed", role: "debater", error: { _tag: "ScriptExhausted" } })
      expect((failed as { sessionId: string }).sessionId).toMatch(/__debater_2_round_0$/)
      const capped = yield* Agent.run(
        moderator(MultiAgentDebate.makeUnsafe({ debaters: [debater("a", ["Paris", "x"]).agent, debater("b", ["Lyon", "y"]).agent, debater("c", ["paris", "z"]).agent] })),
        "?",
        { budget: { maxCalls: 4 } }
      )
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "Paris" })
    }))

  it.effect("record / replay: a debate on one model comes back from the cassette, sessions and all", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-debate-"))
      try {
        const cassette = join(dir, "debate.jsonl")
        const plain = (name: string) => Agent.make({ name, instructions: `You are ${name}.` }) as unknown as Agent.Agent<never>
        const agent = Agent.make({ name: "moderator", instructions: "", architecture: MultiAgentDebate.makeUnsafe({ debaters: [plain("a"), plain("b")], rounds: 1 }) })
        // Answers chosen by who asks, so concurrent calls get the same answers in any order.
        const script: ScriptedModel.Script = (request) => {
          const who = request.messages?.[0]?.content ?? ""
          return who.includes("You are a.") ? "Paris" : lastUser(request).includes("Round 0") ? "Paris" : "Lyon"
        }
        const recorded = yield* Agent.run(agent, "Capital?", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(ScriptedModel.layer(script))))
        )
        const replayed = yield* Agent.run(agent, "Capital?", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe(recorded.output)
        expect(replayed.metadata).toEqual(recorded.metadata)
        expect(recorded.metadata).toMatchObject({ decided_by: "convergence", converged_at: 1 })
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
