/**
 * Issue 12, items 1 and 2: parsers of model text that froze the event loop (a cubic score regex, quadratic JSON
 * and number scans) and scores on other scales read as perfect. First the reproductions, then property tests for
 * every parser (`it.prop` with `effect/Arbitrary`), adversarial generators included: long runs of one character,
 * deep nesting, inputs past the parsers' caps. Work is bounded structurally (an input past a cap reads as the
 * capped input), not by timing ratios.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Result, Schema, Stream } from "effect"
import * as ActorCritic from "../../src/architectures/ActorCritic.js"
import * as Plans from "../../src/architectures/internal/plan.js"
import * as Reflexion from "../../src/architectures/Reflexion.js"
import * as Supervisor from "../../src/architectures/Supervisor.js"
import * as Agent from "../../src/core/Agent.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Parse from "../../src/core/internal/parse.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Client from "../../src/providers/internal/openai/client.js"
import * as Resilience from "../../src/providers/internal/resilience.js"
import * as Ensemble from "../../src/architectures/Ensemble.js"
import * as ActorLoopParse from "../../src/rollouts/internal/actorLoop.js"
import * as Evidence from "../../src/architectures/internal/ensemble/evidence.js"
import * as Protocol from "../../src/architectures/internal/toolVote/protocol.js"
import { depthOf } from "../support/json.js"

// ---------------------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------------------

const int = (minimum: number, maximum: number) => Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum, maximum })))
const pick = (values: ReadonlyArray<string>) => Arbitrary.map(int(0, values.length - 1), (i) => values[i]!)
const oneOf = <A>(...arbitraries: ReadonlyArray<Arbitrary.Arbitrary<A>>): Arbitrary.Arbitrary<A> =>
  Arbitrary.flatMap(int(0, arbitraries.length - 1), (i) => arbitraries[i]!)
const stringOf = (chars: ReadonlyArray<string>, maxLength: number) =>
  Arbitrary.map(Arbitrary.array(pick(chars), { maxLength }), (parts) => parts.join(""))
const anyText = Arbitrary.schema(Schema.String)
/** A string from `chars` that starts with one of `solid`, trimmed (so never blank). */
const solidString = (solid: ReadonlyArray<string>, chars: ReadonlyArray<string>, maxLength: number) =>
  Arbitrary.map(Arbitrary.all([pick(solid), stringOf(chars, maxLength)]), ([first, rest]) => `${first}${rest}`.trim())

/** The characters and fragments that matter to some parser. */
const fragments = [
  " ", "\n", "\t", "score", "Score:", ":", "=", "/", "%", "out of", "(", ")", "0", "1", "7", "0.5", ".", "-", "{", "}",
  "[", "]", "\"", "\\", "```", "```json\n", "<action>", "</action>", "<think>", "</think>", "<state_update>", "FINAL:",
  "final", "$", "\\boxed{", "1.", "- ", "Step 2:", "é", "😀", ",", "e", "tool", "python", "\"code\""
]
const fragmentSoup = stringOf(fragments, 60)

/** Long runs of one character: what a backtracking regex or a per-position restart chokes on. */
const longRun = Arbitrary.map(
  Arbitrary.all([pick([" ", "{", "[", "`", "<", "$", "1", ".", "\n", "a", "\"", "\\", "/", "-", "*"]), int(0, 200_000)]),
  ([c, n]) => c.repeat(n)
)
/** `[[[…]]]`, `{"a":{"a":…}}`, unclosed or balanced, up to 100k deep. */
const deepNesting = Arbitrary.map(Arbitrary.all([int(0, 100_000), pick(["[", "{\"a\":"]), int(0, 1)]), ([n, open, closed]) => {
  const close = open === "[" ? "]" : "}"
  return open.repeat(n) + (open === "[" ? "" : "1") + (closed === 1 ? close.repeat(n) : "")
})
/** A label or marker followed by a long run: `score` + blanks, `FINAL: ` + digits, `lesson` + blanks + `x`. */
const labelledRun = Arbitrary.map(
  Arbitrary.all([pick(["score", "Score: ", "FINAL: ", "lesson", "**Lesson 1", "$", "\\boxed{", "<action>", "1. "]), pick([" ", "1", "$", ".", "{", "*"]), int(0, 100_000), pick(["", "x", ":", "}", "."])]),
  ([label, c, n, end]) => `${label}${c.repeat(n)}${end}`
)
/** Anything a model might send, hostile included. */
const hostile = oneOf(anyText, fragmentSoup, longRun, deepNesting, labelledRun)

