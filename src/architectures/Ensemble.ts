/**
 * The solver / critic / judge Ensemble (DESIGN §5.1). Each round, solvers answer the problem (each with its own
 * prompt, `n` completions each); their answers are pooled by normalized final answer; then one critic and one
 * judge per distinct answer not yet reviewed; then a replaceable policy accepts an answer or the next round
 * begins. Answers carry over between rounds: a later round's solvers add support to earlier answers, and the
 * solvers of rounds after the first are shown the answers not accepted so far.
 *
 * Costs are known before they are spent: every role is one model call (a request with `n` completions is one
 * call), so a phase is started only when all of its calls fit in what is left of `maxCalls` — the cap is never
 * exceeded, in addition to any `Budget` of the run. Each phase has at most `maxConcurrency` calls in flight. An
 * answer that was never judged is never reported as accepted: when the calls run out first, the result is the
 * best-supported, lowest-risk answer, not accepted, interrupted `budget:max_calls`.
 *
 * Roles are sub-agents, so each has its own session, events and (optionally) model: solver sessions
 * `<parent>__solver_<name>_round_<r>`, critic `<parent>__critic_<k>_round_<r>` and judge
 * `<parent>__judge_<k>_round_<r>`, k the distinct answer's number (from 1, in order of first appearance).
 *
 * A critic's or judge's reply that cannot be read keeps a documented fallback (risk 0.6 or 0.5; score and
 * confidence 0 — a value outside [0, 1] is never clamped) and emits `ensemble.parse_error`
 * (`{round, index, what: "critique" | "judgement", error, text}`).
 *
 * Events: `ensemble.round_started`, `.candidate`, `.critique`, `.judgement`, `.parse_error`, `.decision`,
 * `.accepted`, `.budget_exhausted`. `RunResult.metadata` holds every candidate with its evidence, the decision trail,
 * `accepted`, `isCorrect` (the normalized answer against the normalized reference, null without one) and
 * `judgeIsCorrect` (the judge's own verdict on the chosen answer, null without a reference).
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Evidence from "./internal/ensemble/evidence.js"
import * as Internal from "./internal/ensemble/program.js"
import * as Opts from "../core/internal/options.js"
import { normalizeAnswer } from "../core/internal/parse.js"
import * as Reference from "../core/internal/reference.js"
import { RequestOptions } from "./internal/sampling.js"
import { FunctionSchema, withDefault } from "../core/internal/decode.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = Internal.name

/** A critic's verdict on one answer: `risk` in [0, 1] (the chance it is wrong) and notes. */
export type Critique = Evidence.Critique
/** A judge's verdict on one answer: `score`, `confidence`, `isCorrect` (null without a reference), notes. */
export type Judgement = Evidence.Judgement
/** One distinct answer with its support, critique and judgement, as a policy sees it. */
export type Candidate = Evidence.Candidate
/** What a policy decides from. */
export type PolicyEvidence = Evidence.Evidence
/** A policy's decision: accept `selected`, or go on with it as the best so far. */
export type Decision = Evidence.Decision
/** A replaceable decision rule: a function of the round's evidence. */
export type Policy = Evidence.Policy

/** The default policy: `0.75·confidence + 0.25·score − 0.5·risk`, accept on confidence and margin (DESIGN §5.1). */
export const defaultPolicy: Policy = Evidence.defaultPolicy
/** Reads a critic's reply (JSON in fences tolerated; not JSON or a risk outside [0, 1] → risk 0.6; no risk → 0.5). */
export const parseCritique: (text: string) => Critique = Evidence.parseCritique
/**
 * Reads a judge's reply (not JSON → score 0, confidence 0; a value missing or outside [0, 1] → 0 with `error`);
 * `isCorrect` is kept only when a reference was given.
 */
export const parseJudgement: (text: string, hasReference: boolean) => Judgement = Evidence.parseJudgement

/**
 * A solver role: a name (it names the role's sessions: letters and digits joined by single `-` or `_`), its
 * system prompt, and optionally an agent whose model it uses (its instructions are used when `prompt` is absent).
 */
