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
  })

  it("parseScore: labelled forms, fractions, percents, prose fallback, clamped", () => {
    expect(Parse.parseScore("score: 0.42")).toBe(0.42)
    expect(Parse.parseScore("Score=0.4\nbecause")).toBe(0.4)
    expect(Parse.parseScore("My score is 8/10.")).toBe(0.8)
    expect(Parse.parseScore("score: 85%")).toBe(0.85)
    expect(Parse.parseScore("score: 7")).toBe(1)
    expect(Parse.parseScore("score: -1")).toBe(0)
    expect(Parse.parseScore("I would say 0.65 overall", { fallbackToAnyNumber: true })).toBe(0.65)
    expect(Parse.parseScore("I would say 0.65 overall")).toBeUndefined()
    expect(Parse.parseScore("Step 3 of 4 looks fine", { fallbackToAnyNumber: true })).toBeUndefined()
    expect(Parse.parseScore("no number")).toBeUndefined()
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
  })
})
