import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as Ensemble from "../../src/architectures/Ensemble.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")
const systemOf = (request: Model.Request): string =>
  (request.messages ?? []).find((message) => message.role === "system")?.content ?? ""
const proposed = (prompt: string): string => /Proposed answer: (.*)/.exec(prompt)![1]!

const solvers: ReadonlyArray<Ensemble.Solver> = [
  { name: "a", prompt: "You are solver a." },
  { name: "b", prompt: "You are solver b." },
  { name: "c", prompt: "You are solver c." }
]

type Turn = ScriptedModel.Turn
interface Roles {
  /** The solver's reply to its `call`-th request (from 0). */
  readonly solve: (solver: string, call: number, prompt: string) => Turn
  readonly critic?: (answer: string, prompt: string) => Turn
  readonly judge?: (answer: string, prompt: string) => Turn
}

/** A scripted model answering each role by what its request says; counts each solver's calls. */
const rolesScript = (roles: Roles) => {
  const solverCalls = new Map<string, number>()
  return (request: Model.Request): Turn => {
    const user = lastUser(request)
    if (user.includes("A solver proposed")) return roles.critic?.(proposed(user), user) ?? `{"risk": 0.1, "notes": "fine"}`
    if (user.includes("Judge a proposed")) {
      return roles.judge?.(proposed(user), user) ?? `{"score": 0.9, "confidence": 0.9, "is_correct": null, "notes": "ok"}`
    }
    const solver = /You are solver (\w+)\./.exec(user)?.[1] ?? "?"
    const call = solverCalls.get(solver) ?? 0
    solverCalls.set(solver, call + 1)
    return roles.solve(solver, call, user)
  }
}

const agentWith = <const O extends Ensemble.Options>(architecture: O) =>
  Effect.map(Ensemble.make({ solvers, ...architecture }), (ensemble) =>
    Agent.make({ name: "solver-team", instructions: "", architecture: ensemble }))

const runStreamed = (agent: Agent.Agent<Model.Model>, prompt: string) =>
  Effect.gen(function*() {
    const events = yield* Agent.stream(agent, prompt, { sessionId: "e", textDeltas: false }).pipe(
      Stream.runCollect
    )
    const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
    return { events, result }
  })

const progress = (events: ReadonlyArray<AgentEvent.AgentEvent>) =>
  events.flatMap((event) => (event._tag === "Progress" && event.sessionId === "e" ? [[event.name, event.data] as const] : []))

const judgeConfident = (winner: string) => (answer: string) =>
  answer === winner
    ? `{"score": 0.9, "confidence": 0.9, "is_correct": null, "notes": "right"}`
    : `{"score": 0.2, "confidence": 0.2, "is_correct": null, "notes": "doubtful"}`

