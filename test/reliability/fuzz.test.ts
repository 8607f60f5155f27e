/**
 * Issue 12's fuzz suite: 10,000 fuzzed inputs across the parsers of model text and the architectures that read
 * them — 6,000 texts through every parser, 4,005 runs (ReAct, SelfRefine, ActorCritic, PlanAndExecute,
 * Reflexion, Supervisor, Ensemble, ToolVote, ActorLoop) whose scripted model answers every call with fuzzed
 * text, reasoning and tool calls (runs of one character up to 50,000 long for the parsers and 20,000 in the
 * runs: the megabyte cases are in parsers.test.ts and eventLoop.test.ts, and these keep the suite fast). Expected: 0 defects (no throw, no die: only results and typed errors) and 0
 * hangs (each run under a real `Effect.timeout`). The generator is seeded (`VALET_FUZZ_SEED` picks another
 * seed) and every failure names its case's seed, so it reproduces.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Result, Schema } from "effect"
import * as ActorCritic from "../../src/architectures/ActorCritic.js"
import * as Plans from "../../src/architectures/internal/plan.js"
import * as PlanAndExecute from "../../src/architectures/PlanAndExecute.js"
import * as ReAct from "../../src/architectures/ReAct.js"
import * as Reflexion from "../../src/architectures/Reflexion.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Supervisor from "../../src/architectures/Supervisor.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import * as Parse from "../../src/core/internal/parse.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Ensemble from "../../src/architectures/Ensemble.js"
import * as Evaluate from "../../src/rollouts/Evaluate.js"
import * as ActorLoopParse from "../../src/rollouts/internal/actorLoop.js"
import * as Evidence from "../../src/architectures/internal/ensemble/evidence.js"
import * as Protocol from "../../src/architectures/internal/toolVote/protocol.js"
import * as ToolVote from "../../src/architectures/ToolVote.js"
import { depthOf } from "../support/json.js"

const seed = Number(process.env.VALET_FUZZ_SEED ?? 20_240_612)
const parserInputs = 6_000
const runsPerArchitecture = 445 // × 9 architectures: 4,005 runs
const runTimeout = "10 seconds"

// ---------------------------------------------------------------------------------------------------------
// A seeded generator of hostile model text
// ---------------------------------------------------------------------------------------------------------

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
const rng = (state: number) => () => {
  state = (state + 0x6D2B79F5) | 0
  let t = Math.imul(state ^ (state >>> 15), 1 | state)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
type Rng = () => number
const below = (r: Rng, n: number) => Math.floor(r() * n)
const pickOf = <A>(r: Rng, values: ReadonlyArray<A>): A => values[below(r, values.length)]!

const fragments = [
  " ", "  ", "\n", "\r\n", "\t", "score", "Score:", "SCORE =", "score is", "**Score:**", "final_score", ":", "=", "/", "%",
  "out of", "(out of", ")", "0", "1", "7", "10", "0.5", "0.95", "1.5", "-", "-3", ".", "..", "1e9", "NaN", "{", "}", "[",
  "]", "\"", "'", "\\", "\\\"", "```", "```json\n", "\n```", "<action>", "</action>", "<think>", "</think>",
  "<state_update>", "</state_update>", "<", ">", "FINAL:", "FINAL: 42", "final :", "$", "$$", "\\boxed{", "\\(", "\\)",
  "1.", "2)", "- ", "* ", "• ", "Step 3:", "lesson", "Lesson 1:", "**", "é", "😀", "\u0000", "\u2028", "\uD800", ",",
  "1,000", "e", "true", "null", "tool", "python", "\"code\"", "\"tool\": \"python\"", "issues", "risk", "confidence",
  "is_correct", "summary", "depends_on", "steps", "plan", "command", "no issues", "STEP FAILED:", "worker", "instructions"
]

const number = (r: Rng): string =>
  pickOf(r, [
    () => String(r()),
    () => String(below(r, 100)),
    () => `${below(r, 11)}/${below(r, 11)}`,
    () => `${below(r, 150)}%`,
    () => `${below(r, 12)} out of ${below(r, 12)}`,
    () => String(-below(r, 5)),
    () => "1e400",
    () => "\"0.7\"",
    () => "\"high\"",
    () => "null"
  ])()

/** Texts shaped like what the architectures expect, then damaged. */
const structured = (r: Rng): string => {
  const shapes = [
    () => `{"issues": ["${fragmentSoup(r, 3)}"], "score": ${number(r)}, "summary": "ok"}`,
    () => `{"score": ${number(r)}, "confidence": ${number(r)}, "is_correct": ${pickOf(r, ["true", "\"yes\"", "null", "3"])}, "notes": "n"}`,
    () => `{"risk": ${number(r)}, "notes": ${pickOf(r, ["\"x\"", "[\"a\", 1]", "null", "{}"])}}`,
    () => `score: ${number(r)}\n${fragmentSoup(r, 5)}`,
    () => JSON.stringify(Array.from({ length: below(r, 12) }, (_, i) => ({ id: String(below(r, 4)), description: `step ${i}`, depends_on: [String(below(r, 4))] }))),
    () => `{"steps": ${JSON.stringify(Array.from({ length: below(r, 5) }, () => fragmentSoup(r, 2)))}}`,
    () => Array.from({ length: below(r, 10) }, (_, i) => `${i + 1}. ${fragmentSoup(r, 3)}`).join("\n"),
    () => `{"tool": "python", "code": ${JSON.stringify(fragmentSoup(r, 6))}}`,
    () => `FINAL: ${pickOf(r, ["42", "$\\boxed{4}$", "1,000.", "", fragmentSoup(r, 3)])}`,
    () => `<think>${fragmentSoup(r, 4)}</think>\n<action>{"command": ${pickOf(r, ["[\"python3\", \"-V\"]", "\"ls\"", "[1, 2]", "null", "[]"])}}</action>\n<state_update>${pickOf(r, ["{\"goals\": [\"g\"]}", "{\"goals\": 3}", "[]", "{"])}`,
    () => `\`\`\`json\n${JSON.stringify({ score: r(), issues: [] })}\n\`\`\``
  ]
  let text = pickOf(r, shapes)()
  // Damage: cut it, or splice in a fragment.
  if (r() < 0.3) text = text.slice(0, below(r, text.length + 1))
  if (r() < 0.3) {
    const at = below(r, text.length + 1)
    text = text.slice(0, at) + pickOf(r, fragments) + text.slice(at)
  }
  return text
}