/** A text of `n` characters or more: a prefix past a cap. */
const pastCap = (cap: number) => Arbitrary.map(Arbitrary.all([fragmentSoup, pick([" ", "a", "{", "\n"])]), ([soup, c]) => {
  const filler = c.repeat(cap + 1)
  return soup + filler
})


const runs = (n: number) => ({ timeout: 120_000, arbitrary: { runs: n } })

// ---------------------------------------------------------------------------------------------------------
// Reproductions
// ---------------------------------------------------------------------------------------------------------

describe("issue 12 reproductions", () => {
  // Not timed against a bound: before the fix these inputs took 6 to 53 s each (over 100 s in all, bench/parsers.ts
  // has the numbers); now all of them together take milliseconds. The test's own timeout, far between the two,
  // is the bound.
  it("the issue's adversarial replies parse in milliseconds (they froze the process for 6 to 53 s)", { timeout: 30_000 }, () => {
    const inputs = [
      `score${" ".repeat(3000)}`,
      `score${" ".repeat(5000)}`,
      "{".repeat(60_000),
      `FINAL: ${"1".repeat(60_000)}x`,
      "[".repeat(100_000),
      "[".repeat(100_000) + "]".repeat(100_000),
      `lesson${" ".repeat(30_000)}x`,
      `${"$".repeat(30_000)}x`,
      "a".repeat(1024 * 1024)
    ]
    for (const text of inputs) {
      Parse.parseScore(text, { fallbackToAnyNumber: true })
      Parse.extractJson(text)
      Parse.normalizeAnswer(Parse.finalAnswer(text, "last") ?? text)
      ActorCritic.parseCritique(text)
      Reflexion.parseEvaluation(text)
      Reflexion.parseLesson(text)
      Evidence.parseJudgement(text, true)
      Evidence.parseCritique(text)
      Plans.parse(text, 8)
      ActorLoopParse.parseOutput(text, undefined)
      Protocol.parseTurn(text)
    }
    expect(Parse.parseScore(inputs[0]!)).toEqual(Result.fail(`no score found in: "score"…`))
    expect(Parse.normalizeAnswer(Parse.finalAnswer(inputs[3]!)!)).toBe(`${"1".repeat(60_000)}x`)
  })

  it("scores on other scales are read with their scale, and nonsense is a failure, not 1.0", () => {
    expect(Parse.parseScore("Score: 7 out of 10")).toEqual(Result.succeed(0.7))
    expect(Parse.parseScore("My score: 4 (out of 5)")).toEqual(Result.succeed(0.8))
    expect(Result.isFailure(Parse.parseScore("score: 5/0"))).toBe(true)
    expect(Result.isFailure(Parse.parseScore("score: 7"))).toBe(true)
    expect(ActorCritic.parseCritique("Score: 7 out of 10")).toMatchObject({ score: 0.7, parsed: "score_pattern" })
    expect(ActorCritic.parseCritique("score: 5/0")).toMatchObject({ score: 0, parsed: "none", error: "the score 5/0 divides by zero" })
    expect(ActorCritic.parseCritique('{"score": 7, "issues": []}')).toMatchObject({ score: 0, parsed: "json", error: "the score 7 is outside [0, 1]" })
  })

  const actor = Agent.make({ name: "actor", instructions: "You write." })
  const critic = Agent.make({ name: "critic", instructions: "You review." })

  it.effect("ActorCritic at threshold 0.9 no longer approves a first draft scored 7 out of 10; a bad score is 0 and an event", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic, maxRounds: 2, approvalThreshold: 0.9 })
      const events = yield* Agent.stream(Agent.make({ name: "team", instructions: "", architecture }), "task", { textDeltas: false })
        .pipe(Stream.runCollect)
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      // Before: approved after two calls with score 1.
      expect(result.modelCalls).toBe(4)
      expect(result.metadata).toMatchObject({ approved: false, scores: [0.7, 0] })
      const errors = events.filter((event): event is AgentEvent.Of<"Progress"> =>
        event._tag === "Progress" && event.name === "actor_critic.parse_error"
      )
      expect(errors.map((event) => event.data)).toEqual([
        { round: 2, what: "critique", error: "the score 5/0 divides by zero", text: "\"score: 5/0\"" }
      ])
    }).pipe(Effect.provide(ScriptedModel.layer(["draft", "Score: 7 out of 10", "draft 2", "score: 5/0"]))))

  it.effect("Reflexion: an evaluation of `score: 7` scores 0 with a reflexion.parse_error event", () =>
    Effect.gen(function*() {
      const architecture = yield* Reflexion.make({ maxAttempts: 1 })
      const events = yield* Agent.stream(Agent.make({ name: "solver", instructions: "", architecture }), "task", { textDeltas: false })
        .pipe(Stream.runCollect)
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.metadata).toMatchObject({ bestScore: 0, thresholdMet: false })
      const error = events.find((event) => event._tag === "Progress" && event.name === "reflexion.parse_error")
      expect(error?._tag === "Progress" && error.data).toMatchObject({ attempt: 1, what: "evaluation" })
    }).pipe(Effect.provide(ScriptedModel.layer(["an answer", "score: 7\nPretty good."]))))

  it.effect("Ensemble: a judge's score of 7 and confidence of 9 are 0 with an ensemble.parse_error event: not accepted", () =>
    Effect.gen(function*() {
      const architecture = yield* Ensemble.make({ solvers: [{ name: "a", prompt: "Solve." }], maxRounds: 1 })
      const events = yield* Agent.stream(Agent.make({ name: "team", instructions: "", architecture }), "2+2?", { textDeltas: false })
        .pipe(Stream.runCollect)
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.metadata).toMatchObject({ accepted: false })
      const errors = events.flatMap((event) =>
        event._tag === "Progress" && event.name === "ensemble.parse_error" ? [event.data] : []
      )
      expect(errors).toEqual([
        expect.objectContaining({
          round: 1,
          index: 1,
          what: "judgement",
          error: "the score 7 is outside [0, 1]; the confidence 9 is outside [0, 1]"
        })
      ])
    }).pipe(Effect.provide(ScriptedModel.layer([
      "FINAL: 4",
      `{"risk": 0.1, "notes": "fine"}`,
      `{"score": 7, "confidence": 9, "is_correct": null, "notes": "great"}`
    ]))))
})

