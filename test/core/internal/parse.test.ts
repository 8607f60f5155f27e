import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as Parse from "../../../src/core/internal/parse.js"

describe("parse", () => {
  it("extractJson: whole text, code fences, embedded objects; Left says why", () => {
    expect(Parse.extractJson('{"score": 1}')).toEqual(Result.succeed({ score: 1 }))
    expect(Parse.extractJson('Here:\n```json\n{"issues": ["a"], "score": 0.5}\n```\nDone.')).toEqual(
      Result.succeed({ issues: ["a"], score: 0.5 })
    )
    expect(Parse.extractJson("```\n[1, 2]\n```", { expect: "array" })).toEqual(Result.succeed([1, 2]))
    expect(Parse.extractJson('The critique is {"score": 0.9, "note": "a } in a string"} overall.')).toEqual(
      Result.succeed({ score: 0.9, note: "a } in a string" })
    )
    expect(Parse.extractJson('steps: ["a", "b"] and {"x": 1}', { expect: "array" })).toEqual(Result.succeed(["a", "b"]))
    // An unclosed fence (the server stopped at a stop string) still yields its JSON.
    expect(Parse.extractJson('```json\n{"risk": 0.2}')).toEqual(Result.succeed({ risk: 0.2 }))
    const none = Parse.extractJson("no json here")
    expect(Result.isFailure(none) && none.failure).toBe('no JSON found in: "no json here"')
    expect(Result.isFailure(Parse.extractJson("[1]", { expect: "object" }))).toBe(true)
  })

  it("decodeJson names what was wrong", () => {
    const Critique = Schema.Struct({ score: Schema.Number, issues: Schema.Array(Schema.String) })
    const bad = Parse.decodeJson(Critique, '{"score": "high", "issues": []}')
    expect(Result.isFailure(bad) && bad.failure).toContain("score must be a number, got \"high\"")
    expect(Parse.decodeJson(Critique, '{"score": 0.3, "issues": ["x"]}')).toEqual(Result.succeed({ score: 0.3, issues: ["x"] }))
    // The first value that decodes, not just the first that parses: a citation does not hide the list.
    expect(Parse.decodeJson(Schema.Array(Schema.String), 'See [1] and [2]: ["a", "b"]', { expect: "array" }))
      .toEqual(Result.succeed(["a", "b"]))
    const none = Parse.decodeJson(Schema.Array(Schema.String), "See [1] and [2].", { expect: "array" })
    expect(Result.isFailure(none) && none.failure).toContain("must be a string")
  })

  it("parseScore: labelled forms, scales, prose fallback; never clamped", () => {
    const ok = (n: number) => Result.succeed(n)
    expect(Parse.parseScore("score: 0.42")).toEqual(ok(0.42))
    expect(Parse.parseScore("Score=0.4\nbecause")).toEqual(ok(0.4))
    expect(Parse.parseScore("My score is 8/10.")).toEqual(ok(0.8))
    expect(Parse.parseScore("score: 85%")).toEqual(ok(0.85))
    expect(Parse.parseScore("Score: 7 out of 10")).toEqual(ok(0.7))
    expect(Parse.parseScore("My score: 4 (out of 5)")).toEqual(ok(0.8))
    expect(Parse.parseScore("**Score:** 0.8")).toEqual(ok(0.8))
    expect(Parse.parseScore("final_score: 1")).toEqual(ok(1))
    expect(Parse.parseScore("score of 0.9, I think")).toEqual(ok(0.9))
    expect(Parse.parseScore('{"score": 0.25}')).toEqual(ok(0.25))
    // A label without a number does not count; a later one does.
    expect(Parse.parseScore("The score reflects style. score: 0.3")).toEqual(ok(0.3))
    // Out of [0, 1] without a scale, a fraction above 1 or over zero: a failure that says why, never 1.
    const failure = (text: string) => {
      const parsed = Parse.parseScore(text)
      return Result.isFailure(parsed) ? parsed.failure : `parsed as ${parsed.success}`
    }
    expect(failure("score: 7")).toBe("the score 7 is outside [0, 1] and has no scale (write it as 0.7, 7/10 or 70%)")
    expect(failure("score: 5/0")).toBe("the score 5/0 divides by zero")
    expect(failure("score: 12/10")).toBe("the score 12/10 is outside [0, 1]")
    expect(failure("score: 150%")).toBe("the score 150% is outside [0, 1]")
    expect(failure("score: -1")).toContain("outside [0, 1]")
    expect(failure("no number")).toBe('no score found in: "no number"')
    expect(failure("underscores: 0.5")).toContain("no score found")
    // Characters whose lower case is longer (İ) do not shift what is read.
    expect(Parse.parseScore("İİİ score: 0.5")).toEqual(ok(0.5))
    expect(Parse.finalAnswer("İİİ\nFINAL: 7")).toBe("7")
    expect(Parse.parseScore("I would say 0.65 overall", { fallbackToAnyNumber: true })).toEqual(ok(0.65))
    expect(Parse.parseScore("about 7 out of 10", { fallbackToAnyNumber: true })).toEqual(ok(0.7))
    expect(Result.isFailure(Parse.parseScore("I would say 0.65 overall"))).toBe(true)
    expect(Result.isFailure(Parse.parseScore("Step 3 of 4 looks fine", { fallbackToAnyNumber: true }))).toBe(true)
  })

  it("unitScore: a JSON score as a number in [0, 1] or a string with its scale", () => {
    expect(Parse.unitScore(0.5, "score")).toEqual(Result.succeed(0.5))
    expect(Parse.unitScore("0.25", "score")).toEqual(Result.succeed(0.25))
    expect(Parse.unitScore("7/10", "score")).toEqual(Result.succeed(0.7))
    expect(Parse.unitScore(" 70 % ", "score")).toEqual(Result.succeed(0.7))
    expect(Parse.unitScore(7, "score")).toEqual(Result.fail("the score 7 is outside [0, 1]"))
    expect(Parse.unitScore("5/0", "risk")).toEqual(Result.fail("the risk: 5/0 divides by zero"))
    expect(Parse.unitScore(undefined, "confidence")).toEqual(Result.fail("the confidence is missing"))
    expect(Parse.unitScore("high", "score")).toEqual(Result.fail('the score "high" is not a number'))
    expect(Parse.unitScore(Number.NaN, "score")).toEqual(Result.fail("the score NaN is outside [0, 1]"))
  })

  it("extractJson: deep nesting is not returned, and a text over the cap is read only up to it", () => {
    const deep = "[".repeat(10_000) + "]".repeat(10_000)
    const parsed = Parse.extractJson(deep)
    // The innermost arrays within the depth limit are the first candidate that is not too deep.
    expect(Result.isSuccess(parsed) && JSON.stringify(parsed.success)).toBe("[".repeat(Parse.maxJsonDepth) + "]".repeat(Parse.maxJsonDepth))
    expect(Result.isFailure(Parse.extractJson("{".repeat(60_000)))).toBe(true)
    expect(Parse.parseJson(deep)).toEqual(Result.fail(`the JSON nests deeper than ${Parse.maxJsonDepth} levels`))
    const late = " ".repeat(Parse.maxJsonChars) + '{"a": 1}'
    const missed = Parse.extractJson(late)
    expect(Result.isFailure(missed) && missed.failure).toContain(`only the first ${Parse.maxJsonChars} characters are read`)
    // Quotes in prose before the JSON do not hide it; a stray closing bracket does not either.
    expect(Parse.extractJson('He said "fine ] so: {"risk": 0.2}')).toEqual(Result.succeed({ risk: 0.2 }))
    expect(Parse.extractJson("{ not json {\"a\": 1} }")).toEqual(Result.succeed({ a: 1 }))
  })

  it("codeFences: fences in order, language tags dropped, an unclosed last fence runs to the end", () => {
    expect(Parse.codeFences("a\n```json\n{}\n```\nb\n```\nx\n```")).toEqual(["{}\n", "x\n"])
    expect(Parse.codeFences("```py  \r\nprint(1)")).toEqual(["print(1)"])
    expect(Parse.codeFences("no fences")).toEqual([])
  })

  it("finalAnswer: first or last non-empty FINAL:, case-insensitive", () => {
    const text = "Work...\nfinal: 12\nWait, recheck.\nFINAL:\nFINAL: 14\n"
    expect(Parse.finalAnswer(text)).toBe("12")
    expect(Parse.finalAnswer(text, "last")).toBe("14")
    expect(Parse.finalAnswer("no answer")).toBeUndefined()
    expect(Parse.lastNonEmptyLine("a\n  b  \n\n")).toBe("b")
    expect(Parse.lastNonEmptyLine(" \n")).toBeUndefined()
  })

  it("listItems: one item per line, bullets and numbering removed, a preamble dropped when items are marked", () => {
    expect(Parse.listItems("Gather data\n\nAnalyse it\n")).toEqual(["Gather data", "Analyse it"])
    expect(Parse.listItems("Here is the plan:\n1. Gather data\n2) Analyse it\n- Write up\n* Review\n• Ship\n(6) Rest"))
      .toEqual(["Gather data", "Analyse it", "Write up", "Review", "Ship", "Rest"])
    expect(Parse.listItems("Step 1: Measure\nstep 2 - Cut")).toEqual(["Measure", "Cut"])
    // A number without a space after it is content, not numbering.
    expect(Parse.listItems("1.5 cups of flour\n2 eggs")).toEqual(["1.5 cups of flour", "2 eggs"])
    expect(Parse.listItems("```\n- a\n- b\n```")).toEqual(["a", "b"])
    expect(Parse.listItems(" \n")).toEqual([])
  })

  it("extractTag: closed blocks, and an unclosed block only at the very end", () => {
    const out = "<think>plan</think>\n<action>{\"command\": [\"ls\"]}</action>\n<state_update>{\"goals\": [\"x\"]}"
    expect(Parse.extractTag(out, "think")).toBe("plan")
    expect(Parse.extractTag(out, "action")).toBe('{"command": ["ls"]}')
    expect(Parse.extractTag(out, "state_update")).toBe('{"goals": ["x"]}')
    expect(Parse.extractTag("<action>{\"a\": 1}\n<think>more</think>", "action")).toBeUndefined()
    expect(Parse.extractTag("nothing", "action")).toBeUndefined()
  })

  it("normalizeAnswer: whitespace, $, \\boxed{}, trailing period, canonical numbers", () => {
    expect(Parse.normalizeAnswer("  42.0 ")).toBe("42")
    expect(Parse.normalizeAnswer("$\\boxed{42}$")).toBe("42")
    expect(Parse.normalizeAnswer("\\boxed{\\frac{1}{2}}")).toBe("\\frac{1}{2}")
    expect(Parse.normalizeAnswer("1,000")).toBe("1000")
    expect(Parse.normalizeAnswer("42.")).toBe("42")
    expect(Parse.normalizeAnswer("x =   3")).toBe("x = 3")
    expect(Parse.normalizeAnswer("The answer is yes.")).toBe("The answer is yes")
    expect(Parse.normalizeAnswer("-0.50")).toBe("-0.5")
    expect(Parse.normalizeAnswer("3.14.")).toBe("3.14")
    expect(Parse.normalizeAnswer("\\(x^2\\)")).toBe("x^2")
    expect(Parse.normalizeAnswer("Wait...")).toBe("Wait...")
    expect(Parse.normalizeAnswer(`${"1".repeat(60_000)}x`)).toBe(`${"1".repeat(60_000)}x`)
    const long = ` ${"a  ".repeat(Parse.maxAnswerChars)} `
    expect(Parse.normalizeAnswer(long)).toBe(long.trim())
  })

  it("preview: whitespace collapsed, cut with an ellipsis, reading a bounded prefix", () => {
    expect(Parse.preview(" a \n b ")).toBe('"a b"')
    expect(Parse.preview("x".repeat(300))).toBe(`"${"x".repeat(200)}"…`)
    // Past the prefix it reads, it cannot know the rest is blank: the ellipsis says there was more.
    expect(Parse.preview(`${"x".repeat(10)}${" ".repeat(5_000)}`, 20)).toBe(`"${"x".repeat(10)}"…`)
  })
})
