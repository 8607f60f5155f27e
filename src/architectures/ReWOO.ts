/**
 * ReWOO (reasoning without observation): one planner call writes the whole tool plan up front, the steps run as
 * real tool calls, and one solver call writes the answer from their results — three model calls however many tools
 * run, instead of one call per tool as in ReAct.
 *
 * - The plan is a JSON array of `{ "id", "tool", "args" }` (code fences and prose around it tolerated; `id`
 *   defaults to `E<n>`), cut to `maxSteps`. An argument may use an earlier step's result as `{{E1}}`.
 * - A plan that names an unknown tool, repeats an id, refers to an unknown step or refers in a circle is shown to
 *   the planner once, with the problem, for a corrected plan; a second bad plan fails the run with a typed
 *   `InvalidPlan` naming the problem. A plan that is not a JSON array of steps counts as bad the same way.
 * - Steps run as a DAG: a step starts when the steps it refers to are done, `concurrency` of them at once (all by
 *   default), each a real tool call with `ToolCalled` / `ToolReturned` events and the tool's usual result cap.
 *   Ids order numerically (`E2` before `E10`). A step whose tool fails (an `ERROR:` result) is failed; the steps
 *   that depend on it, directly or not, do not run and are recorded as skipped with that failure — no empty string
 *   is passed on as a result.
 * - The solver sees the task and every step's result, error or skip, in plan order.
 *
 * Model calls are steps `rewoo.plan`, `rewoo.replan`, `rewoo.solve` of the run's own session (a recorded run
 * replays). A model failure fails the run; a spent budget ends it interrupted (`budget:<limit>`) with the
 * results so far (and the plan and steps in its metadata).
 *
 * Events: `rewoo.plan`, `rewoo.step_started`, `rewoo.step_completed`, `rewoo.step_skipped`.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, ReWOO, ScriptedModel, Tool } from "valet"
 *
 * const lookup = Tool.make({
 *   name: "lookup",
 *   description: "Looks up a fact.",
 *   parameters: Schema.Struct({ topic: Schema.String }),
 *   handler: () => Effect.succeed("330 metres")
 * })
 * const researcher = Agent.make({ name: "researcher", instructions: "", tools: [lookup], architecture: ReWOO.architecture })
 * // Two model calls: the plan (one lookup), then the answer from its result.
 * const result = Agent.run(researcher, "How tall is the Eiffel Tower?").pipe(
 *   Effect.provide(ScriptedModel.layer([
 *     JSON.stringify([{ id: "E1", tool: "lookup", args: { topic: "Eiffel Tower height" } }]),
 *     "About 330 metres."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Deferred, Effect, Result, Schema, Semaphore } from "effect"
import { InvalidPlan } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Model from "../core/Model.js"
import * as Tool from "../core/Tool.js"

/**
 * The planner's default prompt (the system message; the task follows as the user message); placeholders
 * `{instructions}`, `{tools}`, `{max_steps}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultPlannerPrompt = `{instructions}

Plan how to answer the user's task with these tools, before any of them runs:
{tools}

Answer with a JSON array of at most {max_steps} steps, each {"id": "E1", "tool": "<tool name>", "args": {...}}. \
An argument may use the result of an earlier step by writing its id in double braces, e.g. "{{E1}}". Use only the \
tools above.`

/**
 * The solver's default prompt; placeholders `{task}`, `{evidence}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultSolverPrompt = `Task: {task}

Evidence gathered for it:
{evidence}

Answer the task from this evidence. Where a step failed or was skipped, say what could not be found out.`

// ---------------------------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------------------------

/**
 * One step of a plan.
 *
 * @since 0.2.0
 * @category plans
 */
export interface Step {
  readonly id: string
  readonly tool: string
  readonly args: Readonly<Record<string, unknown>>
  /** The ids its arguments refer to. */
  readonly refs: ReadonlyArray<string>
}

const StepJson = Schema.Struct({
  id: Schema.optional(Schema.String),
  tool: Schema.String,
  args: Schema.optional(Schema.Record(Schema.String, Schema.Unknown))
})
const PlanJson = Schema.Array(StepJson)

const refPattern = /\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g

const refsIn = (value: unknown, out: Set<string>): void => {
  if (typeof value === "string") for (const match of value.matchAll(refPattern)) out.add(match[1]!)
  else if (Array.isArray(value)) for (const item of value) refsIn(item, out)
  else if (value !== null && typeof value === "object") for (const item of Object.values(value)) refsIn(item, out)
}

/**
 * Compares ids the way people number them: `E2` before `E10`.
 *
 * @since 0.2.0
 * @category plans
 */
export const compareIds = (a: string, b: string): number => a.localeCompare(b, "en", { numeric: true, sensitivity: "base" })

/**
 * Reads and checks a plan against the tools; a failure says what is wrong with it.
 *
 * @since 0.2.0
 * @category plans
 */