// ---------------------------------------------------------------------------------------------------------
// Scores
// ---------------------------------------------------------------------------------------------------------

describe("scores", () => {
  it.prop("parseScore never throws and gives a value in [0, 1] or a reason", [hostile], ([text]) => {
    for (const fallbackToAnyNumber of [false, true]) {
      const parsed = Parse.parseScore(text, { fallbackToAnyNumber })
      if (Result.isSuccess(parsed)) expect(parsed.success >= 0 && parsed.success <= 1).toBe(true)
      else expect(parsed.failure.length).toBeGreaterThan(0)
    }
  }, runs(150))

  const prose = stringOf(["a", "b", " ", ",", "\n", "!", "(", ")"], 40)
  const scored = Arbitrary.all([prose, pick(["score: ", "Score=", "score is ", "**Score:** ", "\"score\": ", "final_score: "]), int(0, 1000), int(1, 1000), prose])

  it.prop("a labelled decimal, fraction, `out of` or percentage reads as its value on [0, 1]", [scored], ([[before, label, a, b, after]]) => {
    const [x, y] = a <= b ? [a, b] : [b, a]
    expect(Parse.parseScore(`${before}\n${label}${x}/${y} ${after}`)).toEqual(Result.succeed(x / y))
    expect(Parse.parseScore(`${before}\n${label}${x} out of ${y}${after}`)).toEqual(Result.succeed(x / y))
    expect(Parse.parseScore(`${before}\n${label}${x} (out of ${y}) ${after}`)).toEqual(Result.succeed(x / y))
    const percent = x % 101
    expect(Parse.parseScore(`${before}\n${label}${percent}% ${after}`)).toEqual(Result.succeed(percent / 100))
    const decimal = Number((x / 1000).toFixed(3))
    expect(Parse.parseScore(`${before}\n${label}${decimal} ${after}`)).toEqual(Result.succeed(decimal))
    // Above 1 with no scale, or a fraction above 1: a failure, never clamped.
    expect(Result.isFailure(Parse.parseScore(`${label}${y + 1}`))).toBe(true)
    expect(Result.isFailure(Parse.parseScore(`${label}${y + 1}/${y}`))).toBe(true)
    expect(Result.isFailure(Parse.parseScore(`${label}${x}/0`))).toBe(true)
  }, runs(150))

  it.prop("what lies past the scan cap does not change a score", [pastCap(Parse.maxLineScanChars), hostile], ([capped, rest]) => {
    for (const fallbackToAnyNumber of [false, true]) {
      expect(Parse.parseScore(capped + rest, { fallbackToAnyNumber })).toEqual(Parse.parseScore(capped, { fallbackToAnyNumber }))
    }
  }, runs(30))

  it.prop("unitScore accepts exactly the numbers in [0, 1]", [Arbitrary.schema(Schema.Number)], ([n]) => {
    const checked = Parse.unitScore(n, "score")
    expect(Result.isSuccess(checked)).toBe(n >= 0 && n <= 1)
    expect(Result.isSuccess(Parse.unitScore(String(n), "score"))).toBe(n >= 0 && n <= 1 && !String(n).includes("e"))
  }, runs(300))

  it.prop("ActorCritic, Reflexion and the Ensemble's judge and critic keep every score in [0, 1] and say why one failed", [hostile], ([text]) => {
    const critique = ActorCritic.parseCritique(text)
    expect(critique.score >= 0 && critique.score <= 1).toBe(true)
    if (critique.parsed === "none") expect(critique.error).toBeDefined()
    const evaluation = Reflexion.parseEvaluation(text)
    expect(evaluation.score >= 0 && evaluation.score <= 1).toBe(true)
    if (evaluation.error !== undefined) expect(evaluation.score).toBe(0)
    const judgement = Evidence.parseJudgement(text, true)
    for (const value of [judgement.score, judgement.confidence]) expect(value >= 0 && value <= 1).toBe(true)
    const risk = Evidence.parseCritique(text).risk
    expect(risk >= 0 && risk <= 1).toBe(true)
  }, runs(150))

  const unit = Arbitrary.map(int(0, 1000), (n) => n / 1000)
  it.prop("the judge's and critics' JSON round-trips; a value outside [0, 1] is an error, not clamped", [unit, unit, unit, Arbitrary.schema(Schema.Boolean), int(2, 100)], ([score, confidence, risk, correct, big]) => {
    const judged = Evidence.parseJudgement(`Verdict:\n\`\`\`json\n${JSON.stringify({ score, confidence, is_correct: correct, notes: "n" })}\n\`\`\``, true)
    expect(judged).toEqual({ score, confidence, isCorrect: correct, notes: "n", parsed: "json" })
    expect(Evidence.parseCritique(JSON.stringify({ risk, notes: "x" }))).toEqual({ risk, notes: "x", parsed: "json" })
    expect(ActorCritic.parseCritique(JSON.stringify({ score, issues: ["a"], summary: "s" })))
      .toEqual({ score, issues: ["a"], summary: "s", parsed: "json" })
    const tooBig = Evidence.parseJudgement(JSON.stringify({ score: big, confidence }), false)
    expect(tooBig).toMatchObject({ score: 0, confidence, error: `the score ${big} is outside [0, 1]` })
    expect(Evidence.parseCritique(JSON.stringify({ risk: big }))).toMatchObject({ risk: Evidence.unparsedRisk, error: `the risk ${big} is outside [0, 1]` })
  }, runs(100))
})

