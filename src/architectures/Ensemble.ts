/**
 * The solver / critic / judge Ensemble (DESIGN §5.1). Each round, solvers answer the task (each with its own
 * prompt, `n` completions each); their answers are pooled by normalized final answer; then one critic and one
 * judge per distinct answer not yet reviewed; then a replaceable policy accepts an answer or the next round
 * begins. Answers carry over between rounds: a later round's solvers add support to earlier answers, and the
 * solvers of rounds after the first are shown the answers not accepted so far.
 *
 * The Ensemble is an architecture, not a rollout: it is a program over one task that streams its events and ends
 * with one `RunCompleted`, so any agent can think this way (`Agent.make({ architecture: Ensemble.architecture })`),
 * be served, replayed or nested like any other. The rollouts (`Evaluate`, `ActorLoop`, `Durable`) are the loops that
 * run architectures over datasets and task streams; an evaluation may share each problem's reference with the
 * Ensemble's judge (`Architecture.withReference`).
 *
 * Costs are known before they are spent: every role is one model call (a request with `n` completions is one
 * call), so a phase is started only when all of its calls fit in what is left of `maxCalls` — the cap is never
 * exceeded, in addition to any `Budget` of the run. Each phase has at most `concurrency` calls in flight. An
 * answer that was never judged is never reported as accepted: when the calls run out first, the result is the
 * best-supported, lowest-risk answer, not accepted, interrupted `budget:max_calls`.
 *
 * Roles are sub-agents, so each has its own session, events and (optionally) model: solver sessions
 * `<parent>__solver_<name>_round_<r>`, critic `<parent>__critic_<k>_round_<r>` and judge
 * `<parent>__judge_<k>_round_<r>`, k the distinct answer's number (from 1, in order of first appearance). The
 * Ensemble documents a recovery: a role that fails or stops at its own limit is recorded in `metadata.failures`
 * and the others go on; a spent budget ends the run (interrupted with the budget's reason, the best answer so far,
 * not accepted); the run fails with the last `SubAgentFailed` only when every solver of a round failed and no
 * answer exists.
 *
 * A critic's or judge's reply that cannot be read keeps a documented fallback (risk 0.6 or 0.5; score and
 * confidence 0 — a value outside [0, 1] is never clamped) and emits `ensemble.parse_error`
 * (`{round, index, what: "critique" | "judgement", error, text}`).
 *
 * Events: `ensemble.round_started`, `.candidate`, `.critique`, `.judgement`, `.parse_error`, `.decision`,
 * `.accepted`, `.budget_exhausted`. Model steps: `ensemble.solve`, `ensemble.critique`, `ensemble.judge` (in the
 * roles' sessions). `RunResult.metadata` holds every candidate with its evidence, the decision trail, `accepted`,
 * `isCorrect` (the normalized answer against the normalized reference, null without one) and `judgeIsCorrect`
 * (the judge's own verdict on the chosen answer, null without a reference).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Ensemble, ScriptedModel } from "valet"
 *
 * // Two solvers, at most 8 calls; the replies stand in for a model: both solvers agree, the critic sees little
 * // risk and the judge is confident, so the answer is accepted in round 1 after 2 + 1 + 1 calls.
 * const team = Agent.make({
 *   name: "team",
 *   instructions: "",
 *   architecture: Ensemble.makeUnsafe({
 *     solvers: [{ name: "direct", prompt: "Compute directly." }, { name: "check", prompt: "Compute, then check by substitution." }],
 *     maxCalls: 8
 *   })
 * })
 * const model = ScriptedModel.layer([
 *   "6 * 7 = 42\nFINAL: 42",
 *   "42 / 7 = 6, so\nFINAL: 42",
 *   `{"risk": 0.05, "notes": "checks out"}`,
 *   `{"score": 0.9, "confidence": 0.95, "is_correct": null, "notes": "right"}`
 * ])
 * const result = await Effect.runPromise(Agent.run(team, "What is 6 * 7?").pipe(Effect.provide(model)))
 * console.log(result.output, result.metadata.accepted) // "42 true"
 * ```
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"
import * as Evidence from "./internal/ensemble/evidence.js"
import * as Opts from "./internal/ensemble/options.js"
import * as Rounds from "./internal/ensemble/program.js"

/** A critic's verdict on one answer: `risk` in [0, 1] (the chance it is wrong) and notes. @since 0.1.0 @category evidence */
export type Critique = Evidence.Critique
/** A judge's verdict on one answer: `score`, `confidence`, `isCorrect` (null without a reference), notes. @since 0.1.0 @category evidence */
export type Judgement = Evidence.Judgement
/** One distinct answer with its support, critique and judgement, as a policy sees it. @since 0.1.0 @category evidence */
export type Candidate = Evidence.Candidate
/** What a policy decides from. @since 0.1.0 @category evidence */
export type PolicyEvidence = Evidence.Evidence
/** A policy's decision: accept `selected`, or go on with it as the best so far. @since 0.1.0 @category evidence */
export type Decision = Evidence.Decision
/** A replaceable decision rule: a function of the round's evidence. @since 0.1.0 @category evidence */
export type Policy = Evidence.Policy

