/**
 * Plan-and-Execute: a planner breaks the task into steps, an executor carries out each step with the task, the
 * plan and the results it builds on, and a synthesizer writes the answer from the steps' results.
 *
 * - The plan is a JSON list of step descriptions, or of `{ "id", "description", "depends_on": [ids] }`
 *   objects (code fences tolerated); any other answer is read as one step per non-empty line, bullets and
 *   numbering removed. It is cut to `maxSteps`. An empty plan ends the run with `emptyPlanOutput`.
 * - Without dependencies the steps run one after the other, each seeing every earlier result. When steps name
 *   their dependencies they run as a DAG: a step starts as soon as the steps it depends on have finished (at most
 *   `maxConcurrency` at once; no waiting for a whole "level"), seeing the results of the steps it depends on,
 *   directly or not. A dependency cycle fails the run with `ArchitectureFailed` naming the cycle.
 * - A step fails when the executor's answer starts with `STEP FAILED:` (the default executor prompt asks for
 *   that) or the executor stops early (e.g. `max_turns_exceeded`). With `maxReplans` left, the planner is then
 *   asked for a new plan for the remaining work, which replaces the rest of the current plan (no new step of it
 *   starts; those in flight finish); otherwise the run goes on and the failure is passed along as that step's
 *   result.
 *
 * Roles are sub-agents: `<parent>__planner`, `<parent>__step_<k>` (k numbers each plan's steps in order before
 * any starts, continuing across replans, so a step a replan leaves unstarted leaves its number unused),
 * `<parent>__replanner_<n>`, `<parent>__synthesizer`. The default executor is the running agent itself (its
 * instructions, tools and model) with ReAct. A role that stops early at a limit interrupts the run with
 * `planner:<reason>`, `replanner:<n>:<reason>` or `synthesizer:<reason>` (a step that does is a failed step), a
 * spent budget with `budget:<limit>`, the best output so far being the steps' results; a role whose run fails
 * (a model error after retries…): the run fails with that role's `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it). A step that answers `STEP FAILED:` is not a failed run.
 *
 * Events: `plan.created` (`num_steps`), `plan.step_started`, `plan.step_completed`, `plan.replanned`,
 * `plan.completed`.
 *
 * @since 0.1.0
 */