// ---------------------------------------------------------------------------------------------------------
// JSON, fences, plans
// ---------------------------------------------------------------------------------------------------------

const Leaf = Schema.Union([Schema.String, Schema.Finite, Schema.Boolean, Schema.Null])
const JsonObject = Schema.Record(Schema.String, Schema.Union([Leaf, Schema.Array(Leaf), Schema.Record(Schema.String, Leaf)]))
const jsonObject = Arbitrary.schema(JsonObject)
// Prose that cannot open or close JSON, quotes included (they are prose outside brackets).
const jsonProse = stringOf(["a", "b", " ", "\n", ".", ":", "\"", "'", "!", "#"], 60)

describe("JSON", () => {
  it.prop("extractJson returns an object written alone, in prose, or in a fence", [jsonObject, jsonProse, jsonProse], ([value, before, after]) => {
    const json = JSON.stringify(value)
    const expected = JSON.parse(json)
    expect(Parse.extractJson(json, { expect: "object" })).toEqual(Result.succeed(expected))
    expect(Parse.extractJson(`${before} ${json} ${after}`, { expect: "object" })).toEqual(Result.succeed(expected))
    expect(Parse.extractJson(`${before}\n\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\`\n${after}`)).toEqual(Result.succeed(expected))
    expect(Parse.extractJson(`${before} [${json}, 1] ${after}`, { expect: "array" })).toEqual(Result.succeed([expected, 1]))
  }, runs(150))

  it.prop("extractJson never throws, and what it returns nests at most maxJsonDepth and can be written back", [hostile], ([text]) => {
    for (const expect_ of [undefined, "object", "array"] as const) {
      const parsed = Parse.extractJson(text, expect_ === undefined ? undefined : { expect: expect_ })
      if (Result.isSuccess(parsed)) {
        expect(depthOf(parsed.success)).toBeLessThanOrEqual(Parse.maxJsonDepth)
        expect(typeof JSON.stringify(parsed.success)).toBe("string")
      }
    }
  }, runs(150))

  it.prop("what lies past maxJsonChars does not change what extractJson, codeFences and extractTag find", [pastCap(Parse.maxJsonChars), hostile], ([capped, rest]) => {
    expect(Parse.extractJson(capped + rest)).toEqual(Parse.extractJson(capped))
    expect(Parse.codeFences(capped + rest)).toEqual(Parse.codeFences(capped))
    expect(Parse.extractTag(`<action>${capped}${rest}`, "action")).toEqual(Parse.extractTag(`<action>${capped}`, "action"))
  }, runs(10))

  const fenceBody = stringOf(["a", " ", "\n", "{", "}", "\"", "`"], 40).pipe(Arbitrary.filter((body) => !body.includes("``") && !body.startsWith("`") && !body.endsWith("`")))
  it.prop("codeFences gives back the bodies of the fences, in order", [Arbitrary.array(fenceBody, { maxLength: 5 }), pick(["", "json", "py", "ts "])], ([bodies, lang]) => {
    const text = bodies.map((body) => `text\n\`\`\`${lang}\n${body}\`\`\``).join("\n")
    expect(Parse.codeFences(text)).toEqual(bodies)
  }, runs(100))

  const description = solidString(["a", "b", "é"], ["a", "b", "c", " ", "é", "?", "'"], 30)
  it.prop("a plan round-trips as a JSON list, as steps with dependencies, and as numbered lines", [Arbitrary.array(description, { minLength: 1, maxLength: 12 })], ([descriptions]) => {
    const asJson = Plans.parse(JSON.stringify(descriptions), 8)
    expect(Result.isSuccess(asJson) && asJson.success.steps.map((step) => step.description)).toEqual(descriptions.slice(0, 8))
    const objects = descriptions.map((d, i) => ({ id: `s${i}`, description: d, depends_on: i > 0 ? [`s${i - 1}`] : [] }))
    const withDeps = Plans.parse(`Plan:\n\`\`\`json\n${JSON.stringify({ steps: objects })}\n\`\`\``, 100)
    expect(Result.isSuccess(withDeps) && withDeps.success.steps).toEqual(objects.map((o) => ({ id: o.id, description: o.description, dependsOn: o.depends_on })))
    const lines = Plans.parse(`Here is the plan:\n${descriptions.map((d, i) => `${i + 1}. ${d}`).join("\n")}`, 100)
    expect(Result.isSuccess(lines) && lines.success.steps.map((step) => step.description)).toEqual(descriptions)
  }, runs(100))

  it.prop("reading a plan never throws; it has at most maxSteps steps and its levels are computed or a cycle is named", [hostile, int(1, 20)], ([text, maxSteps]) => {
    const plan = Plans.parse(text, maxSteps)
    if (Result.isSuccess(plan)) {
      expect(plan.success.steps.length).toBeLessThanOrEqual(maxSteps)
      const levels = Plans.levels(plan.success)
      if (Result.isSuccess(levels)) expect(levels.success.flat().length).toBe(plan.success.steps.length)
    }
  }, runs(150))

  it.prop("list items past the scan cap do not change the items", [pastCap(Parse.maxLineScanChars), hostile], ([capped, rest]) => {
    expect(Parse.listItems(capped + rest)).toEqual(Parse.listItems(capped))
  }, runs(20))
})

