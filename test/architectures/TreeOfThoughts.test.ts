/**
 * TreeOfThoughts: the beam search (levels, pruning, solved, empty beam, ties), every way a proposal and a score are
 * written, `Score=7` never read as solved, failures and budgets, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as TreeOfThoughts from "../../src/architectures/TreeOfThoughts.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const lastUser = (request: Model.Request) => Model.textOf(request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? "")
const solver = <R>(architecture: Architecture.Architecture<R>) => Agent.make({ name: "solver", instructions: "", architecture })

/**
 * A model that plays every role by reading its prompt: proposals list `<chain>.a`, `<chain>.b`; a thought's score
 * comes from `scores` by its last step (default 0.5); the synthesizer answers with the chain's last step.
 */
const playing = (scores: Readonly<Record<string, string>>) =>
  ScriptedModel.layer((request) => {
    const prompt = lastUser(request)
    const steps = [...prompt.matchAll(/Step \d+: (\S+)/g)].map((m) => m[1]!)
    const last = steps.at(-1) ?? "root"
    if (prompt.startsWith("Task:") && prompt.includes("Propose up to")) return `Here are ideas:\n1. ${last}.a\n2. ${last}.b`
    if (prompt.includes("How promising")) return scores[last] ?? "score: 0.5"
    return `Answer from ${last}`
  })

