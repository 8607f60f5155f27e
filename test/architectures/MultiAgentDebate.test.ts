/**
 * MultiAgentDebate: rounds of answers with a transcript in debater order (whoever finishes first), convergence as
 * DESIGN §5 defines it (and on its own example), the judge or the vote, failures and budgets, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as MultiAgentDebate from "../../src/architectures/MultiAgentDebate.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const lastUser = (request: Model.Request) => Model.textOf(request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? "")

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
  it.effect("round 0 answers alone; later rounds see one transcript in debater order, then who they are; agreement ends it without a judge", () =>
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
      // The same text for both up to who they are, which comes last: a prefix cache serves the second one's debate.
      expect(b.seen[1]).toBe(a.seen[1]!.replace("you are debater_1.", "you are debater_2."))
      expect(a.seen[1]).toContain("Round 0:\n- debater_1: Paris\n- debater_2: Lyon\n\nThis is round 1, and you are debater_1.")
      expect(judge.seen).toEqual([])
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      expect(sessions).toEqual(expect.arrayContaining(["d__debater_1_round_0", "d__debater_2_round_0", "d__debater_1_round_1", "d__debater_2_round_1"]))
      const last = events.at(-1)!
      expect(last).toMatchObject({ _tag: "RunCompleted", result: { output: "Paris.", metadata: { decided_by: "convergence", converged_at: 1 } } })
      const names = events.filter((event) => event._tag === "Progress").map((event) => event.name)
      expect(names.filter((n) => n === "multi_agent_debate.response")).toHaveLength(4)
      expect(names.at(-1)).toBe("multi_agent_debate.converged")
      expect(names.every((n) => n.startsWith("multi_agent_debate."))).toBe(true)
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
          moderator(MultiAgentDebate.makeUnsafe({ debaters: answers.map((answer, i) => debater(`d${i}`, [answer]).agent), maxRounds: 1, convergence: 1 })),
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

  it.effect("options are checked: fewer than two debaters, maxRounds 0, convergence outside [0, 1]", () =>
    Effect.gen(function*() {
      const one = debater("a", ["x"]).agent
      const message = (options: MultiAgentDebate.Options) => Effect.map(Effect.flip(MultiAgentDebate.make(options)), (e) => e.message)
      expect(yield* message({ debaters: [one] })).toMatch(/^MultiAgentDebate: debaters must be at least two debaters/)
      expect(yield* message({ debaters: [one, one], maxRounds: 0 })).toBe("MultiAgentDebate: maxRounds must be an integer >= 1, got 0")
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
        const agent = Agent.make({ name: "moderator", instructions: "", architecture: MultiAgentDebate.makeUnsafe({ debaters: [plain("a"), plain("b")], maxRounds: 1 }) })
        // Answers chosen by who asks, so concurrent calls get the same answers in any order.
        const script: ScriptedModel.Script = (request) => {
          const who = Model.textOf(request.messages?.[0]?.content ?? "")
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

  it.effect("rounds, the deprecated name of maxRounds, still limits the rounds", () =>
    Effect.gen(function*() {
      const run = (options: { readonly rounds: number } | { readonly maxRounds: number }) =>
        Agent.run(moderator(MultiAgentDebate.makeUnsafe({ debaters: [debater("a", ["x", "x1", "x2"]).agent, debater("b", ["y", "y1", "y2"]).agent], ...options })), "?")
      const old = yield* run({ rounds: 1 })
      const current = yield* run({ maxRounds: 1 })
      expect(old).toMatchObject({ output: "x1", modelCalls: 4, metadata: { decided_by: "vote", rounds: 1 } })
      expect(old.metadata).toEqual(current.metadata)
    }))

  it.effect("{task} names the task in the debater's and the judge's templates; the old {question} still gets it", () =>
    Effect.gen(function*() {
      const prompts = (debaterPrompt: string, judgePrompt: string) =>
        Effect.gen(function*() {
          const a = debater("a", ["x", "x1"])
          const judge = debater("judge", ["z"])
          yield* Agent.run(
            moderator(MultiAgentDebate.makeUnsafe({ debaters: [a.agent, debater("b", ["y", "y1"]).agent], judge: judge.agent, maxRounds: 1, debaterPrompt, judgePrompt })),
            "Capital?"
          )
          return [a.seen[1], judge.seen[0]]
        })
      const current = yield* prompts("{task} (round {round})", "Judge: {task}")
      expect(current).toEqual(["Capital? (round 1)", "Judge: Capital?"])
      expect(yield* prompts("{question} (round {round})", "Judge: {question}")).toEqual(current)
      expect(MultiAgentDebate.defaultDebaterPrompt.startsWith("{task}\n")).toBe(true)
      expect(MultiAgentDebate.defaultJudgePrompt.startsWith("{task}\n")).toBe(true)
    }))

  it.effect("a debaterPrompt without {debater} keeps valet 0.1's transcript: each debater's own answers marked (you)", () =>
    Effect.gen(function*() {
      const a = debater("a", ["Paris", "Paris."])
      const b = debater("b", ["Lyon", "paris"])
      yield* Agent.run(
        moderator(MultiAgentDebate.makeUnsafe({ debaters: [a.agent, b.agent], maxRounds: 1, debaterPrompt: "{task}\n\n{transcript}" })),
        "Capital of France?"
      )
      expect([a.seen[1], b.seen[1]]).toEqual([
        "Capital of France?\n\nRound 0:\n- debater_1 (you): Paris\n- debater_2: Lyon",
        "Capital of France?\n\nRound 0:\n- debater_1: Paris\n- debater_2 (you): Lyon"
      ])
    }))

  it.effect("a debater that stops at its own limit ends the run debater_<i>:round_<r>, with the last complete round's majority", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const busy = Agent.make({
        name: "busy",
        instructions: "",
        tools: [noop],
        maxTurns: 1,
        model: Layer.orDie(ScriptedModel.layer(["Paris", { text: "Let me look…", toolCalls: [{ name: "noop" }] }]))
      }) as Agent.Agent<never>
      const result = yield* Agent.run(
        moderator(MultiAgentDebate.makeUnsafe({ debaters: [debater("a", ["Lyon", "Lyon"], [0, 100]).agent, busy, debater("c", ["paris", "Paris"], [0, 100]).agent] })),
        "Capital?"
      ).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(result)).toMatchObject({
        interrupted: true,
        interruptionReason: "debater_2:round_1:max_turns_exceeded",
        output: "Paris",
        metadata: { decided_by: "interrupted", rounds: 0, transcript: [["Lyon", "Paris", "paris"]] }
      })
    }))

  it.effect("a judge that stops at its own limit answers its partial text; one refused by the budget leaves the last round's majority", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const judge = Agent.make({
        name: "judge",
        instructions: "",
        tools: [noop],
        maxTurns: 1,
        model: Layer.orDie(ScriptedModel.layer([{ text: "Paris, I think", toolCalls: [{ name: "noop" }] }]))
      }) as Agent.Agent<never>
      const debate = () =>
        moderator(MultiAgentDebate.makeUnsafe({ debaters: [debater("a", ["Lyon", "Lyon!"]).agent, debater("b", ["Paris", "Paris!"]).agent], judge, maxRounds: 1 }))
      const stopped = yield* Agent.run(debate(), "Capital?")
      expect(stopped).toMatchObject({
        interrupted: true,
        interruptionReason: "judge:max_turns_exceeded",
        output: "Paris, I think",
        metadata: { decided_by: "judge", rounds: 1 }
      })
      // Four debater calls, then the budget refuses the judge's: the answer is the last round's majority, not "".
      const refused = yield* Agent.run(debate(), "Capital?", { budget: { maxCalls: 4 } })
      expect(refused).toMatchObject({
        interrupted: true,
        interruptionReason: "budget:max_calls",
        output: "Lyon!",
        modelCalls: 4,
        metadata: { decided_by: "budget", rounds: 1 }
      })
    }))
})