// ---------------------------------------------------------------------------------------------------------
// FINAL: lines, answers, tags
// ---------------------------------------------------------------------------------------------------------

// Lines that hold no `FINAL:`.
const line = stringOf(["a", "b", " ", "1", ".", "$", "F", "I", "N", "A", "L"], 30)
const answer = solidString(["4", "2", "x"], ["4", "2", "x", " ", "$", ".", ",", "\\boxed{", "}"], 20)

describe("FINAL: lines and answers", () => {
  it.prop("finalAnswer finds the first and the last answer among other lines", [Arbitrary.array(line, { maxLength: 6 }), answer, answer, Arbitrary.array(line, { maxLength: 6 })], ([before, first, last, after]) => {
    const text = [...before, `FINAL: ${first}`, ...before, `final : ${last}`, ...after].join("\n")
    expect(Parse.finalAnswer(text, "first")).toBe(first.trim())
    expect(Parse.finalAnswer(text, "last")).toBe(last.trim())
    expect(Parse.finalAnswer([...before, ...after].join("\n"))).toBeUndefined()
    const nonEmpty = [...before, `FINAL: ${first}`, ...before, `final : ${last}`, ...after].map((l) => l.trim()).filter((l) => l !== "")
    expect(Parse.lastNonEmptyLine(`${text}\n \n`)).toBe(nonEmpty.at(-1))
  }, runs(150))

  it.prop("finalAnswer reads only its window: the first or last maxLineScanChars", [pastCap(Parse.maxLineScanChars), hostile], ([capped, rest]) => {
    expect(Parse.finalAnswer(capped + rest, "first")).toEqual(Parse.finalAnswer(capped, "first"))
    expect(Parse.finalAnswer(rest + capped, "last")).toEqual(Parse.finalAnswer(capped, "last"))
    expect(Parse.lastNonEmptyLine(rest + capped)).toEqual(Parse.lastNonEmptyLine(capped))
  }, runs(20))

  it.prop("normalizeAnswer is idempotent and never throws", [hostile], ([text]) => {
    const once = Parse.normalizeAnswer(text)
    expect(Parse.normalizeAnswer(once)).toBe(once)
  }, runs(200))

  const wrappers: ReadonlyArray<readonly [string, string]> = [["$", "$"], ["\\boxed{", "}"], ["\\(", "\\)"], ["", "."], ["$\\boxed{", "}$"]]
  it.prop("numbers normalize to one canonical form however they are wrapped", [int(-1_000_000, 1_000_000), int(0, wrappers.length - 1), int(0, 3)], ([n, w, decimals]) => {
    const written = decimals === 0 ? String(n) : `${n}.${"0".repeat(decimals)}`
    const [open, close] = wrappers[w]!
    const wrapped = `${open}${written}${close}`
    expect(Parse.normalizeAnswer(` ${wrapped} `)).toBe(String(n))
    const grouped = n.toLocaleString("en-US")
    expect(Parse.normalizeAnswer(grouped)).toBe(String(n))
  }, runs(200))

  const tagBody = stringOf(["a", " ", "\n", "{", "}", "\"", ">", "/"], 40)
  it.prop("extractTag round-trips a closed block, and an unclosed one at the very end", [tagBody, jsonProse], ([body, before]) => {
    expect(Parse.extractTag(`${before}<action>${body}</action> trailing <x>`, "action")).toBe(body.trim())
    expect(Parse.extractTag(`${before}<action>${body}`, "action")).toBe(body.trim())
    expect(Parse.extractTag(`${before}<action>${body}<think>`, "action")).toBeUndefined()
  }, runs(150))

  it.prop("ActorLoop reads the command and state update it was given, and never throws", [Arbitrary.array(stringOf(["p", "y", " ", "-", "\"", "é"], 10), { minLength: 1, maxLength: 4 }), hostile], ([command, noise]) => {
    const raw = `<think>${noise.replaceAll("</think>", "")}</think>\n<action>${JSON.stringify({ command })}</action>\n<state_update>{"goals": ["g"]}</state_update>`
    const parsed = ActorLoopParse.parseOutput(raw, undefined)
    expect(parsed.command).toEqual({ present: true, value: command })
    expect(parsed.parseError).toBeNull()
    const fuzzed = ActorLoopParse.parseOutput(noise, undefined)
    expect(fuzzed.parseError === null || fuzzed.parseErrorDetail !== null).toBe(true)
  }, runs(150))

  const code = solidString(["p", "1", "é"], ["p", "r", "i", "n", "t", "(", ")", "1", " ", "\n", "\"", "\\", "{", "}", "é"], 60)
  it.prop("ToolVote reads a python request and a FINAL answer back; any reply is a Turn", [code, answer, hostile], ([source, final, noise]) => {
    expect(Protocol.parseTurn(`Let me compute.\n${JSON.stringify({ tool: "python", code: source })}`)).toEqual({ _tag: "Python", code: source })
    expect(Protocol.parseTurn(`${JSON.stringify({ tool: "python", code: source })}\nFINAL: ${final}`)).toEqual({ _tag: "Final", answer: final.trim() })
    expect(["Final", "Python", "Rejected", "Neither"]).toContain(Protocol.parseTurn(noise)._tag)
  }, runs(150))

  it.prop("a lesson is one line of at most 500 characters", [hostile], ([text]) => {
    const lesson = Reflexion.parseLesson(text)
    if (lesson !== undefined) {
      expect(lesson.length).toBeLessThanOrEqual(500)
      expect(lesson.includes("\n")).toBe(false)
    }
  }, runs(150))
})

