/**
 * An architecture is how an agent thinks: ReAct's tool loop, Self-Refine's critique rounds, an ensemble's votes.
 * This module is the contract — `{ name, run(input) => Stream<AgentEvent> }`, emitting events as they happen and
 * ending with exactly one `RunCompleted` — and the toolkit for writing one.
 *
 * An architecture is one declaration, `define`: its name, one line about it, its options (a `Schema` with
 * defaults), where those hold agents, and its program. The program calls the model with `generate` (budget,
 * counting, events), runs sub-agents in roles with `role`, reports milestones with `progress`, and returns an
 * `Outcome`. The runtime owns the rules every architecture shares, so none repeats them: a role that stops at a
 * limit, a spent budget or a cancel ends the run with its best output so far (`setOutput`, `setMetadata`), long
 * replies are read after a turn of the event loop, structured output is decoded and repaired.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Architecture, Model, ScriptedModel } from "valet"
 *
 * // Answer, then have a checker say whether the answer holds; `checker` may be any agent.
 * const Checked = Architecture.define({
 *   name: "checked",
 *   title: "Checked",
 *   description: "An answer, then one check of it",
 *   options: {
 *     checker: Architecture.option.agent.pipe(Architecture.option.optional),
 *     checkerPrompt: Architecture.option.template(["task", "output"]).pipe(
 *       Architecture.option.withDefault("Does this answer {task} correctly? {output}")
 *     )
 *   },
 *   agentOptions: ["checker"],
 *   program: (input, options) =>
 *     Effect.gen(function*() {
 *       const answer = Model.text(yield* Architecture.generate({ messages: Architecture.conversation(input) }, { step: "checked.answer" }))
 *       yield* Architecture.setOutput(answer)
 *       const checker = options.checker ?? Architecture.plainAgent("checker")
 *       const check = yield* Architecture.role(checker, Architecture.fill(options.checkerPrompt, { task: input.prompt, output: answer }), { role: "checker" })
 *       yield* Architecture.progress("checked.checked", { verdict: check.output })
 *       return { output: answer, metadata: { verdict: check.output } }
 *     })
 * })
 *
 * const agent = Agent.make({ name: "a", instructions: "", architecture: Checked.makeUnsafe() })
 * const result = Agent.run(agent, "2 + 2?").pipe(Effect.provide(ScriptedModel.layer(["4", "Yes."])))
 * ```
 *
 * @since 0.1.0
 */
import type * as AgentType from "./Agent.js"
import type { InvalidOptions } from "./AgentError.js"
import type * as Model from "./Model.js"
import * as Added from "./internal/addedTools.js"
import * as Define from "./internal/define.js"
import * as Options from "./internal/options.js"
import * as Parse from "./internal/parse.js"
import * as Reference from "./internal/reference.js"
import * as Roles from "./internal/roles.js"
import * as Runtime from "./internal/runtime.js"
import * as Template from "./internal/template.js"

// ---------------------------------------------------------------------------------------------------------
// The contract
// ---------------------------------------------------------------------------------------------------------

/**
 * An architecture that needs the services `R` (typically `Model`): `run` streams a run's events, `execute` runs it
 * with events sent to an `Emitter` and answers its `RunResult`.
 *
 * @since 0.1.0
 * @category contract
 */
export type Architecture<R = never> = Runtime.Architecture<R>

/**
 * What a run is started with (built by `Agent.run`, `Agent.stream` and `role`).
 *
 * @since 0.1.0
 * @category contract
 */
export type Input = Runtime.Input

/**
 * What a program returns; the runtime adds counts and timing to make the `RunResult`.
 *
 * @since 0.1.0
 * @category contract
 */
export type Outcome = Runtime.Outcome

/**
 * What a run runs: an agent's definition (`Agent.Agent` is one).
 *
 * @since 0.1.0
 * @category contract
 */
export type AgentDefinition = Runtime.AgentDefinition

/**
 * The run in progress, as a program sees it (read-only).
 *
 * @since 0.1.0
 * @category contract
 */
export type RunContext = Runtime.RunContext

/**
 * Where a run's events go.
 *
 * @since 0.1.0
 * @category contract
 */
export type Emitter = Runtime.Emitter

/**
 * What the runs of one root run share (built model layers and their scope).
 *
 * @since 0.1.0
 * @category contract
 */
export type Resources = Runtime.Resources

/**
 * The run the current fiber works for, provided by the runtime.
 *
 * @since 0.1.0
 * @category contract
 */
export const CurrentRun = Runtime.CurrentRun

/**
 * The service type of `CurrentRun`.
 *
 * @since 0.1.0
 * @category contract
 */
export type CurrentRun = Runtime.CurrentRun