export const parsePlan = (text: string, tools: ReadonlySet<string>, maxSteps: number): Result.Result<ReadonlyArray<Step>, string> => {
  const decoded = Architecture.parse.json(PlanJson, text, { expect: "array" })
  if (Result.isFailure(decoded)) return Result.fail(`the plan is not a JSON array of {"id", "tool", "args"} steps (${decoded.failure})`)
  const steps = decoded.success.slice(0, maxSteps).map((step, i): Step => {
    const refs = new Set<string>()
    refsIn(step.args ?? {}, refs)
    return { id: step.id ?? `E${i + 1}`, tool: step.tool, args: step.args ?? {}, refs: [...refs] }
  })
  const ids = new Set<string>()
  for (const step of steps) {
    if (ids.has(step.id)) return Result.fail(`two steps have the id ${step.id}`)
    ids.add(step.id)
  }
  for (const step of steps) {
    if (!tools.has(step.tool)) return Result.fail(`step ${step.id} uses the unknown tool "${step.tool}" (tools: ${[...tools].join(", ") || "none"})`)
    const unknown = step.refs.find((ref) => !ids.has(ref))
    if (unknown !== undefined) return Result.fail(`step ${step.id} refers to {{${unknown}}}, which no step is`)
  }
  // A circle: depth-first over the references.
  const byId = new Map(steps.map((step) => [step.id, step]))
  const state = new Map<string, "visiting" | "done">()
  const visit = (id: string, trail: ReadonlyArray<string>): string | undefined => {
    if (state.get(id) === "done") return undefined
    if (state.get(id) === "visiting") return [...trail.slice(trail.indexOf(id)), id].join(" → ")
    state.set(id, "visiting")
    for (const ref of byId.get(id)!.refs) {
      const circle = visit(ref, [...trail, id])
      if (circle !== undefined) return circle
    }
    state.set(id, "done")
    return undefined
  }
  for (const step of steps) {
    const circle = visit(step.id, [])
    if (circle !== undefined) return Result.fail(`the steps refer to each other in a circle: ${circle}`)
  }
  return Result.succeed([...steps].sort((a, b) => compareIds(a.id, b.id)))
}

/** The arguments with every `{{id}}` replaced by that step's result (a value that is only a reference: the result). */
const substitute = (value: unknown, results: ReadonlyMap<string, string>): unknown => {
  if (typeof value === "string") {
    const whole = /^\{\{\s*([A-Za-z0-9_-]+)\s*\}\}$/.exec(value)
    if (whole !== null) return results.get(whole[1]!) ?? value
    return value.replace(refPattern, (ref, id: string) => results.get(id) ?? ref)
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, results))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, results)]))
  }
  return value
}

// ---------------------------------------------------------------------------------------------------------
// The declaration
// ---------------------------------------------------------------------------------------------------------

/**
 * What became of one step.
 *
 * @since 0.2.0
 * @category plans
 */
export type Outcome =
  | { readonly _tag: "Done"; readonly id: string; readonly tool: string; readonly result: string }
  | { readonly _tag: "Failed"; readonly id: string; readonly tool: string; readonly error: string }
  | { readonly _tag: "Skipped"; readonly id: string; readonly tool: string; readonly because: string }

const evidence = (outcomes: ReadonlyArray<Outcome>): string =>
  outcomes.length === 0
    ? "(no steps)"
    : outcomes.map((o) =>
      o._tag === "Done"
        ? `${o.id} (${o.tool}): ${o.result}`
        : o._tag === "Failed"
        ? `${o.id} (${o.tool}) FAILED: ${o.error}`
        : `${o.id} (${o.tool}) SKIPPED: ${o.because}`
    ).join("\n")

const describeTools = (definitions: ReadonlyArray<Model.ToolDefinition>): string =>
  definitions.length === 0
    ? "(no tools)"
    : definitions.map((d) => `- ${d.name}: ${d.description} — arguments: ${JSON.stringify(d.parameters)}`).join("\n")

const { concurrency, int, template, withDefault } = Architecture.option