const fragmentSoup = (r: Rng, max: number): string => Array.from({ length: below(r, max + 1) }, () => pickOf(r, fragments)).join("")

const randomChars = (r: Rng): string => {
  const n = below(r, 200)
  let out = ""
  for (let i = 0; i < n; i++) {
    const kind = r()
    out += kind < 0.6
      ? String.fromCharCode(32 + below(r, 95))
      : kind < 0.8
      ? String.fromCharCode(below(r, 32))
      : String.fromCharCode(below(r, 0x10000)) // lone surrogates included
  }
  return out
}

/** One hostile text; `maxRun` bounds the long runs (the architecture runs use shorter ones to stay fast). */
const fuzzText = (r: Rng, maxRun: number): string => {
  const mode = r()
  if (mode < 0.3) return fragmentSoup(r, 40)
  if (mode < 0.45) return randomChars(r)
  if (mode < 0.7) return structured(r)
  if (mode < 0.8) return pickOf(r, ["score", "FINAL: ", "lesson", "<action>", "", "```", "1. "]) + pickOf(r, [" ", "{", "[", "`", "1", "$", ".", "\n", "<", "*"]).repeat(below(r, maxRun))
  if (mode < 0.86) {
    const n = below(r, maxRun / 2)
    const open = pickOf(r, ["[", "{\"a\":", "{"])
    return open.repeat(n) + (r() < 0.5 ? (open === "[" ? "]" : "}").repeat(n) : "")
  }
  if (mode < 0.92) return pickOf(r, ["", " ", "\n\n", "\t \r\n"])
  // A mixture, large now and then.
  return Array.from({ length: 1 + below(r, 8) }, () => fuzzText(r, maxRun / 4)).join(pickOf(r, ["\n", " ", ""]))
}

// ---------------------------------------------------------------------------------------------------------
// Parsers
// ---------------------------------------------------------------------------------------------------------


const inUnit = (n: number) => n >= 0 && n <= 1