import { Data, Deferred, Effect, Result, Schema, Semaphore } from "effect"
import type * as Agent from "../core/Agent.js"
import { ArchitectureFailed, type InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { yieldBeforeReading } from "../core/internal/parse.js"
import * as Plans from "./internal/plan.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"
import * as ReAct from "./ReAct.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "plan_and_execute"

/** One step of a plan. */
export type Step = Plans.Step
/** A parsed plan. */
export type Plan = Plans.Plan

/**
 * Reads a planner's answer (see the module comment); `Left` when two steps share an id. Exposed for tests and
 * for callers that plan elsewhere.
 */
export const parsePlan: (text: string, maxSteps: number) => Result.Result<Plan, string> = Plans.parse

/** The run's output when the planner produced no steps. */
export const emptyPlanOutput = "The planner produced no steps, so there was nothing to execute."

/** The prefix by which an executor marks a step it could not do. */
export const stepFailedPrefix = "STEP FAILED:"

/** The planner's default prompt; placeholders `{prompt}`, `{max_steps}`. */
export const defaultPlannerPrompt = `Break the task below into at most {max_steps} steps that together accomplish it. Reply with only \
a JSON array. Each item is a step description; or, when some steps do not need each other's results, an object \
{"id": "<short id>", "description": "<what to do>", "depends_on": ["<ids of the steps whose results it needs>"]}.

Task:
{prompt}`

/** The executor's default prompt; placeholders `{prompt}`, `{plan}`, `{step}`, `{step_id}`, `{previous}`. */
export const defaultExecutorPrompt = `You are carrying out one step of a plan for the task below.

Task:
{prompt}

Plan:
{plan}

Results you can build on:
{previous}

Do step {step_id} now: {step}
Reply with the step's result. If the step cannot be done, reply with a first line that starts with \
"${stepFailedPrefix}" followed by the reason.`

/** The planner's default prompt after a failed step; `{prompt}`, `{plan}`, `{completed}`, `{failed}`, `{max_steps}`. */
export const defaultReplanPrompt = `A plan for the task below could not be carried out as written. Make a new plan, of at most \
{max_steps} steps, for the work that remains; do not repeat the steps that are done. Reply in the same format: only a \
JSON array of step descriptions, or of {"id", "description", "depends_on"} objects. Reply [] if nothing remains to do.

Task:
{prompt}

Plan:
{plan}

Done:
{completed}

Failed:
{failed}`

/** The synthesizer's default prompt; placeholders `{prompt}`, `{plan}`, `{results}`. */
export const defaultSynthesizerPrompt = `Write the final answer to the task below from the results of its steps. Reply with the \
answer only.

Task:
{prompt}

Steps and their results:
{results}`

/** The options of Plan-and-Execute. */
export interface Options<RP = never, RE = Model.Model, RS = never> {
  /** Steps per plan at most (≥ 1, default 8). */
  readonly maxSteps?: number | undefined
  /** New plans after a failed step, at most (≥ 0, default 0: a failed step is passed along). */
  readonly maxReplans?: number | undefined
  /** Steps of one level running at once, at most (≥ 1, default 4). */
  readonly maxConcurrency?: number | undefined
  /** Writes the plan (and new plans). Default: a plain agent on the run's model. */
  readonly planner?: Agent.Agent<RP> | undefined
  /** Carries out each step. Default: the running agent (instructions, tools, model) with ReAct. */
  readonly executor?: Agent.Agent<RE> | undefined
  /** Writes the answer. Default: a plain agent on the run's model. */
  readonly synthesizer?: Agent.Agent<RS> | undefined
  /** `{prompt}`, `{max_steps}`. */
  readonly plannerPrompt?: string | undefined
  /** `{prompt}`, `{plan}`, `{step}`, `{step_id}`, `{previous}`. */
  readonly executorPrompt?: string | undefined
  /** `{prompt}`, `{plan}`, `{completed}`, `{failed}`, `{max_steps}`. */
  readonly replanPrompt?: string | undefined
  /** `{prompt}`, `{plan}`, `{results}`. */
  readonly synthesizerPrompt?: string | undefined
}

const OptionsSchema = Schema.Struct({
  maxSteps: Opts.IntAtLeast(1).pipe(Opts.withDefault(8)),
  maxReplans: Opts.IntAtLeast(0).pipe(Opts.withDefault(0)),
  maxConcurrency: Opts.IntAtLeast(1).pipe(Opts.withDefault(4)),
  planner: Schema.optional(Opts.AgentSchema),
  executor: Schema.optional(Opts.AgentSchema),
  synthesizer: Schema.optional(Opts.AgentSchema),
  plannerPrompt: Template.Template(["prompt", "max_steps"]).pipe(Opts.withDefault(defaultPlannerPrompt)),
  executorPrompt: Template.Template(["prompt", "plan", "step", "step_id", "previous"]).pipe(Opts.withDefault(defaultExecutorPrompt)),
  replanPrompt: Template.Template(["prompt", "plan", "completed", "failed", "max_steps"]).pipe(Opts.withDefault(defaultReplanPrompt)),
  synthesizerPrompt: Template.Template(["prompt", "plan", "results"]).pipe(Opts.withDefault(defaultSynthesizerPrompt))
})
type Config = typeof OptionsSchema.Type
const defaults: Config = Schema.decodeSync(OptionsSchema)({})

/**
 * Plan-and-Execute with options, checked here: `maxSteps: 0`, a negative `maxReplans` or a template with an
 * unknown placeholder fail with `InvalidOptions`.
 */
export const make = <RP = never, RE = Model.Model, RS = never>(
  options: Options<RP, RE, RS> = {}
): Effect.Effect<Architecture.Architecture<RP | RE | RS | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("PlanAndExecute", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RP | RE | RS | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RP = never, RE = Model.Model, RS = never>(options: Options<RP, RE, RS> = {}): Architecture.Architecture<RP | RE | RS | Model.Model> => Opts.runUnsafe(make(options))

/** Plan-and-Execute with its defaults: up to 8 steps, no replanning. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  // A closure: `program` is defined below.
  program: (input) => program(defaults)(input)
}) as Architecture.Architecture<Model.Model>

/** What one executed step produced, as `RunResult.metadata.steps` lists it. */
export interface StepResult {
  /** The step's number in the run (its session is `<parent>__step_<k>`). */
  readonly k: number
  readonly id: string
  readonly description: string
  readonly output: string
  readonly failed: boolean
  /** Which plan the step belonged to: 0 for the first, n for the n-th replan. */
  readonly plan: number
}

/** Whether an executor's answer marks its step as failed: its first non-empty line starts with `STEP FAILED:`. */
export const isStepFailure = (output: string): boolean =>
  output.trimStart().slice(0, stepFailedPrefix.length).toUpperCase() === stepFailedPrefix

const renderResults = (results: ReadonlyArray<StepResult>): string =>
  results.length === 0
    ? "(none yet)"
    : results.map((r) => `Step ${r.id}${r.failed ? " (failed)" : ""}: ${r.description}\n${r.output}`).join("\n\n")

/** A step stopped the whole run (a spent budget): ends the other steps at once. */
class StepStop extends Data.TaggedError("StepStop")<{ readonly reason: string }> {}

type StepOutcome =
  | { readonly _tag: "Done"; readonly result: StepResult }
  | { readonly _tag: "Stop"; readonly reason: string }

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const planner = config.planner ?? Roles.plain("planner")
    const executor = config.executor ?? Roles.withArchitecture(input.agent, ReAct.architecture)
    const synthesizer = config.synthesizer ?? Roles.plain("synthesizer")
    const maxSteps = String(config.maxSteps)
    const results: Array<StepResult> = []
    const plans: Array<ReadonlyArray<Step>> = []
    let replans = 0
    let k = 0
    const metadata = () => ({ plan: plans.at(-1) ?? [], plans, steps: results, replans })
    const stop = (reason: string) => ({ output: results.length > 0 ? renderResults(results) : "", interrupted: reason, metadata: metadata() })

    /** Reads a planner's answer; a plan with duplicate ids or a cycle fails the run. */
    const readPlan = (text: string) =>
      Effect.gen(function*() {
        yield* yieldBeforeReading(text)
        const plan = Plans.parse(text, config.maxSteps)
        if (Result.isFailure(plan)) return yield* new ArchitectureFailed({ architecture: name, message: plan.failure })
        const levels = Plans.levels(plan.success)
        if (Result.isFailure(levels)) return yield* new ArchitectureFailed({ architecture: name, message: levels.failure })
        return { plan: plan.success, levels: levels.success }
      })

    const first = yield* Roles.runOrFail(planner, Template.fill(config.plannerPrompt, { prompt: input.prompt, max_steps: maxSteps }), {
      role: "planner"
    })
    if (first._tag !== "Completed") return stop(Roles.stopReason("planner", first.reason))
    let current = yield* readPlan(first.result.output)
    plans.push(current.plan.steps)
    yield* Architecture.progress("plan.created", {
      num_steps: current.plan.steps.length,
      steps: current.plan.steps,
      parsed: current.plan.parsed,
      levels: current.levels.map((level) => level.map((step) => step.id)),
      ...(current.plan.droppedDependencies.length > 0 ? { dropped_dependencies: current.plan.droppedDependencies } : {})
    })
    if (current.plan.steps.length === 0) {
      yield* Architecture.progress("plan.completed", { num_steps: 0 })
      return { output: emptyPlanOutput, metadata: metadata() }
    }

    const runStep = (plan: Plan, planIndex: number, context: ReadonlyArray<StepResult>) => (step: Step, k: number) =>
      Effect.gen(function*() {
        yield* Architecture.progress("plan.step_started", { k, id: step.id, description: step.description })
        // What an earlier plan got done, then what this step builds on in its own plan.
        const byId = new Map(context.filter((r) => r.plan === planIndex).map((r) => [r.id, r]))
        const previous = [
          ...context.filter((r) => r.plan < planIndex && !r.failed),
          ...Plans.ancestors(plan, step).flatMap((id) => byId.get(id) ?? [])
        ]
        const ran = yield* Roles.runOrFail(
          executor,
          Template.fill(config.executorPrompt, {
            prompt: input.prompt,
            plan: Plans.render(plan.steps),
            step: step.description,
            step_id: step.id,
            previous: renderResults(previous)
          }),
          { role: "step", index: k }
        )
        if (ran._tag === "Interrupted" && Roles.isBudget(ran.reason)) return { _tag: "Stop", reason: ran.reason } as StepOutcome
        yield* yieldBeforeReading(ran.result.output)
        const output = ran._tag === "Interrupted"
          ? `${stepFailedPrefix} the executor stopped early (${ran.reason})${ran.result.output !== "" ? `\n${ran.result.output}` : ""}`
          : ran.result.output
        const result: StepResult = {
          k,
          id: step.id,
          description: step.description,
          output,
          failed: isStepFailure(output),
          plan: planIndex
        }
        yield* Architecture.progress("plan.step_completed", { k, id: step.id, output, failed: result.failed })
        return { _tag: "Done", result } as StepOutcome
      })

    // Runs the current plan as a DAG: a step starts as soon as the steps it depends on have finished (at most
    // `maxConcurrency` at once); a failed step with replans left stops new steps from starting, and once the steps
    // in flight are done a new plan replaces the rest.
    for (;;) {
      const plan = current.plan
      const deps = new Map(plan.steps.map((step, i) => [
        step.id,
        plan.withDependencies ? step.dependsOn : i === 0 ? [] : [plan.steps[i - 1]!.id]
      ]))
      // Numbers are given before anything starts (in level order), so session ids do not depend on timing.
      const numbered = current.levels.flat().map((step) => [step, ++k] as const)
      const finished = new Map(numbered.map(([step]) => [step.id, Deferred.makeUnsafe<void>()]))
      const permits = yield* Semaphore.make(config.maxConcurrency)
      const failed: Array<StepResult> = []
      let replanning = false
      const planIndex = replans
      const outcomes = yield* Effect.forEach(numbered, ([step, n]) =>
        Effect.gen(function*() {
          for (const dependency of deps.get(step.id) ?? []) yield* Deferred.await(finished.get(dependency)!)
          // A replan is coming: what has not started yet is left to the new plan.
          if (replanning) return undefined
          const outcome = yield* permits.withPermits(1)(runStep(plan, planIndex, results.slice())(step, n))
          if (outcome._tag === "Stop") return yield* Effect.fail(new StepStop({ reason: outcome.reason }))
          results.push(outcome.result)
          yield* Architecture.setOutput(renderResults(results))
          if (outcome.result.failed) {
            failed.push(outcome.result)
            if (replans < config.maxReplans) replanning = true
          }
          return outcome.result
        }).pipe(Effect.ensuring(Deferred.succeed(finished.get(step.id)!, undefined))), { concurrency: "unbounded" }).pipe(
          Effect.map((done) => ({ _tag: "Done" as const, done })),
          Effect.catchTag("StepStop", (stopped) => Effect.succeed({ _tag: "Stop" as const, reason: stopped.reason }))
        )
      // Finish order varies; plan order does not: what later prompts read is in step order.
      results.sort((a, b) => a.k - b.k)
      if (outcomes._tag === "Stop") return stop(outcomes.reason)
      if (!replanning) break

      replans++
      const replanned = yield* Roles.runOrFail(
        planner,
        Template.fill(config.replanPrompt, {
          prompt: input.prompt,
          plan: Plans.render(current.plan.steps),
          completed: renderResults(results.filter((r) => !r.failed)),
          failed: renderResults(failed),
          max_steps: maxSteps
        }),
        { role: "replanner", index: replans }
      )
      if (replanned._tag !== "Completed") return stop(Roles.stopReason(`replanner:${replans}`, replanned.reason))
      current = yield* readPlan(replanned.result.output)
      plans.push(current.plan.steps)
      yield* Architecture.progress("plan.replanned", {
        replan: replans,
        failed_steps: failed.map((r) => r.id),
        num_steps: current.plan.steps.length,
        steps: current.plan.steps
      })
    }

    const answer = yield* Roles.runOrFail(
      synthesizer,
      Template.fill(config.synthesizerPrompt, {
        prompt: input.prompt,
        plan: Plans.render(plans.flat()),
        results: renderResults(results)
      }),
      { role: "synthesizer" }
    )
    if (answer._tag !== "Completed") return stop(Roles.stopReason("synthesizer", answer.reason))
    yield* Architecture.progress("plan.completed", {
      num_steps: results.length,
      failed_steps: results.filter((r) => r.failed).map((r) => r.id),
      replans
    })
    return { output: answer.result.output, metadata: metadata() }
  })