/**
 * ReWOO, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's registries
 * read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "rewoo",
  title: "ReWOO",
  description: "the whole tool plan in one call, the tools run as a DAG, one solver call",
  options: {
    /** Steps per plan at most (≥ 1, default 8). */
    maxSteps: int(1).pipe(withDefault(8)),
    /** Steps that run at once, among those whose references are done: an integer ≥ 1 or `"unbounded"` (default). */
    concurrency: concurrency.pipe(withDefault("unbounded")),
    /** The planner's system prompt template (`{instructions}`, `{tools}`, `{max_steps}`); the task is the user message. */
    plannerPrompt: template(["instructions", "tools", "max_steps"]).pipe(withDefault(defaultPlannerPrompt)),
    /** The solver's prompt template (`{task}`, `{evidence}`). */
    solverPrompt: template(["task", "evidence"]).pipe(withDefault(defaultSolverPrompt))
  },
  deprecated: {
    // ReWOO 0.x ran its steps all at once or one at a time.
    parallel: { to: "concurrency", map: (parallel: unknown) => (parallel === true ? "unbounded" : parallel === false ? 1 : parallel) }
  },
  program: (input, options) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const kit = Tool.toolkit(input.agent.tools as ReadonlyArray<Tool.Tool>)
      const toolNames = new Set(kit.byName.keys())
      const system = Architecture.fill(options.plannerPrompt, {
        instructions: input.agent.instructions,
        tools: describeTools(kit.definitions),
        max_steps: String(options.maxSteps)
      }).trim()
      const outcomes = new Map<string, Outcome>()
      let steps: ReadonlyArray<Step> = []
      const inOrder = () => steps.flatMap((step) => outcomes.get(step.id) ?? [])
      const metadata = () => ({ plan: steps.map(({ args, id, tool }) => ({ id, tool, args })), steps: inOrder() })
      yield* Architecture.setMetadata(metadata)

      const messages: Array<Model.Message> = [Model.system(system), ...Architecture.conversation(input)]
      const planned = Model.text(yield* Architecture.generate({ messages }, { step: "rewoo.plan" }))
      let parsed = parsePlan(planned, toolNames, options.maxSteps)
      if (Result.isFailure(parsed)) {
        // Shown once, with the problem; a second bad plan is the run's failure.
        const retried = yield* Architecture.generate({
          messages: [
            ...messages,
            Model.assistant(planned),
            Model.user(`That plan cannot run: ${parsed.failure}. Write the corrected plan, as a JSON array only.`)
          ]
        }, { step: "rewoo.replan" })
        parsed = parsePlan(Model.text(retried), toolNames, options.maxSteps)
        if (Result.isFailure(parsed)) return yield* new InvalidPlan({ sessionId: run.sessionId, problem: parsed.failure })
      }
      steps = parsed.success
      yield* Architecture.progress("rewoo.plan", { steps: steps.map(({ args, id, tool }) => ({ id, tool, args })) })

      const finished = new Map(steps.map((step) => [step.id, Deferred.makeUnsafe<void>()]))
      const permits = yield* Semaphore.make(options.concurrency === "unbounded" ? Math.max(1, steps.length) : options.concurrency)
      const results = new Map<string, string>()
      yield* Effect.forEach(steps, (step) =>
        Effect.gen(function*() {
          for (const ref of step.refs) yield* Deferred.await(finished.get(ref)!)
          const blocked = step.refs.map((ref) => outcomes.get(ref)!).find((o) => o._tag !== "Done")
          if (blocked !== undefined) {
            const because = blocked._tag === "Failed" ? `${blocked.id} failed: ${blocked.error}` : `${blocked.id} was skipped (${blocked.because})`
            outcomes.set(step.id, { _tag: "Skipped", id: step.id, tool: step.tool, because })
            yield* Architecture.progress("rewoo.step_skipped", { id: step.id, because })
            return
          }
          yield* permits.withPermits(1)(Effect.gen(function*() {
            yield* Architecture.progress("rewoo.step_started", { id: step.id, tool: step.tool })
            const args = substitute(step.args, results)
            const called = yield* Architecture.executeTool(kit, { id: `${run.sessionId}_${step.id}`, name: step.tool, arguments: JSON.stringify(args) })
            if (called.isError) {
              outcomes.set(step.id, { _tag: "Failed", id: step.id, tool: step.tool, error: called.content.replace(/^ERROR:\s*/, "") })
            } else {
              results.set(step.id, called.content)
              outcomes.set(step.id, { _tag: "Done", id: step.id, tool: step.tool, result: called.content })
            }
            yield* Architecture.progress("rewoo.step_completed", { id: step.id, failed: called.isError })
            yield* Architecture.setOutput(evidence(inOrder()))
          }))
        }).pipe(Effect.ensuring(Deferred.succeed(finished.get(step.id)!, undefined))), { concurrency: "unbounded", discard: true })

      const solved = yield* Architecture.generate({
        messages: [
          Model.system(input.agent.instructions),
          ...input.history,
          Model.user(Architecture.fill(options.solverPrompt, { task: input.prompt, evidence: evidence(inOrder()) }))
        ].filter((message) => message.content !== "")
      }, { step: "rewoo.solve" })
      return { output: Model.text(solved), metadata: metadata() }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of ReWOO.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * ReWOO with options, checked here: `maxSteps: 0`, a `concurrency` below 1 or a template with an unknown placeholder
 * fail with `InvalidOptions`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

/**
 * ReWOO with its defaults: plans of up to 8 steps, independent steps all at once.
 *
 * @since 0.2.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()