/** Every parser on one text, with the invariants it promises; a message per broken one. */
const checkParsers = (text: string): Array<string> => {
  const broken: Array<string> = []
  const check = (name: string, ok: () => boolean) => {
    try {
      if (!ok()) broken.push(`${name}: invariant broken`)
    } catch (error) {
      broken.push(`${name} threw ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`)
    }
  }
  check("parseScore", () => {
    const parsed = Parse.parseScore(text, { fallbackToAnyNumber: true })
    return Result.isFailure(parsed) || inUnit(parsed.success)
  })
  check("extractJson", () => {
    const parsed = Parse.extractJson(text)
    return Result.isFailure(parsed) || (depthOf(parsed.success) <= Parse.maxJsonDepth && typeof JSON.stringify(parsed.success) === "string")
  })
  check("decodeJson", () => Parse.decodeJson(Schema.Struct({ a: Schema.Number }), text).constructor !== undefined)
  check("codeFences", () => Array.isArray(Parse.codeFences(text)))
  check("finalAnswer", () => [Parse.finalAnswer(text), Parse.finalAnswer(text, "last")].every((a) => a === undefined || (a !== "" && !a.includes("\n"))))
  check("lastNonEmptyLine", () => {
    const line = Parse.lastNonEmptyLine(text)
    return line === undefined || (line !== "" && line === line.trim())
  })
  check("listItems", () => Parse.listItems(text).every((item) => item !== ""))
  check("extractTag", () => {
    const tag = Parse.extractTag(text, "action")
    return tag === undefined || tag === tag.trim()
  })
  check("normalizeAnswer", () => {
    const once = Parse.normalizeAnswer(text)
    return Parse.normalizeAnswer(once) === once
  })
  // 200 characters, each at most a 6-character JSON escape, quoted, with an ellipsis.
  check("preview", () => Parse.preview(text).length <= 200 * 6 + 3)
  check("ActorCritic.parseCritique", () => inUnit(ActorCritic.parseCritique(text).score))
  check("Reflexion.parseEvaluation", () => inUnit(Reflexion.parseEvaluation(text).score))
  check("Reflexion.parseLesson", () => (Reflexion.parseLesson(text)?.length ?? 0) <= 500)
  check("Ensemble judge", () => {
    const judged = Evidence.parseJudgement(text, true)
    return inUnit(judged.score) && inUnit(judged.confidence)
  })
  check("Ensemble critic", () => inUnit(Evidence.parseCritique(text).risk))
  check("plan", () => {
    const plan = Plans.parse(text, 8)
    return Result.isFailure(plan) || (plan.success.steps.length <= 8 && Plans.levels(plan.success) !== undefined)
  })
  check("ActorLoop blocks", () => {
    const parsed = ActorLoopParse.parseOutput(text, undefined)
    return typeof JSON.stringify(parsed) === "string"
  })
  check("ToolVote turn", () => ["Final", "Python", "Rejected", "Neither"].includes(Protocol.parseTurn(text)._tag))
  check("Evaluate answer", () => typeof Evaluate.defaultExtractAnswer(text) === "string")
  return broken
}

describe("fuzz: parsers", () => {
  it(`${parserInputs} seeded texts through every parser: no throw, every invariant kept`, () => {
    const failures: Array<string> = []
    for (let i = 0; i < parserInputs; i++) {
      const caseSeed = seed + i
      const text = fuzzText(rng(caseSeed), 50_000)
      for (const broken of checkParsers(text)) failures.push(`seed ${caseSeed}: ${broken} (${Parse.preview(text, 60)})`)
    }
    expect(failures.slice(0, 10)).toEqual([])
  }, 120_000)
})

// ---------------------------------------------------------------------------------------------------------
// Architectures
// ---------------------------------------------------------------------------------------------------------

const toolNames = ["echo", "add", "delegate", "forward_message", "python", "nope", "", "a b"]

/** A model that answers each call with fuzzed text, reasoning, tool calls or a cut-off reply. */
const fuzzModel = (caseSeed: number) => {
  const r = rng(caseSeed)
  return ScriptedModel.layer((): ScriptedModel.Turn => {
    const text = fuzzText(r, 20_000)
    const roll = r()
    if (roll < 0.25) {
      return {
        text: r() < 0.5 ? "" : text,
        toolCalls: Array.from({ length: 1 + below(r, 3) }, () => ({
          name: pickOf(r, toolNames),
          arguments: pickOf(r, [
            () => fuzzText(r, 20_000),
            () => JSON.stringify({ text: fuzzText(r, 100) }),
            () => JSON.stringify({ a: r(), b: "2" }),
            () => JSON.stringify({ worker: pickOf(r, ["w1", "w2", "w3", ""]), instructions: fuzzText(r, 200) }),
            () => JSON.stringify({ worker: pickOf(r, ["w1", "w2"]) }),
            // Deeply nested arguments: the schema decoder's messages used to overflow the stack on them.
            () => {
              const n = below(r, 20_000)
              return pickOf(r, ["", "{\"text\": ", "{\"worker\": "]) + "[".repeat(n) + "]".repeat(n) + (r() < 0.5 ? "}" : "")
            },
            () => ""
          ])()
        }))
      }
    }
    if (roll < 0.35) return { text, reasoning: fuzzText(r, 1000) }
    if (roll < 0.42) return { text, finishReason: "length" }
    return text
  })
}

const tools = [
  Tool.make({
    name: "echo",
    description: "Echoes text.",
    parameters: Schema.Struct({ text: Schema.String }),
    handler: ({ text }) => Effect.succeed(text)
  }),
  Tool.make({
    name: "add",
    description: "Adds numbers.",
    parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
    handler: ({ a, b }) => Effect.succeed(a + b)
  })
]