// ---------------------------------------------------------------------------------------------------------
// Supervisor routes and handoffs
// ---------------------------------------------------------------------------------------------------------

describe("Supervisor routes and handoffs", () => {
  const workers = [Agent.make({ name: "researcher", instructions: "Find facts." }), Agent.make({ name: "writer", instructions: "Write." })]
  const names = workers.map((worker) => worker.name)
  const workerName = oneOf(pick([...names, "Researcher", "writer ", "", "nobody"]), anyText)
  const argumentText = oneOf(
    Arbitrary.map(Arbitrary.all([workerName, anyText]), ([worker, instructions]) => JSON.stringify({ worker, instructions })),
    hostile
  )

  it.effect.prop("any route or handoff the coordinator writes ends the run normally; only real workers are run or forwarded", [argumentText, workerName], ([delegateArguments, forwardTo]) =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers })
      let coordinatorCalls = 0
      const script = (request: Model.Request): ScriptedModel.Turn => {
        const system = request.messages?.[0]?.content ?? ""
        if (system === "Find facts." || system === "Write.") return `answer of ${system}`
        coordinatorCalls++
        if (coordinatorCalls === 1) return { toolCalls: [{ name: "delegate", arguments: delegateArguments }] }
        if (coordinatorCalls === 2) return { toolCalls: [{ name: "forward_message", arguments: JSON.stringify({ worker: forwardTo }) }] }
        return "the coordinator's own answer"
      }
      const result = yield* Agent.run(Agent.make({ name: "lead", instructions: "Lead.", architecture, maxTurns: 4 }), "task").pipe(
        Effect.provide(ScriptedModel.layer(script))
      )
      const delegations = result.metadata.delegations as ReadonlyArray<Supervisor.Delegation>
      for (const delegation of delegations) expect(names).toContain(delegation.worker)
      const forwardedFrom = result.metadata.forwardedFrom as string | undefined
      if (forwardedFrom !== undefined) {
        expect(delegations.map((d) => d.worker)).toContain(forwardedFrom)
        expect(result.output).toMatch(/^answer of /)
      } else {
        expect(result.output).toBe("the coordinator's own answer")
      }
    }), runs(60))
})