/**
 * The default policy: `0.75·confidence + 0.25·score − 0.5·risk`, accept on confidence and margin (DESIGN §5.1).
 *
 * @since 0.1.0
 * @category evidence
 */
export const defaultPolicy: Policy = Evidence.defaultPolicy

/**
 * Reads a critic's reply (JSON in fences tolerated; not JSON or a risk outside [0, 1] → risk 0.6; no risk → 0.5).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseCritique: (text: string) => Critique = Evidence.parseCritique

/**
 * Reads a judge's reply (not JSON → score 0, confidence 0; a value missing or outside [0, 1] → 0 with `error`);
 * `isCorrect` is kept only when a reference was given.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseJudgement: (text: string, hasReference: boolean) => Judgement = Evidence.parseJudgement

/**
 * A solver role, as `solvers` takes it: a name (it names the role's sessions: letters and digits joined by single
 * `-` or `_`), its approach (sent after the problem, in the user message, so every solver's request starts with the
 * same text and a server's prefix cache serves it), and optionally an agent whose model it uses (its instructions are used when
 * `prompt` is absent). `R` is what that agent needs.
 *
 * @since 0.1.0
 * @category options
 */
export type Solver<R = never> =
  & Omit<typeof Opts.Solver.Encoded, "agent">
  & { readonly agent?: Agent.Agent<R> | undefined }

/** The default solvers: algebra, invariants and constructive, three ways into a problem. @since 0.1.0 @category options */
export const defaultSolvers: ReadonlyArray<Solver> = Opts.defaultSolvers

/** The solvers' default prompt; placeholders `{task}`, `{feedback}` (empty in round 1). @since 0.1.0 @category options */
export const defaultSolverPrompt: string = Opts.defaultSolverPrompt

/** The critic's default prompt; placeholders `{task}`, `{answer}`. @since 0.1.0 @category options */
export const defaultCriticPrompt: string = Opts.defaultCriticPrompt

/**
 * The judge's default prompt; placeholders `{task}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`.
 *
 * @since 0.1.0
 * @category options
 */
export const defaultJudgePrompt: string = Opts.defaultJudgePrompt

/**
 * The Ensemble, declared once: its name, options (`internal/ensemble/options.ts`, with their defaults and docs) and
 * program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "ensemble",
  title: "Ensemble",
  description: "solvers, a critic and a judge, voting on the final answer",
  options: Opts.fields,
  agentOptions: ["critic", "judge", "solvers.*.agent"],
  deprecated: Opts.deprecated,
  program: Rounds.program
})

/** The architecture's name, as `RunStarted.architecture` reports it. @since 0.1.0 @category definition */
export const name = definition.name

/** The options of the Ensemble; every one has a default. @since 0.1.0 @category definition */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * The Ensemble with options, checked here: `maxCalls: 0`, duplicate or unusable solver names, a confidence outside
 * [0, 1], a template with an unknown placeholder or an unknown option fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/** `make` for a module-level value: the Ensemble, or the `InvalidOptions` thrown. @since 0.1.0 @category constructors */
export const makeUnsafe = definition.makeUnsafe

/**
 * The Ensemble with its defaults: three solvers, two rounds, at most 10 calls, 6 in flight.
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()

/**
 * Runs `effect` with `reference` as the reference answer an Ensemble without its own `reference` tells its judge.
 *
 * @deprecated Use `Architecture.withReference` (any architecture may read the shared reference).
 * @since 0.1.0
 * @category evaluation
 */
export const withReference: (
  reference: string | undefined
) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = Architecture.withReference
