/**
 * Plan-and-Execute: a planner breaks the task into steps, an executor carries out each step with the task, the
 * plan and the results it builds on, and a synthesizer writes the answer from the steps' results.
 *
 * - The plan is a JSON list of step descriptions, or of `{ "id", "description", "depends_on": [ids] }`
 *   objects (code fences tolerated); any other answer is read as one step per non-empty line, bullets and
 *   numbering removed. It is cut to `maxSteps`. An empty plan ends the run with `emptyPlanOutput`.
 * - Without dependencies the steps run one after the other, each seeing every earlier result. When steps name
 *   their dependencies they run as a DAG: a step starts as soon as the steps it depends on have finished (at most
 *   `concurrency` at once; no waiting for a whole "level"), seeing the results of the steps it depends on,
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
 * spent budget with `budget:<limit>`; the output is then the steps' results so far (the synthesizer's partial
 * answer when it wrote one). A role whose run fails (a model error after retries…) fails the run with that role's
 * `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it); a step that
 * answers `STEP FAILED:` is not a failed run.
 *
 * Events: `plan_and_execute.created` (`num_steps`, `steps`, `parsed`, `levels`), `plan_and_execute.step_started`,
 * `plan_and_execute.step_completed`, `plan_and_execute.replanned`, `plan_and_execute.completed`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, PlanAndExecute, ScriptedModel } from "valet"
 *
 * const program = Effect.gen(function*() {
 *   const architecture = yield* PlanAndExecute.make({ maxSteps: 8, maxReplans: 1, concurrency: 4 })
 *   // Steps run as this agent (its instructions and tools) with ReAct.
 *   const agent = Agent.make({ name: "analyst", instructions: "You are a careful analyst.", architecture })
 *   const result = yield* Agent.run(agent, "Apples or pears?")
 *   console.log(result.output, result.modelCalls) // "Apples: crisper." 5
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(ScriptedModel.layer([
 *   // The planner: steps a and b are independent and run at the same time; c needs both.
 *   '[{"id": "a", "description": "Describe apples", "depends_on": []},' +
 *   ' {"id": "b", "description": "Describe pears", "depends_on": []},' +
 *   ' {"id": "c", "description": "Compare", "depends_on": ["a", "b"]}]',
 *   "Apples are crisp.", // step a
 *   "Pears are soft.", // step b
 *   "Apples are crisper.", // step c
 *   "Apples: crisper." // the synthesizer
 * ]))))
 * ```
 *
 * @since 0.1.0
 */
import { Deferred, Effect, Result, Semaphore } from "effect"
import { ArchitectureFailed } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"
import * as Plans from "./internal/plan.js"
import * as ReAct from "./ReAct.js"

/**
 * One step of a plan.
 *
 * @since 0.1.0
 * @category models
 */
export type Step = Plans.Step

/**
 * A parsed plan.
 *
 * @since 0.1.0
 * @category models
 */
export type Plan = Plans.Plan

/**
 * Reads a planner's answer (see the module comment); `Left` when two steps share an id. Exposed for tests and
 * for callers that plan elsewhere.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parsePlan: (text: string, maxSteps: number) => Result.Result<Plan, string> = Plans.parse

/**
 * The run's output when the planner produced no steps.
 *
 * @since 0.1.0
 * @category prompts
 */
export const emptyPlanOutput = "The planner produced no steps, so there was nothing to execute."

/**
 * The prefix by which an executor marks a step it could not do.
 *
 * @since 0.1.0
 * @category prompts
 */
export const stepFailedPrefix = "STEP FAILED:"