/**
 * A role stopped at a limit: the runtime ends the run with it (see `role`).
 *
 * @since 0.2.0
 * @category contract
 */
export const RoleStopped = Runtime.RoleStopped

/**
 * The error type of `RoleStopped`.
 *
 * @since 0.2.0
 * @category contract
 */
export type RoleStopped = Runtime.RoleStopped

/**
 * Whether a value is an `Architecture`.
 *
 * @since 0.1.0
 * @category contract
 */
export const isArchitecture: (u: unknown) => u is Architecture<unknown> = Runtime.isArchitecture

/**
 * Turns a program into an architecture that streams its events and ends with one `RunCompleted` (no options:
 * `define` is the declaration with options).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <R>(options: MakeOptions<R>) => Architecture<Exclude<R, CurrentRun>> = Runtime.make

/**
 * What `make` takes: the architecture's name and its program.
 *
 * @since 0.1.0
 * @category constructors
 */
export type MakeOptions<R> = Runtime.MakeOptions<R>

/**
 * Options of `generate`: the `step` that names the call in its session.
 *
 * @since 0.1.0
 * @category toolkit
 */
export type GenerateOptions = Runtime.GenerateOptions

/**
 * Declares an architecture: its one `name` (used by events, `valet.yaml`, the CLI and `Agents`), a `title` for
 * messages, a one-line `description`, its `options` (schemas with defaults, `option.*`), the `agentOptions` that
 * hold agents, `deprecated` option names still read, a `check` across options, and its `program`. Answers `make` /
 * `makeUnsafe` (options checked: `InvalidOptions` names the field, the rule and the value) and what the registries
 * read.
 *
 * @since 0.2.0
 * @category constructors
 */
export const define = Define.define

/**
 * What every declaration has, whatever its options: what registries (`Catalog`, `valet.yaml`, the CLI) read.
 *
 * @since 0.2.0
 * @category constructors
 */
export type AnyDefinition = Define.AnyDefinition

/**
 * An architecture declared with `define`.
 *
 * @since 0.2.0
 * @category constructors
 */
export type Definition<Fields extends Define.Fields, D, R> = Define.Definition<Fields, D, R>

/**
 * The options `make` of a definition takes.
 *
 * @since 0.2.0
 * @category constructors
 */
export type OptionsOf<T> = T extends Define.Definition<infer Fields, infer D, infer _R> ? Define.OptionsInput<Fields, D> : never

/**
 * The services an options value needs (its agents' and architectures').
 *
 * @since 0.2.0
 * @category constructors
 */
export type RequirementsOf<O> = Define.RequirementsOf<O>

/**
 * The options error of `make`.
 *
 * @since 0.2.0
 * @category constructors
 */
export type MakeError = InvalidOptions

// ---------------------------------------------------------------------------------------------------------
// The toolkit: calls for the current run
// ---------------------------------------------------------------------------------------------------------

/**
 * Calls the model for the current run: reserves budget first (`BudgetExhausted` ends the run as interrupted), counts
 * the call here and in every parent, streams its text as `TextDelta` when observed, emits `ModelCalled` /
 * `ModelReplied`. `step` names the call (`self_refine.critique_2`): journals and replays key on it.
 *
 * @since 0.1.0
 * @category toolkit
 */
export const generate = Runtime.generate

/**
 * Runs one tool call for the current run, with `ToolCalled` / `ToolReturned` events.
 *
 * @since 0.1.0
 * @category toolkit
 */
export const executeTool = Runtime.executeTool

/**
 * Asks a person a question and waits for the answer, decoded by `schema` (LangGraph's `interrupt`): emits
 * `QuestionAsked` (with the answer's JSON schema, for a form), waits on the `HumanLoop` in context
 * (`HumanLoop.answer(questionId, value)`; an answer the schema refuses is refused to whoever gave it, and the
 * question still waits), emits `QuestionAnswered`. No `HumanLoop`, or no answer within `timeout`: `Unanswered`.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Architecture } from "valet"
 *
 * const confirmPlan = Effect.gen(function*() {
 *   const choice = yield* Architecture.ask("Which plan?", Schema.Literals(["fast", "careful"]), { timeout: "1 hour" })
 *   return choice // "fast" | "careful"
 * })
 * ```
 *
 * @since 0.2.0
 * @category toolkit
 */
export const ask = Runtime.ask