describe("TreeOfThoughts", () => {
  it.effect("a beam search: proposals per frontier node, a score per candidate, the best kept, solved at a threshold, then a synthesis", () =>
    Effect.gen(function*() {
      const architecture = TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 2, maxDepth: 3, solvedThreshold: 0.9 })
      const events = yield* Stream.runCollect(Agent.stream(solver(architecture), "Make 24 from 4 7 8 8", { sessionId: "t" }))
      const last = events.at(-1)!
      expect(last).toMatchObject({ _tag: "RunCompleted", result: { output: "Answer from root.b.a", metadata: { depth: 2, solved: true, chain: ["root.b", "root.b.a"], score: 0.95 } } })
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      // Depth 1: one proposer, two evaluators; depth 2: two proposers (the beam), four evaluators; a synthesizer.
      expect(sessions.filter((s) => s.includes("__proposer_"))).toEqual(["t__proposer_1_1", "t__proposer_2_1", "t__proposer_2_2"])
      expect(sessions.filter((s) => s.includes("__evaluator_")).sort()).toEqual(
        ["t__evaluator_1_1", "t__evaluator_1_2", "t__evaluator_2_1", "t__evaluator_2_2", "t__evaluator_2_3", "t__evaluator_2_4"]
      )
      expect(sessions.at(-1)).toBe("t__synthesizer")
      const names = events.filter((event) => event._tag === "Progress").map((event) => event.name)
      expect(names).toContain("tree_of_thoughts.solved")
    }).pipe(Effect.provide(playing({ "root.a": "score: 0.3", "root.b": "score: 0.6", "root.b.a": "score: 0.95" }))))

  it.effect("Score=7 and a bare 7 are not scores: 0 with a parse_error event, never solved; 85%, 7/10 and 0.8 are", () =>
    Effect.gen(function*() {
      expect(TreeOfThoughts.parseEvaluation("Score=7")).toMatchObject({ score: 0, error: expect.stringContaining("outside [0, 1]") })
      expect(TreeOfThoughts.parseEvaluation("7")).toMatchObject({ score: 0, error: expect.any(String) })
      expect(TreeOfThoughts.parseEvaluation("85%").score).toBe(0.85)
      expect(TreeOfThoughts.parseEvaluation("I'd give it 7/10.").score).toBe(0.7)
      expect(TreeOfThoughts.parseEvaluation("**Score:** 0.8 — promising").score).toBe(0.8)
      expect(TreeOfThoughts.parseEvaluation("%%%")).toMatchObject({ score: 0, error: expect.stringContaining("no score") })
      const architecture = TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 1, synthesize: false })
      const events = yield* Stream.runCollect(Agent.stream(solver(architecture), "task"))
      const result = events.at(-1)!
      expect(result).toMatchObject({ _tag: "RunCompleted", result: { metadata: { solved: false, chain: ["root.b"], score: 0.4 } } })
      expect(events.filter((event) => event._tag === "Progress" && event.name === "tree_of_thoughts.parse_error")).toHaveLength(1)
    }).pipe(Effect.provide(playing({ "root.a": "Score=7", "root.b": "score: 0.4" }))))

  it("proposals: numbered, bulleted, fenced, with continuation lines folded, cut to branchFactor; prose is one thought", () => {
    expect(TreeOfThoughts.parseThoughts("Ideas:\n1. Use a bigger\n   pan\n2. Lower the heat\n3. Add water", 2)).toEqual(["Use a bigger pan", "Lower the heat"])
    expect(TreeOfThoughts.parseThoughts("- one\n* two\n• three", 5)).toEqual(["one", "two", "three"])
    expect(TreeOfThoughts.parseThoughts("```\nStep 1: plan\nStep 2: act\n```", 5)).toEqual(["plan", "act"])
    expect(TreeOfThoughts.parseThoughts("Just multiply\nthe two numbers.", 3)).toEqual(["Just multiply the two numbers."])
    expect(TreeOfThoughts.parseThoughts("   ", 3)).toEqual([])
  })

  it.effect("nothing at or above minScore: the beam is empty; the best of the deepest level reached wins (ties: the earliest)", () =>
    Effect.gen(function*() {
      const architecture = TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 3, minScore: 0.5, synthesize: false })
      const events = yield* Stream.runCollect(Agent.stream(solver(architecture), "task"))
      // Depth 1: a and b tie at 0.6, a (the earlier) is kept; depth 2: both below 0.5, the beam is empty.
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Step 1: root.a", metadata: { depth: 1, chain: ["root.a"] } } })
      expect(events.some((event) => event._tag === "Progress" && event.name === "tree_of_thoughts.empty_beam")).toBe(true)
    }).pipe(Effect.provide(playing({ "root.a": "score: 0.6", "root.b": "score: 0.6", "root.a.a": "score: 0.1", "root.a.b": "score: 0.2" }))))

  it.effect("options are checked", () =>
    Effect.gen(function*() {
      const message = (options: TreeOfThoughts.Options) => Effect.map(Effect.flip(TreeOfThoughts.make(options)), (e) => e.message)
      expect(yield* message({ branchFactor: 0 })).toBe("TreeOfThoughts: branchFactor must be an integer >= 1, got 0")
      expect(yield* message({ solvedThreshold: 1.5 })).toBe("TreeOfThoughts: solvedThreshold must be a number between 0 and 1, got 1.5")
      expect(yield* message({ proposerPrompt: "{nope}" })).toMatch(/proposerPrompt has unknown placeholder \{nope\}/)
    }))

  it.effect("an evaluator that fails fails the run; a spent budget ends it interrupted with the best chain so far", () =>
    Effect.gen(function*() {
      const failing = Agent.make({ name: "evaluator", instructions: "", model: Layer.orDie(ScriptedModel.layer([])) }) as Agent.Agent<never>
      const failed = yield* Effect.flip(Agent.run(solver(TreeOfThoughts.makeUnsafe({ evaluator: failing })), "task"))
      expect(failed).toMatchObject({ _tag: "SubAgentFailed", role: "evaluator", error: { _tag: "ScriptExhausted" } })
      const capped = yield* Agent.run(solver(TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1 })), "task", { budget: { maxCalls: 4 } })
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "Step 1: root.b" })
    }).pipe(Effect.provide(playing({ "root.a": "score: 0.2", "root.b": "score: 0.7" }))))

  it.effect("a role stopped at its limit ends the run: proposer_<d>_<i>:<reason>, with the best chain so far and the metadata", () =>
    Effect.gen(function*() {
      // The proposer has a tool and one turn: at depth 2 its reply asks for the tool, so it stops at max turns.
      const look = Tool.make({ name: "look", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("seen") })
      const proposer = Agent.make({ name: "proposer", instructions: "", tools: [look], maxTurns: 1 })
      const architecture = TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 3, proposer })
      const result = yield* Agent.run(solver(architecture), "task").pipe(Effect.provide(ScriptedModel.layer((request, index) =>
        index === 0 ? "1. root.a\n2. root.b" : lastUser(request).includes("Propose up to") ? { toolCalls: [{ name: "look" }] } : lastUser(request).includes("Step 1: root.b") ? "score: 0.7" : "score: 0.2"
      )))
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "proposer_2_1:max_turns_exceeded",
        output: "Step 1: root.b",
        metadata: { depth: 1, solved: false, chain: ["root.b"], score: 0.7 }
      })
    }))

  it.effect("the synthesizer answers for the run: stopped after writing, its partial answer; refused by the budget, the best chain", () =>
    Effect.gen(function*() {
      const look = Tool.make({ name: "look", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("seen") })
      const synthesizer = Agent.make({ name: "synthesizer", instructions: "", tools: [look], maxTurns: 1 })
      const partial = yield* Agent.run(solver(TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 1, synthesizer })), "task").pipe(
        Effect.provide(ScriptedModel.layer((request) => {
          const prompt = lastUser(request)
          if (prompt.includes("Propose up to")) return "1. root.a\n2. root.b"
          if (prompt.includes("How promising")) return prompt.includes("root.b") ? "score: 0.7" : "score: 0.2"
          return { text: "Almost: root.b", toolCalls: [{ name: "look" }] }
        }))
      )
      expect(partial).toMatchObject({ interrupted: true, interruptionReason: "synthesizer:max_turns_exceeded", output: "Almost: root.b" })
      // One proposal and two scores use the three calls; the synthesizer is refused its first.
      const refused = yield* Agent.run(solver(TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 1 })), "task", { budget: { maxCalls: 3 } }).pipe(
        Effect.provide(playing({ "root.b": "score: 0.7" }))
      )
      expect(refused).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "Step 1: root.b", metadata: { chain: ["root.b"] } })
    }))

  it.effect("a template with the old {question} / {problem} placeholder still gets the task", () =>
    Effect.gen(function*() {
      const architecture = TreeOfThoughts.makeUnsafe({
        maxDepth: 1,
        synthesize: false,
        proposerPrompt: "Question: {question}\nSteps so far:\n{chain}\nPropose up to {branch_factor} next steps.",
        evaluatorPrompt: "Problem: {problem}\n{chain}\nHow promising? score: <0..1>"
      })
      yield* Agent.run(solver(architecture), "Make 24 from 4 7 8 8")
      const prompts = (yield* ScriptedModel.calls).map(lastUser)
      expect(prompts[0]).toContain("Question: Make 24 from 4 7 8 8\n")
      expect(prompts.slice(1).every((prompt) => prompt.startsWith("Problem: Make 24 from 4 7 8 8\n"))).toBe(true)
    }).pipe(Effect.provide(ScriptedModel.layer((request) => lastUser(request).startsWith("Question:") ? "1. a\n2. b" : "score: 0.5"))))

  it.effect("record / replay: every role's call comes back from the cassette", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-tot-"))
      try {
        const cassette = join(dir, "tot.jsonl")
        const agent = solver(TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 2, maxDepth: 2 }))
        const recorded = yield* Agent.run(agent, "task", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(playing({ "root.b": "score: 0.7" }))))
        )
        const replayed = yield* Agent.run(agent, "task", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe(recorded.output)
        expect(replayed.metadata).toEqual(recorded.metadata)
        expect(replayed.modelCalls).toBe(recorded.modelCalls)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