/**
 * The planner's default prompt; placeholders `{task}`, `{max_steps}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultPlannerPrompt = `Break the task below into at most {max_steps} steps that together accomplish it. Reply with only \
a JSON array. Each item is a step description; or, when some steps do not need each other's results, an object \
{"id": "<short id>", "description": "<what to do>", "depends_on": ["<ids of the steps whose results it needs>"]}.

Task:
{task}`

/**
 * The executor's default prompt; placeholders `{task}`, `{plan}`, `{step}`, `{step_id}`, `{previous}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultExecutorPrompt = `You are carrying out one step of a plan for the task below.

Task:
{task}

Plan:
{plan}

Results you can build on:
{previous}

Do step {step_id} now: {step}
Reply with the step's result. If the step cannot be done, reply with a first line that starts with \
"${stepFailedPrefix}" followed by the reason.`

/**
 * The planner's default prompt after a failed step; `{task}`, `{plan}`, `{completed}`, `{failed}`, `{max_steps}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultReplanPrompt = `A plan for the task below could not be carried out as written. Make a new plan, of at most \
{max_steps} steps, for the work that remains; do not repeat the steps that are done. Reply in the same format: only a \
JSON array of step descriptions, or of {"id", "description", "depends_on"} objects. Reply [] if nothing remains to do.

Task:
{task}

Plan:
{plan}

Done:
{completed}

Failed:
{failed}`

/**
 * The synthesizer's default prompt; placeholders `{task}`, `{plan}`, `{results}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultSynthesizerPrompt = `Write the final answer to the task below from the results of its steps. Reply with the \
answer only.

Task:
{task}

Steps and their results:
{results}`

/**
 * What one executed step produced, as `RunResult.metadata.steps` lists it.
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * Whether an executor's answer marks its step as failed: its first non-empty line starts with `STEP FAILED:`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const isStepFailure = (output: string): boolean =>
  output.trimStart().slice(0, stepFailedPrefix.length).toUpperCase() === stepFailedPrefix

const renderResults = (results: ReadonlyArray<StepResult>): string =>
  results.length === 0
    ? "(none yet)"
    : results.map((r) => `Step ${r.id}${r.failed ? " (failed)" : ""}: ${r.description}\n${r.output}`).join("\n\n")

const { agent, concurrency, int, optional, template, withDefault } = Architecture.option

/**
 * Plan-and-Execute, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the
 * CLI's registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "plan_and_execute",
  title: "PlanAndExecute",
  description: "a planner's steps run in order or as a DAG, a synthesizer writes the answer",
  options: {
    /** Steps per plan at most (≥ 1, default 8). */
    maxSteps: int(1).pipe(withDefault(8)),
    /** New plans after a failed step, at most (≥ 0, default 0: a failed step is passed along). */
    maxReplans: int(0).pipe(withDefault(0)),
    /** Steps running at once, at most: an integer ≥ 1 or `"unbounded"` (default 4). */
    concurrency: concurrency.pipe(withDefault<typeof concurrency>(4)),
    /** Writes the plan (and new plans). Default: a plain agent on the run's model. */
    planner: optional(agent),
    /** Carries out each step. Default: the running agent (instructions, tools, model) with ReAct. */
    executor: optional(agent),
    /** Writes the answer. Default: a plain agent on the run's model. */
    synthesizer: optional(agent),
    /** The planner's prompt template (`{task}`, `{max_steps}`). */
    plannerPrompt: template(["task", "max_steps"]).pipe(withDefault(defaultPlannerPrompt)),
    /** The executor's prompt template (`{task}`, `{plan}`, `{step}`, `{step_id}`, `{previous}`). */
    executorPrompt: template(["task", "plan", "step", "step_id", "previous"]).pipe(withDefault(defaultExecutorPrompt)),
    /** The planner's prompt template after a failed step (`{task}`, `{plan}`, `{completed}`, `{failed}`, `{max_steps}`). */
    replanPrompt: template(["task", "plan", "completed", "failed", "max_steps"]).pipe(withDefault(defaultReplanPrompt)),
    /** The synthesizer's prompt template (`{task}`, `{plan}`, `{results}`). */
    synthesizerPrompt: template(["task", "plan", "results"]).pipe(withDefault(defaultSynthesizerPrompt))
  },
  agentOptions: ["planner", "executor", "synthesizer"],
  deprecated: { maxConcurrency: "concurrency" },
  program: (input, options) =>
    Effect.gen(function*() {
      const planner = options.planner ?? Architecture.plainAgent("planner")
      const executor = options.executor ?? Architecture.withArchitecture(input.agent, ReAct.architecture)
      const synthesizer = options.synthesizer ?? Architecture.plainAgent("synthesizer")
      const maxSteps = String(options.maxSteps)
      // In step order (kept sorted as steps finish): what later prompts read, the output a limit ends the run with.
      const results: Array<StepResult> = []
      const plans: Array<ReadonlyArray<Step>> = []
      let replans = 0
      let k = 0
      const metadata = () => ({ plan: plans.at(-1) ?? [], plans, steps: results, replans })
      yield* Architecture.setMetadata(metadata)

      /** Reads a planner's answer; a plan with duplicate ids or a cycle fails the run. */
      const readPlan = (text: string) =>
        Effect.gen(function*() {
          const plan = Plans.parse(text, options.maxSteps)
          if (Result.isFailure(plan)) return yield* new ArchitectureFailed({ architecture: "plan_and_execute", message: plan.failure })
          const levels = Plans.levels(plan.success)
          if (Result.isFailure(levels)) return yield* new ArchitectureFailed({ architecture: "plan_and_execute", message: levels.failure })
          return { plan: plan.success, levels: levels.success }
        })

      const first = yield* Architecture.role(
        planner,
        Architecture.fill(options.plannerPrompt, { task: input.prompt, max_steps: maxSteps }),
        // Before any step the planner is the run: what it wrote when it stopped is the best there is.
        { role: "planner", answers: true }
      )
      let current = yield* readPlan(first.output)
      plans.push(current.plan.steps)
      yield* Architecture.progress("plan_and_execute.created", {
        num_steps: current.plan.steps.length,
        steps: current.plan.steps,
        parsed: current.plan.parsed,
        levels: current.levels.map((level) => level.map((step) => step.id)),
        ...(current.plan.droppedDependencies.length > 0 ? { dropped_dependencies: current.plan.droppedDependencies } : {})
      })
      if (current.plan.steps.length === 0) {
        yield* Architecture.progress("plan_and_execute.completed", { num_steps: 0 })
        return { output: emptyPlanOutput, metadata: metadata() }
      }

      const runStep = (plan: Plan, planIndex: number, context: ReadonlyArray<StepResult>) => (step: Step, k: number) =>
        Effect.gen(function*() {
          yield* Architecture.progress("plan_and_execute.step_started", { k, id: step.id, description: step.description })
          // What an earlier plan got done, then what this step builds on in its own plan.
          const byId = new Map(context.filter((r) => r.plan === planIndex).map((r) => [r.id, r]))
          const previous = [
            ...context.filter((r) => r.plan < planIndex && !r.failed),
            ...Plans.ancestors(plan, step).flatMap((id) => byId.get(id) ?? [])
          ]
          // A step that stops at a limit is a failed step, not the run's end (`roleResult`, not `role`); one that
          // fails is the run's failure, and a spent budget ends the run.
          const ran = yield* Architecture.roleResult(
            executor,
            Architecture.fill(options.executorPrompt, {
              task: input.prompt,
              plan: Plans.render(plan.steps),
              step: step.description,
              step_id: step.id,
              previous: renderResults(previous)
            }),
            { role: "step", index: k }
          )
          if (ran._tag === "Failed") return yield* ran.error
          if (ran._tag === "Interrupted" && Architecture.isBudgetStop(ran.reason)) return yield* new Architecture.RoleStopped({ reason: ran.reason })
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
          yield* Architecture.progress("plan_and_execute.step_completed", { k, id: step.id, output, failed: result.failed })
          return result
        })

      // Runs the current plan as a DAG: a step starts as soon as the steps it depends on have finished (at most
      // `concurrency` at once); a failed step with replans left stops new steps from starting, and once the steps
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
        const permits = options.concurrency === "unbounded" ? undefined : yield* Semaphore.make(options.concurrency)
        const failed: Array<StepResult> = []
        let replanning = false
        const planIndex = replans
        yield* Effect.forEach(numbered, ([step, n]) =>
          Effect.gen(function*() {
            for (const dependency of deps.get(step.id) ?? []) yield* Deferred.await(finished.get(dependency)!)
            // A replan is coming: what has not started yet is left to the new plan.
            if (replanning) return
            const execute = runStep(plan, planIndex, results.slice())(step, n)
            const result = yield* (permits === undefined ? execute : permits.withPermits(1)(execute))
            // Finish order varies; plan order does not.
            results.push(result)
            results.sort((a, b) => a.k - b.k)
            yield* Architecture.setOutput(renderResults(results))
            if (result.failed) {
              failed.push(result)
              if (replans < options.maxReplans) replanning = true
            }
          }).pipe(Effect.ensuring(Deferred.succeed(finished.get(step.id)!, undefined))), { concurrency: "unbounded", discard: true })
        if (!replanning) break

        replans++
        const replanned = yield* Architecture.role(
          planner,
          Architecture.fill(options.replanPrompt, {
            task: input.prompt,
            plan: Plans.render(current.plan.steps),
            completed: renderResults(results.filter((r) => !r.failed)),
            failed: renderResults(failed),
            max_steps: maxSteps
          }),
          { role: "replanner", index: replans, label: `replanner:${replans}` }
        )
        current = yield* readPlan(replanned.output)
        plans.push(current.plan.steps)
        yield* Architecture.progress("plan_and_execute.replanned", {
          replan: replans,
          failed_steps: failed.map((r) => r.id),
          num_steps: current.plan.steps.length,
          steps: current.plan.steps
        })
      }

      const answer = yield* Architecture.role(
        synthesizer,
        Architecture.fill(options.synthesizerPrompt, {
          task: input.prompt,
          plan: Plans.render(plans.flat()),
          results: renderResults(results)
        }),
        { role: "synthesizer", answers: true }
      )
      yield* Architecture.progress("plan_and_execute.completed", {
        num_steps: results.length,
        failed_steps: results.filter((r) => r.failed).map((r) => r.id),
        replans
      })
      return { output: answer.output, metadata: metadata() }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.1.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of Plan-and-Execute.
 *
 * @since 0.1.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Plan-and-Execute with options, checked here: `maxSteps: 0`, a negative `maxReplans` or a template with an
 * unknown placeholder fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

/**
 * Plan-and-Execute with its defaults: up to 8 steps, no replanning, 4 steps at once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()