export interface Solver<R = never> {
  readonly name: string
  readonly prompt?: string | undefined
  readonly agent?: Agent.Agent<R> | undefined
}

/** The default solvers: three ways into a problem. */
export const defaultSolvers: ReadonlyArray<Solver> = [
  {
    name: "algebra",
    prompt: "You solve problems by setting up equations and transforming them step by step, checking every step."
  },
  {
    name: "invariants",
    prompt:
      "You solve problems by looking for invariants, symmetries and conserved quantities, and by checking small cases and limits."
  },
  {
    name: "constructive",
    prompt: "You solve problems constructively: compute directly, build explicit examples, and verify the answer by substituting it back."
  }
]

/** The solvers' default prompt; placeholders `{problem}`, `{feedback}` (empty in round 1). */
export const defaultSolverPrompt = `Solve the problem below. Work it out, then end your reply with one line of the form
FINAL: <answer>

Problem:
{problem}{feedback}`

/** The critic's default prompt; placeholders `{problem}`, `{answer}`. */
export const defaultCriticPrompt = `A solver proposed an answer to the problem below. Look for reasons it could be wrong: misread \
conditions, arithmetic slips, missing cases, a wrong form or unit.

Problem:
{problem}

Proposed answer: {answer}

Reply with only a JSON object: {"risk": <from 0 to 1, the chance the answer is wrong>, "notes": "<your main concerns, briefly>"}`

/** The judge's default prompt; placeholders `{problem}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`. */
export const defaultJudgePrompt = `Judge a proposed answer to the problem below.

Problem:
{problem}

Proposed answer: {answer}
Solvers who gave it: {support}. A reviewer put the risk that it is wrong at {risk}: {critique}
{reference}
Reply with only a JSON object: {"score": <from 0 to 1, the quality of the answer>, "confidence": <from 0 to 1, how sure \
you are that it is correct>, "is_correct": <true or false against the reference answer; null without one>, "notes": "<one sentence>"}`

/** The options of the Ensemble; every one has a default. */
export interface Options<RS = never, RC = never, RJ = never> {
  /** The solver roles (default `defaultSolvers`: algebra, invariants, constructive). */
  readonly solvers?: ReadonlyArray<Solver<RS>> | undefined
  /** The critic; give it its own `model` to review with another model. Its instructions become the system message. */
  readonly critic?: Agent.Agent<RC> | undefined
  /** The judge; give it its own `model` to judge with another model. */
  readonly judge?: Agent.Agent<RJ> | undefined
  /** Rounds at most (≥ 1, default 2). */
  readonly maxRounds?: number | undefined
  /** Model calls at most, all roles and rounds (≥ 1, default 10); a phase that does not fit is not started. */
  readonly maxCalls?: number | undefined
  /** Calls in flight at most, in every phase (≥ 1, default 6). */
  readonly maxConcurrency?: number | undefined
  /** Completions per solver call (`Model.Request.n`, ≥ 1, default 1); one call whatever `n`. */
  readonly n?: number | undefined
  /** The best answer's judge confidence needed to accept it (in [0, 1], default 0.75). */
  readonly acceptConfidence?: number | undefined
  /** The lead over the runner-up needed to accept (default 0.15). */
  readonly acceptMargin?: number | undefined
  /** The decision rule (default `defaultPolicy`). */
  readonly policy?: Policy | undefined
  /** Pools answers and compares with the reference (default: the shared normalizer, `42.0` = `42`). */
  readonly normalize?: ((answer: string) => string) | undefined
  /** The reference answer: told to the judge, and `isCorrect` is computed. Else `Evaluate` may share one. */
  readonly reference?: string | undefined
  /** The solvers' prompt template (`{problem}`, `{feedback}`). */
  readonly solverPrompt?: string | undefined
  /** The critic's prompt template (`{problem}`, `{answer}`). */
  readonly criticPrompt?: string | undefined
  /** The judge's prompt template (`{problem}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`). */
  readonly judgePrompt?: string | undefined
  /** Sampling options of every call (temperature, maxTokens, seed, extra…). */
  readonly request?: RequestOptions | undefined
}

