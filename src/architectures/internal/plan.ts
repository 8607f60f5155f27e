/**
 * Plans as Plan-and-Execute reads them from a planner's text, and the order their steps can run in.
 */
import { Result, Schema } from "effect"
import * as Architecture from "../../core/Architecture.js"

/** One step of a plan. `id` is the planner's (or the step's number); `dependsOn` names other steps' ids. */
export interface Step {
  readonly id: string
  readonly description: string
  readonly dependsOn: ReadonlyArray<string>
}

/** A parsed plan. */
export interface Plan {
  readonly steps: ReadonlyArray<Step>
  /** How the text was read: a JSON list, or one step per line. */
  readonly parsed: "json" | "lines"
  /** Whether any step named its dependencies: then steps run in parallel levels, else one after the other. */
  readonly withDependencies: boolean
  /** Dependencies that named no step of the plan (or a step cut by `maxSteps`), dropped. */
  readonly droppedDependencies: ReadonlyArray<{ readonly step: string; readonly dependsOn: string }>
}

const Id = Schema.Union([Schema.String, Schema.Number])
const StepObject = Schema.Struct({
  id: Schema.optional(Schema.NullOr(Id)),
  description: Schema.String,
  depends_on: Schema.optional(Schema.NullOr(Schema.Array(Id))),
  dependsOn: Schema.optional(Schema.NullOr(Schema.Array(Id)))
})
const StepList = Schema.Array(Schema.Union([Schema.String, StepObject]))
// Some models wrap the list: `{"steps": [...]}` or `{"plan": [...]}`.
const Wrapped = Schema.Union([Schema.Struct({ steps: StepList }), Schema.Struct({ plan: StepList })])

type RawStep = { readonly id?: string; readonly description: string; readonly dependsOn?: ReadonlyArray<string> }

const fromJson = (items: typeof StepList.Type): Array<RawStep> =>
  items.map((item): RawStep => {
    if (typeof item === "string") return { description: item }
    const dependencies = item.depends_on ?? item.dependsOn
    return {
      ...(item.id !== undefined && item.id !== null ? { id: String(item.id).trim() } : {}),
      description: item.description,
      ...(dependencies !== undefined && dependencies !== null ? { dependsOn: dependencies.map((d) => String(d).trim()) } : {})
    }
  })

/**
 * Reads a plan: a JSON list of strings or of `{id, description, depends_on}` objects (code fences and a
 * `{"steps": […]}` wrapper tolerated), else one step per non-empty line with bullets and numbering removed.
 * Blank steps are dropped and the plan is cut to `maxSteps`. `Left` when two steps share an id. Linear in the
 * text, of which it reads a bounded part: JSON in the first `maxJsonChars`, lines in the first
 * `maxLineScanChars` (see `core/internal/parse.ts`); a plan is short, and only its first `maxSteps` steps count.
 */
export const parse = (text: string, maxSteps: number): Result.Result<Plan, string> => {
  let raw: Array<RawStep>
  let parsed: Plan["parsed"] = "json"
  const list = Architecture.parse.json(StepList, text, { expect: "array" })
  if (Result.isSuccess(list)) raw = fromJson(list.success)
  else {
    const wrapped = Architecture.parse.json(Wrapped, text, { expect: "object" })
    if (Result.isSuccess(wrapped)) raw = fromJson("steps" in wrapped.success ? wrapped.success.steps : wrapped.success.plan)
    else {
      raw = Architecture.parse.listItems(text).map((description) => ({ description }))
      parsed = "lines"
    }
  }
  const kept = raw.filter((step) => step.description.trim() !== "").slice(0, maxSteps)
  const steps: Array<Step> = kept.map((step, i) => ({
    id: step.id !== undefined && step.id !== "" ? step.id : String(i + 1),
    description: step.description.trim(),
    dependsOn: step.dependsOn ?? []
  }))
  const ids = new Set<string>()
  for (const step of steps) {
    if (ids.has(step.id)) return Result.fail(`the plan has two steps with the id ${JSON.stringify(step.id)}`)
    ids.add(step.id)
  }
  const droppedDependencies: Array<{ step: string; dependsOn: string }> = []
  const cleaned = steps.map((step) => {
    const known = step.dependsOn.filter((id) => {
      if (ids.has(id)) return true
      droppedDependencies.push({ step: step.id, dependsOn: id })
      return false
    })
    return known.length === step.dependsOn.length ? step : { ...step, dependsOn: known }
  })
  return Result.succeed({
    steps: cleaned,
    parsed,
    withDependencies: kept.some((step) => step.dependsOn !== undefined),
    droppedDependencies
  })
}

/**
 * The steps grouped in levels: every step's dependencies are in earlier levels, and the steps of one level can
 * run at once. Plan order is kept within a level. Without dependencies every step is its own level, in plan
 * order. `Left` names a dependency cycle (`a → b → a`: a depends on b, which depends on a).
 */
export const levels = (plan: Plan): Result.Result<Array<Array<Step>>, string> => {
  if (!plan.withDependencies) return Result.succeed(plan.steps.map((step) => [step]))
  const remaining = new Map(plan.steps.map((step) => [step.id, step]))
  const done = new Set<string>()
  const out: Array<Array<Step>> = []
  while (remaining.size > 0) {
    const ready = [...remaining.values()].filter((step) => step.dependsOn.every((id) => done.has(id)))
    if (ready.length === 0) {
      return Result.fail(`the plan has a dependency cycle: ${cycleIn(remaining).join(" → ")} (each step depends on the next)`)
    }
    for (const step of ready) remaining.delete(step.id)
    for (const step of ready) done.add(step.id)
    out.push(ready)
  }
  return Result.succeed(out)
}

// Every step left has a dependency among the steps left (else it would be ready): following those from any of
// them must come back to a step already seen.
const cycleIn = (remaining: ReadonlyMap<string, Step>): Array<string> => {
  const path: Array<string> = []
  let current = remaining.values().next().value!
  while (!path.includes(current.id)) {
    path.push(current.id)
    current = remaining.get(current.dependsOn.find((id) => remaining.has(id))!)!
  }
  return [...path.slice(path.indexOf(current.id)), current.id]
}

/** The ids a step depends on, directly or not, in plan order. Without dependencies: every earlier step. */
export const ancestors = (plan: Plan, step: Step): Array<string> => {
  const order = plan.steps.map((s) => s.id)
  if (!plan.withDependencies) return order.slice(0, order.indexOf(step.id))
  const byId = new Map(plan.steps.map((s) => [s.id, s]))
  const seen = new Set<string>()
  const visit = (id: string): void => {
    if (seen.has(id)) return
    seen.add(id)
    for (const dependency of byId.get(id)?.dependsOn ?? []) visit(dependency)
  }
  for (const dependency of step.dependsOn) visit(dependency)
  return order.filter((id) => seen.has(id))
}

/** The plan as the executor and synthesizer see it: `id. description (needs a, b)` lines. */
export const render = (steps: ReadonlyArray<Step>): string =>
  steps.map((step) =>
    `${step.id}. ${step.description}${step.dependsOn.length > 0 ? ` (needs ${step.dependsOn.join(", ")})` : ""}`
  ).join("\n")