describe("Ensemble", () => {
  it.effect("three solvers agreeing are accepted in round 1 with 3 + 1 + 1 calls", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({})
      const { events, result } = yield* runStreamed(agent, "What is 6 * 7?")
      expect(result.output).toBe("42")
      expect(result.modelCalls).toBe(5)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({ accepted: true, rounds: 1, calls: 5, selected: 1, isCorrect: null })
      const names = progress(events).map(([name]) => name)
      expect(names).toEqual([
        "ensemble.round_started",
        "ensemble.candidate",
        "ensemble.candidate",
        "ensemble.candidate",
        "ensemble.critique",
        "ensemble.judgement",
        "ensemble.decision",
        "ensemble.accepted"
      ])
      // The pooled answers: one distinct answer, three supporters, each written differently.
      const candidates = result.metadata.candidates as ReadonlyArray<Record<string, unknown>>
      expect(candidates).toHaveLength(1)
      expect(candidates[0]).toMatchObject({ index: 1, answer: "42", key: "42", support: 3 })
      // Sub-sessions named by role, answer and round.
      const sessions = new Set(events.map((event) => event.sessionId))
      expect([...sessions].sort()).toEqual([
        "e",
        "e__critic_1_round_1",
        "e__judge_1_round_1",
        "e__solver_a_round_1",
        "e__solver_b_round_1",
        "e__solver_c_round_1"
      ])
      const calls = yield* ScriptedModel.calls
      // A solver sees the problem, then its own prompt; critic and judge see only the final answer.
      expect(systemOf(calls[0]!)).toBe("")
      expect(lastUser(calls[0]!)).toContain("Problem:\nWhat is 6 * 7?\n\nYou are solver a.")
      expect(lastUser(calls[3]!)).toContain("Proposed answer: 42")
      expect(lastUser(calls[3]!)).not.toContain("6 * 7 = 42")
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: (solver) =>
          solver === "a" ? "6 * 7 = 42\nFINAL: 42" : solver === "b" ? "It is forty-two.\nfinal: 42.0" : "Answer:\n$42$"
      })))
    ))

  it.effect("three different answers cost 3 + 3 + 3 calls; the confident, clear one is accepted", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({})
      const { events, result } = yield* runStreamed(agent, "p")
      expect(result.modelCalls).toBe(9)
      expect(result.output).toBe("2")
      expect(result.metadata).toMatchObject({ accepted: true, rounds: 1, selected: 2 })
      const decision = progress(events).find(([name]) => name === "ensemble.decision")![1]
      // s = 0.75·0.9 + 0.25·0.9 − 0.5·0.1 = 0.85 against 0.75·0.2 + 0.25·0.2 − 0.05 = 0.15.
      expect(decision).toMatchObject({ accepted: true, selected: 2, margin: 0.7, scores: { 1: 0.15, 2: 0.85, 3: 0.15 } })
      expect((yield* ScriptedModel.calls).length).toBe(9)
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: (solver) => `FINAL: ${({ a: 1, b: 2, c: 3 } as Record<string, number>)[solver]}`,
        judge: judgeConfident("2")
      })))
    ))

  it.effect("a rejected round 1, then round 2's new answer is accepted; round 2's solvers see the rejected answers", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({ maxCalls: 20 })
      const { events, result } = yield* runStreamed(agent, "p")
      expect(result.output).toBe("42")
      expect(result.interrupted).toBe(false)
      // Round 1: 3 solvers + critic + judge of "41"; round 2: 3 solvers + critic + judge of the new "42" only.
      expect(result.modelCalls).toBe(10)
      expect(result.metadata).toMatchObject({ accepted: true, rounds: 2 })
      const trail = result.metadata.trail as ReadonlyArray<Record<string, unknown>>
      expect(trail.map((entry) => [entry.round, entry.accepted, entry.answer])).toEqual([[1, false, "41"], [2, true, "42"]])
      expect(trail[0]!.reason).toMatch(/confidence 0.3 < 0.75/)
      const candidates = result.metadata.candidates as ReadonlyArray<Record<string, unknown>>
      expect(candidates.map((c) => [c.answer, c.support, c.firstRound])).toEqual([["41", 4, 1], ["42", 2, 2]])
      const calls = yield* ScriptedModel.calls
      const round2 = calls.filter((call) => lastUser(call).includes("Earlier answers that were not accepted"))
      expect(round2).toHaveLength(3)
      expect(lastUser(round2[0]!)).toContain("- 41 (given 3 times; a reviewer noted: off by one?)")
      const sessions = new Set(events.map((event) => event.sessionId))
      expect(sessions.has("e__solver_a_round_2")).toBe(true)
      expect(sessions.has("e__critic_2_round_2")).toBe(true)
      expect(sessions.has("e__judge_2_round_2")).toBe(true)
      expect(sessions.has("e__critic_1_round_2")).toBe(false)
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: (solver, call) => (call === 0 ? "FINAL: 41" : solver === "c" ? "FINAL: 41" : "FINAL: 42"),
        critic: (answer) => (answer === "41" ? `{"risk": 0.5, "notes": "off by one?"}` : `{"risk": 0.05, "notes": "checks out"}`),
        judge: (answer) =>
          answer === "41" ? `{"score": 0.3, "confidence": 0.3}` : `{"score": 0.95, "confidence": 0.9}`
      })))
    ))

  it.effect("a single distinct answer's margin is its score + 1; low confidence is not accepted whatever the margin", () =>
    Effect.gen(function*() {
      const accepted = yield* Agent.run(yield* agentWith({ maxRounds: 1 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(rolesScript({
          solve: () => "FINAL: 7",
          critic: () => `{"risk": 0.2, "notes": ""}`,
          judge: () => `{"score": 0.5, "confidence": 0.8}`
        })))
      )
      const trail = accepted.metadata.trail as ReadonlyArray<Record<string, unknown>>
      // s = 0.6 + 0.125 − 0.1 = 0.625; margin = 1.625.
      expect(trail[0]).toMatchObject({ accepted: true, margin: 1.625, scores: { 1: 0.625 } })
      expect(accepted.metadata.accepted).toBe(true)

      const doubtful = yield* Agent.run(yield* agentWith({ maxRounds: 1 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(rolesScript({
          solve: () => "FINAL: 7",
          judge: () => `{"score": 1, "confidence": 0.7}`
        })))
      )
      expect(doubtful.output).toBe("7")
      expect(doubtful.interrupted).toBe(false)
      expect(doubtful.metadata).toMatchObject({ accepted: false, rounds: 1 })
    }))

  it.effect("maxCalls: 7 with three different answers: the judge phase is not started, the best-supported lowest-risk answer, not accepted", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({ maxCalls: 7 })
      const { events, result } = yield* runStreamed(agent, "p")
      expect(result.modelCalls).toBe(6)
      expect((yield* ScriptedModel.calls).length).toBe(6)
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      // Equal support (1 each): the lowest risk wins.
      expect(result.output).toBe("2")
      expect(result.metadata).toMatchObject({
        accepted: false,
        selected: 2,
        budgetExhausted: { round: 1, phase: "judges", needed: 3, used: 6, maxCalls: 7 }
      })
      const names = progress(events).map(([name]) => name)
      expect(names).toContain("ensemble.budget_exhausted")
      expect(names).not.toContain("ensemble.judgement")
      expect(names).not.toContain("ensemble.accepted")
      const decision = progress(events).find(([name]) => name === "ensemble.decision")![1]
      expect(decision).toMatchObject({ accepted: false, answer: "2", reason: "no answer has been judged" })
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: (solver) => `FINAL: ${({ a: 1, b: 2, c: 3 } as Record<string, number>)[solver]}`,
        critic: (answer) => `{"risk": ${answer === "2" ? 0.1 : 0.7}}`
      })))
    ))

  it.effect("maxCalls smaller than the solvers: nothing is called, nothing is accepted", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(yield* agentWith({ maxCalls: 2 }), "p")
      expect(result.modelCalls).toBe(0)
      expect(result).toMatchObject({ output: "", interrupted: true, interruptionReason: "budget:max_calls" })
      expect(result.metadata).toMatchObject({ accepted: false, rounds: 0, selected: null })
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("a round that does not fit after a rejected round ends with round 1's pick, not accepted", () =>
    Effect.gen(function*() {
      // Round 1: 3 + 1 + 1 = 5 calls; round 2 needs 3 more, 2 are left.
      const result = yield* Agent.run(yield* agentWith({ maxCalls: 7 }), "p")
      expect(result).toMatchObject({ output: "5", modelCalls: 5, interrupted: true, interruptionReason: "budget:max_calls" })
      expect(result.metadata).toMatchObject({ accepted: false, rounds: 1, budgetExhausted: { round: 2, phase: "solvers" } })
      expect((result.metadata.trail as ReadonlyArray<unknown>).length).toBe(1)
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 5", judge: () => `{"score": 0.4, "confidence": 0.4}` })))
    ))

  /** Runs 7 solvers (then 7 critics and 7 judges) with `options`: the most calls in flight at once, and the result. */
  const inFlightWith = (options: { readonly concurrency?: number | "unbounded"; readonly maxConcurrency?: number }) =>
    Effect.gen(function*() {
      let inFlight = 0
      let most = 0
      const roles = rolesScript({ solve: (solver) => `FINAL: ${solver}`, judge: judgeConfident("s1") })
      const script = (request: Model.Request) =>
        Effect.gen(function*() {
          inFlight++
          most = Math.max(most, inFlight)
          for (let i = 0; i < 20; i++) yield* Effect.yieldNow
          inFlight--
          return roles(request)
        })
      const many = Array.from({ length: 7 }, (_, i) => ({ name: `s${i + 1}`, prompt: `You are solver s${i + 1}.` }))
      const ensemble = yield* Ensemble.make({ solvers: many, maxCalls: 21, ...options })
      const result = yield* Agent.run(Agent.make({ name: "t", instructions: "", architecture: ensemble }), "p").pipe(
        Effect.provide(ScriptedModel.layer(script))
      )
      return { most, result }
    })

  it.effect("every phase has at most concurrency calls in flight", () =>
    Effect.gen(function*() {
      const { most, result } = yield* inFlightWith({ concurrency: 3 })
      // 7 solvers, 7 critics, 7 judges.
      expect(result.modelCalls).toBe(21)
      expect(most).toBe(3)
      expect(result.output).toBe("s1")
      // "unbounded": a phase's calls all at once.
      expect((yield* inFlightWith({ concurrency: "unbounded" })).most).toBe(7)
    }))

  it.effect("maxConcurrency, the deprecated name of concurrency, still limits the calls in flight", () =>
    Effect.gen(function*() {
      const { most, result } = yield* inFlightWith({ maxConcurrency: 3 })
      expect(result.modelCalls).toBe(21)
      expect(most).toBe(3)
      expect(result.output).toBe("s1")
    }))

  it.effect("templates written with the deprecated {problem} placeholder still get the task", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(
        yield* agentWith({
          maxRounds: 1,
          solverPrompt: "Solve: {problem}{feedback}",
          criticPrompt: "A solver proposed an answer to {problem}.\nProposed answer: {answer}",
          judgePrompt: "Judge a proposed answer to {problem}.\nProposed answer: {answer}"
        }),
        "What is 6 * 7?"
      )
      expect(result).toMatchObject({ output: "42", modelCalls: 5, metadata: { accepted: true } })
      const prompts = (yield* ScriptedModel.calls).map(lastUser)
      expect(prompts.slice(0, 3)).toEqual(["a", "b", "c"].map((name) => `Solve: What is 6 * 7?\n\nYou are solver ${name}.`))
      expect(prompts[3]).toBe("A solver proposed an answer to What is 6 * 7?.\nProposed answer: 42")
      expect(prompts[4]).toBe("Judge a proposed answer to What is 6 * 7?.\nProposed answer: 42")
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 42" })))))

  it("is declared once: its name, its agent options and its deprecated option names", () => {
    expect(Ensemble.definition).toMatchObject({
      name: "ensemble",
      title: "Ensemble",
      agentOptions: ["critic", "judge", "solvers.*.agent"],
      deprecated: { maxConcurrency: "concurrency" }
    })
    expect(Ensemble.name).toBe("ensemble")
    expect(Object.keys(Ensemble.definition.options.fields)).toContain("concurrency")
    expect(Object.keys(Ensemble.definition.options.fields)).not.toContain("maxConcurrency")
  })

  it.effect("n > 1 asks each solver for n completions in one call; every completion adds support", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(yield* agentWith({ n: 3 }), "p")
      // 3 solver calls (each n = 3, nine completions) + critic and judge for "8" and "9".
      expect(result.modelCalls).toBe(7)
      const calls = yield* ScriptedModel.calls
      expect(calls.slice(0, 3).map((call) => call.n)).toEqual([3, 3, 3])
      expect(calls.slice(3).map((call) => call.n)).toEqual([undefined, undefined, undefined, undefined])
      const candidates = result.metadata.candidates as ReadonlyArray<Record<string, unknown>>
      expect(candidates.map((c) => [c.answer, c.support])).toEqual([["8", 8], ["9", 1]])
      expect(result.output).toBe("8")
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: (solver, call) => (solver === "b" && call === 1 ? "FINAL: 9" : "FINAL: 8"),
        judge: judgeConfident("8")
      })))
    ))

  it.effect("fenced judge JSON is accepted; malformed critic JSON is risk 0.6 with the text as notes", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(yield* agentWith({}), "p")
      const [candidate] = result.metadata.candidates as ReadonlyArray<{ critique: Ensemble.Critique; judgement: Ensemble.Judgement }>
      expect(candidate!.critique).toMatchObject({ risk: 0.6, notes: "Looks risky, no JSON here.", parsed: "none" })
      expect(candidate!.judgement).toMatchObject({ score: 0.9, confidence: 0.95, parsed: "json", notes: "solid" })
      // s = 0.7125 + 0.225 − 0.3 = 0.6375, one answer: margin 1.6375 → accepted.
      expect(result.metadata.accepted).toBe(true)
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({
        solve: () => "FINAL: 3",
        critic: () => "Looks risky, no JSON here.",
        judge: () => "Here is my verdict:\n```json\n{\"score\": 0.9, \"confidence\": 0.95, \"notes\": \"solid\"}\n```"
      })))
    ))

  it("parses critiques and judgements tolerantly", () => {
    expect(Ensemble.parseCritique(`{"notes": "no risk given"}`))
      .toEqual({ risk: 0.5, notes: "no risk given", parsed: "json", error: "the risk is missing" })
    // Out of [0, 1]: not clamped to 1 but read as unparsed (0.6), with the reason.
    expect(Ensemble.parseCritique(`{"risk": 7, "notes": ["a", "b"]}`))
      .toEqual({ risk: 0.6, notes: "a; b", parsed: "json", error: "the risk 7 is outside [0, 1]" })
    expect(Ensemble.parseCritique(`{"risk": "0.3"}`).risk).toBe(0.3)
    expect(Ensemble.parseCritique(`{"risk": "30%"}`).risk).toBe(0.3)
    expect(Ensemble.parseJudgement("not json at all", true)).toEqual({
      score: 0,
      confidence: 0,
      isCorrect: null,
      notes: "not json at all",
      parsed: "none",
      error: 'no JSON object found in: "not json at all"'
    })
    expect(Ensemble.parseJudgement(`{"score": "9/10", "confidence": 0.8}`, false)).toMatchObject({ score: 0.9, confidence: 0.8 })
    expect(Ensemble.parseJudgement(`{"score": 0.9}`, false))
      .toMatchObject({ score: 0.9, confidence: 0, error: "the confidence is missing" })
    expect(Ensemble.parseJudgement(`{"score": 0.5, "confidence": 0.6, "is_correct": "yes"}`, true).isCorrect).toBe(true)
    expect(Ensemble.parseJudgement(`{"score": 0.5, "confidence": 0.6, "is_correct": false}`, true).isCorrect).toBe(false)
    expect(Ensemble.parseJudgement(`{"score": 0.5, "confidence": 0.6, "is_correct": true}`, false).isCorrect).toBe(null)
  })

  it.effect("a custom policy is used, and may not accept an answer that was never judged", () =>
    Effect.gen(function*() {
      const seen: Array<Ensemble.PolicyEvidence> = []
      // Picks the most supported answer and accepts it at once, judged or not.
      const policy: Ensemble.Policy = (evidence) => {
        seen.push(evidence)
        const best = [...evidence.candidates].sort((a, b) => b.support - a.support)[0]
        return { accept: true, selected: best?.index, reason: "majority" }
      }
      const result = yield* Agent.run(yield* agentWith({ policy }), "p").pipe(
        Effect.provide(ScriptedModel.layer(rolesScript({
          solve: (solver) => (solver === "c" ? "FINAL: 4" : "FINAL: 5"),
          judge: () => `{"score": 0, "confidence": 0}`
        })))
      )
      expect(seen).toHaveLength(1)
      expect(seen[0]!.candidates.map((c) => [c.answer, c.support, c.judgement?.confidence])).toEqual([["5", 2, 0], ["4", 1, 0]])
      expect(result.output).toBe("5")
      expect(result.metadata).toMatchObject({ accepted: true, trail: [{ reason: "majority", accepted: true }] })

      // With calls for the solvers and critics only, the policy's acceptance is refused.
      const refused = yield* Agent.run(yield* agentWith({ policy, maxCalls: 5 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(rolesScript({ solve: (solver) => (solver === "c" ? "FINAL: 4" : "FINAL: 5") })))
      )
      expect(refused).toMatchObject({ output: "5", interrupted: true, interruptionReason: "budget:max_calls" })
      expect(refused.metadata.accepted).toBe(false)
      expect((refused.metadata.trail as ReadonlyArray<{ reason: string }>)[0]!.reason).toMatch(/not accepted: the answer was never judged/)
    }))

  it.effect("a policy that throws, or selects an answer that does not exist, fails the run naming the round", () =>
    Effect.gen(function*() {
      const script = ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 5" }))
      const throwing: Ensemble.Policy = () => {
        throw new Error("no rule")
      }
      const thrown = yield* Effect.flip(Agent.run(yield* agentWith({ policy: throwing }), "p").pipe(Effect.provide(script)))
      expect(thrown).toMatchObject({
        _tag: "ArchitectureFailed",
        architecture: "ensemble",
        message: "the policy failed in round 1: Error: no rule"
      })
      const missing = yield* Effect.flip(
        Agent.run(yield* agentWith({ policy: () => ({ accept: true, selected: 7, reason: "?" }) }), "p").pipe(Effect.provide(script))
      )
      expect(missing).toMatchObject({
        _tag: "ArchitectureFailed",
        architecture: "ensemble",
        message: "the policy selected answer 7 in round 1, but the answers are 1..1"
      })
    }))

  it.effect("an answer's judge request starts as its critic's did: the problem and the answer, then the instructions", () =>
    Effect.gen(function*() {
      yield* Agent.run(yield* agentWith({}), "What is 6 * 7?")
      const prompts = (yield* ScriptedModel.calls).map(lastUser)
      const critic = prompts.find((p) => p.includes("A solver proposed"))!
      const judge = prompts.find((p) => p.includes("Judge a proposed"))!
      let shared = 0
      while (shared < critic.length && critic[shared] === judge[shared]) shared++
      expect(critic.slice(0, shared)).toBe("Problem:\nWhat is 6 * 7?\n\nProposed answer: 42\n\n")
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 42" })))))

  it.effect("no reference: is_correct is null even when the judge says true; with one, the judge is told and both verdicts are kept", () =>
    Effect.gen(function*() {
      const script = rolesScript({
        solve: () => "FINAL: 12",
        judge: () => `{"score": 0.9, "confidence": 0.9, "is_correct": true}`
      })
      const blind = yield* Agent.run(yield* agentWith({}), "p").pipe(Effect.provide(ScriptedModel.layer(script)))
      expect(blind.metadata).toMatchObject({ isCorrect: null, judgeIsCorrect: null, reference: null })

      const graded = yield* Effect.gen(function*() {
        const result = yield* Agent.run(yield* agentWith({ reference: "12.0" }), "p")
        const judgeCall = (yield* ScriptedModel.calls).find((call) => lastUser(call).includes("Judge a proposed"))!
        expect(lastUser(judgeCall)).toContain("Reference answer (decide is_correct against it): 12.0")
        return result
      }).pipe(Effect.provide(ScriptedModel.layer(script)))
      expect(graded.metadata).toMatchObject({ isCorrect: true, judgeIsCorrect: true, reference: "12.0" })

      // The reference may come from the surrounding evaluation instead.
      const shared = yield* Agent.run(yield* agentWith({}), "p").pipe(
        Architecture.withReference("13"),
        Effect.provide(ScriptedModel.layer(script))
      )
      expect(shared.metadata).toMatchObject({ isCorrect: false, judgeIsCorrect: true, reference: "13" })
      // Ensemble.withReference, its deprecated name, is the same function.
      const sharedAsBefore = yield* Agent.run(yield* agentWith({}), "p").pipe(
        Ensemble.withReference("13"),
        Effect.provide(ScriptedModel.layer(script))
      )
      expect(sharedAsBefore.metadata).toMatchObject({ isCorrect: false, judgeIsCorrect: true, reference: "13" })
    }))

  it.effect("a failing solver is recorded and the others go on; when every solver fails the run fails", () =>
    Effect.gen(function*() {
      const down = new ModelError.ServerError({ status: 503, message: "overloaded" })
      const partial = yield* Agent.run(yield* agentWith({}), "p").pipe(
        Effect.provide(ScriptedModel.layer(rolesScript({ solve: (solver) => (solver === "b" ? { error: down } : "FINAL: 1") })))
      )
      expect(partial.output).toBe("1")
      expect(partial.metadata.accepted).toBe(true)
      expect(partial.metadata.failures).toEqual([
        { round: 1, role: "solver", sessionId: `${partial.sessionId}__solver_b_round_1`, reason: "ServerError", error: "ServerError: overloaded" }
      ])

      const failed = yield* Effect.flip(
        Agent.run(yield* agentWith({}), "p").pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => ({ error: down }) }))))
      )
      expect(failed).toBeInstanceOf(AgentError.SubAgentFailed)
      expect(failed.message).toMatch(/solver_c_round_1 \(solver\) failed: overloaded/)
    }))

  it.effect("a run Budget below maxCalls stops it as well, with the budget's reason", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(yield* agentWith({}), "p", { budget: { maxCalls: 4 } })
      expect(result).toMatchObject({ modelCalls: 4, interrupted: true, interruptionReason: "budget:max_calls", output: "1" })
      expect(result.metadata.accepted).toBe(false)
    }).pipe(
      Effect.provide(ScriptedModel.layer(rolesScript({ solve: (solver) => `FINAL: ${solver === "c" ? 2 : 1}` })))
    ))

  it.effect("roles may have their own models and instructions", () =>
    Effect.gen(function*() {
      const judgeModel = ScriptedModel.layer([`{"score": 1, "confidence": 1}`])
      const judge = Agent.make({ name: "strict-judge", instructions: "You are strict.", model: judgeModel })
      const result = yield* Agent.run(yield* agentWith({ judge }), "p")
      expect(result).toMatchObject({ output: "6", modelCalls: 5, metadata: { accepted: true } })
      // The judge's call went to its own model: the run's model served the solvers and the critic only.
      expect((yield* ScriptedModel.calls).length).toBe(4)
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 6" })))))

  it.effect("the default architecture: solvers algebra, invariants and constructive, each with its own prompt", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "team", instructions: "", architecture: Ensemble.architecture })
      const { events, result } = yield* runStreamed(agent, "What is 2 + 2?")
      expect(result).toMatchObject({ output: "4", modelCalls: 5, metadata: { accepted: true, maxCalls: 10 } })
      const solverSessions = [...new Set(events.map((event) => event.sessionId))].filter((id) => id.includes("__solver_"))
      expect(solverSessions.sort()).toEqual(["e__solver_algebra_round_1", "e__solver_constructive_round_1", "e__solver_invariants_round_1"])
      const approaches = (yield* ScriptedModel.calls).slice(0, 3).map((call) => lastUser(call).split("\n\n").at(-1))
      expect(new Set(approaches)).toEqual(new Set(Ensemble.defaultSolvers.map((solver) => solver.prompt)))
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "2 + 2 = 4\nFINAL: 4" })))))

  it.effect("the solvers' requests start alike: the problem first (no differing system message), each approach last", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "team", instructions: "", architecture: Ensemble.architecture })
      yield* runStreamed(agent, "What is 2 + 2?")
      const requests = (yield* ScriptedModel.calls).slice(0, 3)
      const shared = Ensemble.defaultSolverPrompt.replace("{task}", "What is 2 + 2?").replace("{feedback}", "")
      for (const request of requests) {
        // One user message: the shared problem prompt, then this solver's approach. A system message would come first.
        expect(request.messages!.map((message) => message.role)).toEqual(["user"])
        expect(lastUser(request).startsWith(`${shared}\n\n`)).toBe(true)
      }
      expect(new Set(requests.map((request) => lastUser(request).slice(shared.length + 2))).size).toBe(3)
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "2 + 2 = 4\nFINAL: 4" })))))

  it.effect("invalid options fail with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const bad: ReadonlyArray<readonly [unknown, string | RegExp]> = [
        [{ maxCalls: 0 }, "Ensemble: maxCalls must be an integer >= 1, got 0"],
        [{ solvers: [] }, "Ensemble: solvers must be a non-empty array of solvers, got []"],
        [
          { solvers: [{ name: "a b", prompt: "x" }] },
          `Ensemble: solvers[0].name must be a usable name (letters and digits joined by single - or _, at most 48 characters), got "a b"`
        ],
        [{ solvers: [{ name: "a" }] }, `Ensemble: solvers[0] needs a prompt or an agent, got {"name":"a"}`],
        [
          { solvers: [{ name: "a", prompt: "x" }, { name: "a", prompt: "y" }] },
          `Ensemble: solvers must have distinct names ("a" is used twice), got [{"name":"a","prompt":"x"},{"name":"a","prompt":"y"}]`
        ],
        [{ acceptConfidence: 1.5 }, "Ensemble: acceptConfidence must be a number between 0 and 1, got 1.5"],
        [{ judgePrompt: "{task} {answr}" }, /^Ensemble: judgePrompt has unknown placeholder \{answr\}; this template may use \{task\}, \{answer\}/],
        [{ concurrency: 0 }, "Ensemble: concurrency must be an integer >= 1, got 0"],
        [{ policy: 3 }, "Ensemble: policy must be a function (Policy), got 3"],
        [{ maxRound: 3 }, "Ensemble: maxRound is not a known option"]
      ]
      for (const [options, message] of bad) {
        const error = yield* Effect.flip(Ensemble.make(options as Ensemble.Options))
        expect(error._tag).toBe("InvalidOptions")
        expect(error.module).toBe("Ensemble")
        if (typeof message === "string") expect(error.message).toBe(message)
        else expect(error.message).toMatch(message)
        // One line, whatever was wrong.
        expect(error.message).not.toContain("\n")
      }
    }))

  it.effect("an option given as undefined takes its default; makeUnsafe builds a module-level value or throws", () =>
    Effect.gen(function*() {
      const settings: { maxCalls?: number | undefined } = {}
      const ensemble = yield* Ensemble.make({ solvers, maxCalls: settings.maxCalls, critic: undefined, request: undefined })
      const result = yield* Agent.run(Agent.make({ name: "t", instructions: "", architecture: ensemble }), "p")
      expect(result).toMatchObject({ output: "4", modelCalls: 5, metadata: { accepted: true, maxCalls: 10 } })

      const unsafe = Ensemble.makeUnsafe({ solvers, maxRounds: 1 })
      expect(unsafe.name).toBe("ensemble")
      let thrown: unknown
      try {
        Ensemble.makeUnsafe({ maxCalls: 0 })
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(AgentError.InvalidOptions)
      expect((thrown as AgentError.InvalidOptions).message).toBe("Ensemble: maxCalls must be an integer >= 1, got 0")
    }).pipe(Effect.provide(ScriptedModel.layer(rolesScript({ solve: () => "FINAL: 4" })))))
})