// ---------------------------------------------------------------------------------------------------------
// SSE framing, through the client's own reader
// ---------------------------------------------------------------------------------------------------------

describe("SSE framing", () => {
  const delta = stringOf(["a", " ", "é", "😀", "\n", "\"", "data:", ":", "\r"], 12)
  const lineEnd = pick(["\n", "\r\n", "\r"])
  const limits = Resilience.limitsOf({})

  /** The chat stream events of some text deltas, with comments and a final [DONE]. */
  const body = (deltas: ReadonlyArray<string>, end: string, comments: boolean): string => {
    const events = deltas.map((content, i) =>
      `${comments && i % 2 === 0 ? `: ping${end}` : ""}data: ${JSON.stringify({
        id: "c1",
        object: "chat.completion.chunk",
        model: "m",
        choices: [{ index: 0, delta: { content }, finish_reason: i === deltas.length - 1 ? "stop" : null }]
      })}${end}${end}`
    )
    return `${events.join("")}data: [DONE]${end}${end}`
  }

  const read = (bytes: Uint8Array, cuts: ReadonlyArray<number>) => {
    const reader = Client.sseReader("http://test/v1/chat/completions", "chat", "m", limits)
    const out: Array<Model.Chunk> = []
    const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b)
    let start = 0
    for (const point of [...points, bytes.length]) {
      const failure = reader.read(bytes.subarray(start, point), out)
      if (failure !== undefined) return { out, failure }
      start = point
    }
    return { out, failure: reader.end(out) }
  }

  it.prop("any chunking of the bytes (multi-byte characters split too) gives the same chunks as one read", [Arbitrary.array(delta, { minLength: 1, maxLength: 8 }), lineEnd, Arbitrary.schema(Schema.Boolean), Arbitrary.array(int(0, 100_000), { maxLength: 20 })], ([deltas, end, comments, cuts]) => {
    const bytes = new TextEncoder().encode(body(deltas, end, comments))
    const whole = read(bytes, [])
    expect(whole.failure).toBeUndefined()
    const text = whole.out.flatMap((chunk) => (chunk._tag === "TextDelta" ? [chunk.text] : [])).join("")
    expect(text).toBe(deltas.join(""))
    expect(read(bytes, cuts)).toEqual(whole)
  }, runs(150))
})