/**
 * The tools an architecture adds to the agent's inside its program, prepared for the current run as the runner
 * prepares the agent's own: in a durable run each call becomes an activity of the workflow (a resumed run answers a
 * finished call from storage instead of running it again); elsewhere they are answered as they are. Pass the tools
 * whose calls touch the world (DeepAgent's file tools and `execute`); not one whose effect is the run's own memory
 * (DeepAgent's plan: a resumed run must call it again to rebuild it), nor one that runs a sub-agent (its calls are
 * activities themselves, under the sub-run's session).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const addTools = Added.prepare

/**
 * Where a runner says how the tools an architecture adds are prepared (`addTools`): a function in context, by default
 * the tools as they are. `Durable` provides one that makes each call an activity.
 *
 * @since 0.2.0
 * @category toolkit
 */
export const AddedTools = Added.AddedTools

/**
 * What a runner provides as `AddedTools`.
 *
 * @since 0.2.0
 * @category toolkit
 */
export type PrepareTools = Added.Prepare

/**
 * Emits a milestone, `progress("self_refine.critique", { round })`.
 *
 * @since 0.1.0
 * @category toolkit
 */
export const progress = Runtime.progress

/**
 * Records the best output so far: what the run answers if a limit ends it.
 *
 * @since 0.1.0
 * @category toolkit
 */
export const setOutput = Runtime.setOutput

/**
 * Records how to describe the run if a limit ends it (its `metadata` then).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const setMetadata = Runtime.setMetadata

/**
 * The conversation a run's first model call continues: its history, then the prompt (left out when it is empty after
 * a history, as when a conversation ends with a tool's result).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const conversation = Runtime.conversation

/**
 * Runs a sub-agent in a role (`critic`, round 2 → session `<parent>__critic_2`) and answers its result. A role
 * that stops at a limit ends this run (interrupted `critic:round_2:<why>`, or `budget:<limit>`; `label` changes
 * the prefix); one that fails fails it with `SubAgentFailed`.
 *
 * @since 0.2.0
 * @category toolkit
 */
export const role = Roles.role

/**
 * Options of `role`.
 *
 * @since 0.2.0
 * @category toolkit
 */
export type RoleOptions = Roles.RoleOptions

/**
 * Runs a sub-agent and says how it ended (`Completed`, `Interrupted`, `Failed`) without ending the run: for an
 * architecture that documents a recovery (the Ensemble drops a failed solver).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const roleResult = Roles.run

/**
 * Whether an interruption reason is a spent budget (`budget:<limit>`): a `roleResult` that stopped so leaves nothing
 * to spend, and most programs then end the run (`RoleStopped` with that reason).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const isBudgetStop: (reason: string) => boolean = Roles.isBudget

/**
 * How a role's run ended (`roleResult`).
 *
 * @since 0.2.0
 * @category toolkit
 */
export type RoleResult = Roles.Ran

/**
 * The reference answer of the problem in flight, when an evaluation shares it (`Evaluate`'s `shareReference`): an
 * architecture that can use one reads it (the Ensemble's judge is told it).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const currentReference = Reference.currentReference

/**
 * Runs an effect with `reference` as the current reference.
 *
 * @since 0.2.0
 * @category toolkit
 */
export const withReference = Reference.withReference

/**
 * A plain agent for a role whose prompt says everything, on the run's model.
 *
 * @since 0.2.0
 * @category toolkit
 */
export const plainAgent: (name: string) => AgentType.Agent<Model.Model> = Roles.plain as (name: string) => AgentType.Agent<Model.Model>

/**
 * The running agent with another architecture (a base run, an attempt).
 *
 * @since 0.2.0
 * @category toolkit
 */
export const withArchitecture = Roles.withArchitecture

// ---------------------------------------------------------------------------------------------------------
// The toolkit: options, templates, parsing
// ---------------------------------------------------------------------------------------------------------

/**
 * Option schemas, for `define`'s `options`: an `agent`, named `agents`, an `architecture`, an `int(min)`, a `unit`
 * number in [0, 1], a `duration`, a `concurrency`, a prompt `template(placeholders)`, a `function`, and
 * `withDefault(value)` / `optional`.
 *
 * @since 0.2.0
 * @category options
 */
export const option = Options.option

/**
 * Fills a template's `{name}` placeholders in one pass (a model's `{critique}` is never filled again).
 *
 * @since 0.2.0
 * @category templates
 */
export const fill = Template.fill

/**
 * `- item` lines (`- (none)` when empty), for templates.
 *
 * @since 0.2.0
 * @category templates
 */
export const bulleted = Template.bulleted

/**
 * Parsing of model text, tolerant where models are loose and bounded where text may be huge: `json` (fences and
 * prose around it, decoded with a schema), `score` (`score: 0.8`, `85%`, `7/10`), `finalAnswer` (`FINAL:` lines),
 * `listItems`, `tag` (`<action>…</action>`), `normalizeAnswer`, `preview`.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parse = Parse.toolkit