const agentWith = <R>(architecture: Architecture.Architecture<R>) =>
  Agent.make({ name: "fuzz", instructions: "Answer.", architecture, tools, maxTurns: 3 })

const sandbox = (caseSeed: number) => {
  const r = rng(caseSeed ^ 0x5bd1e995)
  return Sandbox.layerTest(() => ({ stdout: fuzzText(r, 2000), stderr: r() < 0.3 ? fuzzText(r, 200) : "", exitCode: below(r, 3) }))
}

type Run = (caseSeed: number) => Effect.Effect<unknown, unknown>

const workers = [Agent.make({ name: "w1", instructions: "One." }), Agent.make({ name: "w2", instructions: "Two." })]

const architectures: ReadonlyArray<readonly [string, Run]> = [
  ["ReAct", (s) => Agent.run(agentWith(ReAct.architecture), "task").pipe(Effect.provide(fuzzModel(s)))],
  ["SelfRefine", (s) =>
    Effect.flatMap(SelfRefine.make({ maxRounds: 2 }), (a) => Agent.run(agentWith(a), "task")).pipe(Effect.provide(fuzzModel(s)))],
  ["ActorCritic", (s) =>
    Effect.flatMap(
      ActorCritic.make({ actor: Agent.make({ name: "actor", instructions: "" }), critic: Agent.make({ name: "critic", instructions: "" }), maxRounds: 2 }),
      (a) => Agent.run(agentWith(a), "task")
    ).pipe(Effect.provide(fuzzModel(s)))],
  ["PlanAndExecute", (s) =>
    Effect.flatMap(PlanAndExecute.make({ maxSteps: 3, maxReplans: 1 }), (a) => Agent.run(agentWith(a), "task")).pipe(
      Effect.provide(fuzzModel(s))
    )],
  ["Reflexion", (s) =>
    Effect.flatMap(Reflexion.make({ maxAttempts: 2 }), (a) => Agent.run(agentWith(a), "task")).pipe(Effect.provide(fuzzModel(s)))],
  ["Supervisor", (s) =>
    Effect.flatMap(Supervisor.make({ workers, maxTurns: 3 }), (a) => Agent.run(agentWith(a), "task")).pipe(Effect.provide(fuzzModel(s)))],
  ["Ensemble", (s) =>
    Effect.flatMap(
      Ensemble.make({ solvers: [{ name: "a", prompt: "Solve." }, { name: "b", prompt: "Solve." }], maxRounds: 2, maxCalls: 12 }),
      (a) => Agent.run(agentWith(a), "task")
    ).pipe(Effect.provide(fuzzModel(s)))],
  ["ToolVote", (s) =>
    Effect.flatMap(ToolVote.make({ attempts: 2, maxTurns: 3 }), (a) => Agent.run(agentWith(a), "task")).pipe(
      Effect.provide(Layer.mergeAll(fuzzModel(s), sandbox(s)))
    )],
  ["ActorLoop", (s) =>
    Effect.forEach([1, 2], (step) =>
      ActorLoop.step({ taskId: `fuzz-${s}`, prompt: `step ${step}`, workspaceFiles: { "a.py": "print(1)\n" } })).pipe(
        Effect.provide(Layer.mergeAll(fuzzModel(s), sandbox(s), StateStore.layerMemory(), TrajectoryStore.layerMemory))
      )]
]

describe("fuzz: architectures answered with fuzzed text", () => {
  for (const [name, run] of architectures) {
    it.live(`${name}: ${runsPerArchitecture} seeded runs, 0 defects, 0 hangs`, () =>
      Effect.gen(function*() {
        const defects: Array<string> = []
        const hangs: Array<number> = []
        let results = 0
        let typedErrors = 0
        for (let i = 0; i < runsPerArchitecture; i++) {
          const caseSeed = seed * 31 + i * 7919 + name.length
          const exit = yield* Effect.exit(Effect.timeout(run(caseSeed), runTimeout))
          if (Exit.isSuccess(exit)) results++
          else if (Cause.hasDies(exit.cause)) defects.push(`seed ${caseSeed}: ${Cause.pretty(exit.cause).slice(0, 600)}`)
          else if (String(Cause.squash(exit.cause)).includes("TimeoutError")) hangs.push(caseSeed)
          else typedErrors++
        }
        expect({ defects: defects.slice(0, 3), hangs }).toEqual({ defects: [], hangs: [] })
        // Most runs end with a result; the rest with typed errors (an ArchitectureFailed plan cycle, …).
        expect(results + typedErrors).toBe(runsPerArchitecture)
        expect(results).toBeGreaterThan(0)
      }), 120_000)
  }
})