const RoleName = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/, {
    expected: "letters and digits joined by single - or _ (a solver's name names its sessions)"
  })
)

const SolverSchema = Schema.Struct({
  name: RoleName,
  prompt: Schema.optional(Schema.String),
  agent: Schema.optional(Opts.AgentSchema)
}).check(
  Schema.makeFilter((solver) => solver.prompt !== undefined || solver.agent !== undefined || "needs a prompt or an agent")
)

/** The first name used twice, if any. */
const duplicateName = (solvers: ReadonlyArray<{ readonly name: string }>): string | undefined => {
  const seen = new Set<string>()
  for (const solver of solvers) {
    if (seen.has(solver.name)) return solver.name
    seen.add(solver.name)
  }
  return undefined
}

const OptionsSchema = Schema.Struct({
  solvers: Schema.Array(SolverSchema).check(
    Schema.isMinLength(1, { expected: "a non-empty array of solvers" }),
    Schema.makeFilter((solvers) => {
      const name = duplicateName(solvers)
      return name === undefined || `must have distinct names (${JSON.stringify(name)} is used twice)`
    })
  ).pipe(withDefault(defaultSolvers)),
  critic: Schema.optional(Opts.AgentSchema),
  judge: Schema.optional(Opts.AgentSchema),
  maxRounds: Opts.IntAtLeast(1).pipe(withDefault(2)),
  maxCalls: Opts.IntAtLeast(1).pipe(withDefault(10)),
  maxConcurrency: Opts.IntAtLeast(1).pipe(withDefault(6)),
  n: Opts.IntAtLeast(1).pipe(withDefault(1)),
  acceptConfidence: Opts.UnitInterval.pipe(withDefault(0.75)),
  acceptMargin: Schema.Finite.pipe(withDefault(0.15)),
  policy: FunctionSchema<Policy>("Policy").pipe(withDefault(defaultPolicy)),
  normalize: FunctionSchema<(answer: string) => string>("normalize").pipe(withDefault(normalizeAnswer)),
  reference: Schema.optional(Schema.String),
  solverPrompt: Template.Template(["problem", "feedback"]).pipe(withDefault(defaultSolverPrompt)),
  criticPrompt: Template.Template(["problem", "answer"]).pipe(withDefault(defaultCriticPrompt)),
  judgePrompt: Template.Template(["problem", "answer", "support", "risk", "critique", "reference"]).pipe(
    withDefault(defaultJudgePrompt)
  ),
  request: Schema.optional(RequestOptions)
})

/**
 * The Ensemble with options, checked here: `maxCalls: 0`, duplicate or unsafe solver names, a confidence outside
 * [0, 1], a template with an unknown placeholder or an unknown option fail with `InvalidOptions`.
 */
export const make = <RS = never, RC = never, RJ = never>(
  options: Options<RS, RC, RJ> = {}
): Effect.Effect<Architecture.Architecture<RS | RC | RJ | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("Ensemble", OptionsSchema, options),
    (config) => Architecture.make({ name, program: Internal.program(config) }) as Architecture.Architecture<RS | RC | RJ | Model.Model>
  )

/** `make` for a module-level value: the Ensemble, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RS = never, RC = never, RJ = never>(
  options: Options<RS, RC, RJ> = {}
): Architecture.Architecture<RS | RC | RJ | Model.Model> => Opts.runUnsafe(make(options))

/** The Ensemble with its defaults: three solvers, two rounds, at most 10 calls, 6 in flight. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  // Decoded and built once: the default program holds no per-run state.
  program: Internal.program(Schema.decodeUnknownSync(OptionsSchema)({}))
}) as Architecture.Architecture<Model.Model>

/** Runs `effect` with `reference` as the reference answer an Ensemble without its own `reference` tells its judge. */
export const withReference: (
  reference: string | undefined
) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = Reference.withReference
