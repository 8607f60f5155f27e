import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as Plans from "../../../src/architectures/internal/plan.js"
import * as Parse from "../../../src/core/internal/parse.js"

const descriptions = (text: string, maxSteps = 8) => Result.getOrThrow(Plans.parse(text, maxSteps)).steps.map((step) => step.description)

describe("plan parsing on hostile planner replies", () => {
  it("a plan of 100,000 lines reads the lines in the scan window and keeps the first maxSteps", () => {
    const text = Array.from({ length: 100_000 }, (_, i) => `${i + 1}. [step] part ${i + 1}`).join("\n")
    const plan = Result.getOrThrow(Plans.parse(text, 5))
    expect(plan.parsed).toBe("lines")
    expect(plan.steps.map((step) => step.description)).toEqual([1, 2, 3, 4, 5].map((i) => `[step] part ${i}`))
  })

  it("brackets in prose before the JSON plan do not hide it, and are not taken for it", () => {
    expect(descriptions('Plan [draft] (see [1]):\n["Gather data", "Write it up"]')).toEqual(["Gather data", "Write it up"])
    expect(descriptions("1. Read [the docs]\n2. Try {it}")).toEqual(["Read [the docs]", "Try {it}"])
  })

  it("deep nesting is no plan: only lists within the depth limit are tried, and the one that decodes is empty", () => {
    const deep = "[".repeat(50_000) + "]".repeat(50_000)
    // The outer lists nest too deep to be read; inside, lists of lists are not steps; the innermost `[]` is a
    // plan of no steps (the run then ends with `emptyPlanOutput`).
    expect(Result.getOrThrow(Plans.parse(deep, 8))).toMatchObject({ parsed: "json", steps: [] })
    // Unclosed, it is no JSON at all: one line, one step.
    expect(Result.getOrThrow(Plans.parse("[".repeat(100_000), 8))).toMatchObject({ parsed: "lines", steps: [{ id: "1" }] })
  })

  it("a JSON plan past the JSON scan window is not read as JSON", () => {
    const late = `${" ".repeat(Parse.maxJsonChars)}["a", "b"]`
    expect(Result.getOrThrow(Plans.parse(late, 8)).steps).toEqual([])
  })

  it("levels: a dependency cycle is named, a long chain is levelled in order", () => {
    const cycle = Result.getOrThrow(
      Plans.parse('[{"id": "a", "description": "A", "depends_on": ["b"]}, {"id": "b", "description": "B", "depends_on": ["a"]}]', 8)
    )
    const levels = Plans.levels(cycle)
    expect(Result.isFailure(levels) && levels.failure).toBe("the plan has a dependency cycle: a → b → a (each step depends on the next)")
    const chain = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, description: `d${i}`, depends_on: i > 0 ? [`s${i - 1}`] : [] })))
    const levelled = Result.getOrThrow(Plans.levels(Result.getOrThrow(Plans.parse(chain, 200))))
    expect(levelled.map((level) => level.map((step) => step.id))).toEqual(Array.from({ length: 200 }, (_, i) => [`s${i}`]))
  })
})
