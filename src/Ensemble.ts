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
 * Events: `ensemble.round_started`, `.candidate`, `.critique`, `.judgement`, `.decision`, `.accepted`,
 * `.budget_exhausted`. `RunResult.metadata` holds every candidate with its evidence, the decision trail,
 * `accepted`, `isCorrect` (the normalized answer against the normalized reference, null without one) and
 * `judgeIsCorrect` (the judge's own verdict on the chosen answer, null without a reference).
 *
 * @since 0.1.0
 */
import { Effect, FiberRef, Schema } from "effect"
import * as Agent from "./Agent.js"
import { ArchitectureFailed, type InvalidOptions, type SubAgentFailed } from "./AgentError.js"
import * as Architecture from "./Architecture.js"
import * as Evidence from "./internal/ensemble/evidence.js"
import { completionsOf, oneCall } from "./internal/ensemble/role.js"
import * as Opts from "./internal/options.js"
import { finalAnswer, lastNonEmptyLine, normalizeAnswer } from "./internal/parse.js"
import * as Reference from "./internal/reference.js"
import * as Roles from "./internal/roles.js"
import { RequestOptions } from "./internal/sampling.js"
import * as Template from "./internal/template.js"
import type * as Model from "./Model.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "ensemble"

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
/** Reads a critic's reply (JSON in fences tolerated; not JSON → risk 0.6; no risk → 0.5). */
export const parseCritique: (text: string) => Critique = Evidence.parseCritique
/** Reads a judge's reply (not JSON → score 0, confidence 0); `isCorrect` is kept only when a reference was given. */
export const parseJudgement: (text: string, hasReference: boolean) => Judgement = Evidence.parseJudgement

/**
 * A solver role: a name (it names the role's sessions: letters and digits joined by single `-` or `_`), its
 * system prompt, and optionally an agent whose model it uses (its instructions are used when `prompt` is absent).
 */
export interface Solver<R = never> {
  readonly name: string
  readonly prompt?: string
  readonly agent?: Agent.Agent<R>
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
  readonly solvers?: ReadonlyArray<Solver<RS>>
  /** The critic; give it its own `model` to review with another model. Its instructions become the system message. */
  readonly critic?: Agent.Agent<RC>
  /** The judge; give it its own `model` to judge with another model. */
  readonly judge?: Agent.Agent<RJ>
  /** Rounds at most (≥ 1, default 2). */
  readonly maxRounds?: number
  /** Model calls at most, all roles and rounds (≥ 1, default 10); a phase that does not fit is not started. */
  readonly maxCalls?: number
  /** Calls in flight at most, in every phase (≥ 1, default 6). */
  readonly maxConcurrency?: number
  /** Completions per solver call (`Model.Request.n`, ≥ 1, default 1); one call whatever `n`. */
  readonly n?: number
  /** The best answer's judge confidence needed to accept it (in [0, 1], default 0.75). */
  readonly acceptConfidence?: number
  /** The lead over the runner-up needed to accept (default 0.15). */
  readonly acceptMargin?: number
  /** The decision rule (default `defaultPolicy`). */
  readonly policy?: Policy
  /** Pools answers and compares with the reference (default: the shared normalizer, `42.0` = `42`). */
  readonly normalize?: (answer: string) => string
  /** The reference answer: told to the judge, and `isCorrect` is computed. Else `Evaluate` may share one. */
  readonly reference?: string
  /** The solvers' prompt template (`{problem}`, `{feedback}`). */
  readonly solverPrompt?: string
  /** The critic's prompt template (`{problem}`, `{answer}`). */
  readonly criticPrompt?: string
  /** The judge's prompt template (`{problem}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`). */
  readonly judgePrompt?: string
  /** Sampling options of every call (temperature, maxTokens, seed, extra…). */
  readonly request?: RequestOptions
}

const RoleName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/, {
    message: () => "a solver name is letters and digits joined by single - or _ (it names the solver's sessions)"
  })
)

const SolverSchema = Schema.Struct({
  name: RoleName,
  prompt: Schema.optional(Schema.String),
  agent: Schema.optional(Opts.AgentSchema)
}).pipe(Schema.filter((solver) => solver.prompt !== undefined || solver.agent !== undefined || "a solver needs a prompt or an agent"))

const FunctionSchema = <F>(what: string) =>
  Schema.declare((u: unknown): u is F => typeof u === "function", { identifier: what, description: `a function (${what})` })

const OptionsSchema = Schema.Struct({
  solvers: Schema.optionalWith(
    Schema.NonEmptyArray(SolverSchema).pipe(
      Schema.filter((solvers) =>
        new Set(solvers.map((solver) => solver.name)).size === solvers.length || "solver names must be distinct"
      )
    ),
    { default: () => defaultSolvers as unknown as readonly [typeof SolverSchema.Type, ...Array<typeof SolverSchema.Type>] }
  ),
  critic: Schema.optional(Opts.AgentSchema),
  judge: Schema.optional(Opts.AgentSchema),
  maxRounds: Schema.optionalWith(Opts.IntAtLeast(1), { default: () => 2 }),
  maxCalls: Schema.optionalWith(Opts.IntAtLeast(1), { default: () => 10 }),
  maxConcurrency: Schema.optionalWith(Opts.IntAtLeast(1), { default: () => 6 }),
  n: Schema.optionalWith(Opts.IntAtLeast(1), { default: () => 1 }),
  acceptConfidence: Schema.optionalWith(Opts.UnitInterval, { default: () => 0.75 }),
  acceptMargin: Schema.optionalWith(Schema.Number.pipe(Schema.finite()), { default: () => 0.15 }),
  policy: Schema.optionalWith(FunctionSchema<Policy>("Policy"), { default: () => defaultPolicy }),
  normalize: Schema.optionalWith(FunctionSchema<(answer: string) => string>("normalize"), { default: () => normalizeAnswer }),
  reference: Schema.optional(Schema.String),
  solverPrompt: Schema.optionalWith(Template.Template(["problem", "feedback"]), { default: () => defaultSolverPrompt }),
  criticPrompt: Schema.optionalWith(Template.Template(["problem", "answer"]), { default: () => defaultCriticPrompt }),
  judgePrompt: Schema.optionalWith(
    Template.Template(["problem", "answer", "support", "risk", "critique", "reference"]),
    { default: () => defaultJudgePrompt }
  ),
  request: Schema.optional(RequestOptions)
})
type Config = typeof OptionsSchema.Type

/**
 * The Ensemble with options, checked here: `maxCalls: 0`, duplicate or unsafe solver names, a confidence outside
 * [0, 1], a template with an unknown placeholder or an unknown option fail with `InvalidOptions`.
 */
export const make = <RS = never, RC = never, RJ = never>(
  options: Options<RS, RC, RJ> = {}
): Effect.Effect<Architecture.Architecture<RS | RC | RJ | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("Ensemble", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RS | RC | RJ | Model.Model>
  )

/** The Ensemble with its defaults: three solvers, two rounds, at most 10 calls, 6 in flight. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  program: (input) => program(Schema.decodeSync(OptionsSchema)({}))(input)
}) as Architecture.Architecture<Model.Model>

/** Runs `effect` with `reference` as the reference answer an Ensemble without its own `reference` tells its judge. */
export const withReference: (
  reference: string | undefined
) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = Reference.withReference

// ---------------------------------------------------------------------------------------------------------
// The program
// ---------------------------------------------------------------------------------------------------------

interface Supporter {
  readonly round: number
  readonly solver: string
  readonly choice: number
}

interface State {
  readonly index: number
  readonly answer: string
  readonly key: string
  support: number
  readonly firstRound: number
  readonly supporters: Array<Supporter>
  critique: (Critique & { readonly round: number; readonly sessionId: string }) | undefined
  judgement: (Judgement & { readonly round: number; readonly sessionId: string }) | undefined
}

interface Failure {
  readonly round: number
  readonly role: string
  readonly sessionId: string
  readonly reason: string
  readonly error?: string
}

interface TrailEntry {
  readonly round: number
  readonly accepted: boolean
  readonly selected: number | null
  readonly answer: string | null
  readonly margin: number | null
  readonly scores: Readonly<Record<string, number>>
  readonly reason: string
}

interface BudgetStop {
  readonly round: number
  readonly phase: "solvers" | "critics" | "judges"
  readonly needed: number
  readonly used: number
  readonly maxCalls: number
}

const cut = (text: string, max = 240): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

const program = (config: Config) => {
  const solverArchitecture = oneCall({ step: "ensemble.solve", n: config.n, request: config.request })
  const solvers = config.solvers.map((solver) => ({
    name: solver.name,
    agent: Agent.with_(solver.agent ?? Roles.plain(solver.name), {
      name: solver.agent?.name ?? solver.name,
      instructions: solver.prompt ?? solver.agent!.instructions,
      architecture: solverArchitecture
    })
  }))
  const critic = Agent.with_(config.critic ?? Roles.plain("critic"), {
    architecture: oneCall({ step: "ensemble.critique", n: 1, request: config.request })
  })
  const judge = Agent.with_(config.judge ?? Roles.plain("judge"), {
    architecture: oneCall({ step: "ensemble.judge", n: 1, request: config.request })
  })
  const normalize = config.normalize
  const each = { concurrency: config.maxConcurrency }

  return (input: Architecture.Input) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const reference = config.reference ?? (yield* FiberRef.get(Reference.currentReference))
      const hasReference = reference !== undefined
      const callsBefore = run.modelCalls
      const used = () => run.modelCalls - callsBefore

      const candidates: Array<State> = []
      const byKey = new Map<string, State>()
      const trail: Array<TrailEntry> = []
      const failures: Array<Failure> = []
      let budgetStop: BudgetStop | undefined
      let externalStop: string | undefined
      let lastFailure: SubAgentFailed | undefined
      let decision: Decision | undefined
      // Whether the evidence changed since the last decision (a stop right after one needs no new decision).
      let changed = false
      let rounds = 0

      /** Whether a phase of `needed` calls fits in what is left of `maxCalls`; if not, records why it stopped. */
      const fits = (round: number, phase: BudgetStop["phase"], needed: number) =>
        Effect.suspend(() => {
          if (used() + needed <= config.maxCalls) return Effect.succeed(true)
          budgetStop = { round, phase, needed, used: used(), maxCalls: config.maxCalls }
          return Effect.as(Architecture.progress("ensemble.budget_exhausted", { ...budgetStop }), false)
        })

      /** The result of a role's run, or undefined after recording why there is none. */
      const settle = (round: number, role: string, sessionId: string, ran: Roles.Ran) => {
        if (ran._tag === "Completed") return ran.result
        if (ran._tag === "Interrupted" && Roles.isBudget(ran.reason)) externalStop ??= ran.reason
        else {
          if (ran._tag === "Failed") lastFailure = ran.error
          failures.push({
            round,
            role,
            sessionId,
            reason: ran.reason,
            ...(ran._tag === "Failed" ? { error: `${ran.error.error._tag}: ${ran.error.error.message}` } : {})
          })
        }
        return undefined
      }

      const feedback = (): string =>
        candidates.length === 0 ? "" : [
          "\n\nEarlier answers that were not accepted:",
          ...candidates.map((c) =>
            `- ${c.answer} (given ${c.support} time${c.support > 1 ? "s" : ""}` +
            `${c.critique !== undefined && c.critique.notes !== "" ? `; a reviewer noted: ${cut(c.critique.notes)}` : ""})`
          ),
          "Check them critically and give the answer you find correct."
        ].join("\n")

      const decide = (round: number, final: "budget" | undefined) =>
        Effect.gen(function*() {
          const evidence: PolicyEvidence = {
            round,
            maxRounds: config.maxRounds,
            candidates,
            acceptConfidence: config.acceptConfidence,
            acceptMargin: config.acceptMargin
          }
          let made = yield* Effect.try({
            try: () => config.policy(evidence),
            catch: (error) =>
              new ArchitectureFailed({ architecture: name, message: `the policy failed in round ${round}: ${String(error)}` })
          })
          const chosen = made.selected === undefined ? undefined : candidates.find((c) => c.index === made.selected)
          if (made.selected !== undefined && chosen === undefined) {
            return yield* new ArchitectureFailed({
              architecture: name,
              message: `the policy selected answer ${made.selected} in round ${round}, but the answers are 1..${candidates.length}`
            })
          }
          if (made.accept && chosen?.judgement === undefined) {
            made = { ...made, accept: false, reason: `${made.reason}; not accepted: the answer was never judged` }
          }
          if (made.accept && final === "budget") {
            made = { ...made, accept: false, reason: `${made.reason}; not accepted: calls ran out before the round's reviews` }
          }
          decision = made
          changed = false
          const entry: TrailEntry = {
            round,
            accepted: made.accept,
            selected: chosen?.index ?? null,
            answer: chosen?.answer ?? null,
            margin: made.margin ?? null,
            scores: made.scores ?? {},
            reason: made.reason
          }
          trail.push(entry)
          if (chosen !== undefined) yield* Architecture.setOutput(chosen.answer)
          yield* Architecture.progress("ensemble.decision", { ...entry })
          if (made.accept) yield* Architecture.progress("ensemble.accepted", { round, index: chosen!.index, answer: chosen!.answer })
          return made
        })

      const result = (accepted: boolean, interrupted: string | undefined): Architecture.Outcome => {
        const chosen = decision?.selected !== undefined
          ? candidates.find((c) => c.index === decision!.selected)
          : Evidence.bestSupported(candidates)
        const output = chosen?.answer ?? ""
        return {
          output,
          ...(interrupted !== undefined ? { interrupted } : {}),
          metadata: {
            accepted,
            answer: output,
            selected: chosen?.index ?? null,
            rounds,
            calls: used(),
            maxCalls: config.maxCalls,
            reference: reference ?? null,
            isCorrect: reference === undefined ? null : output !== "" && normalize(output) === normalize(reference),
            judgeIsCorrect: chosen?.judgement?.isCorrect ?? null,
            candidates: candidates.map((c) => ({
              index: c.index,
              answer: c.answer,
              key: c.key,
              support: c.support,
              firstRound: c.firstRound,
              supporters: c.supporters,
              critique: c.critique ?? null,
              judgement: c.judgement ?? null
            })),
            trail,
            failures,
            budgetExhausted: budgetStop ?? null
          }
        }
      }

      /** Ends the run early: the budget's pick, never accepted. */
      const stopEarly = (round: number, reason: string) =>
        Effect.map(changed ? decide(round, "budget") : Effect.void, () => result(false, reason))

      for (let round = 1; round <= config.maxRounds; round++) {
        // Solvers: one call each, all or none.
        if (!(yield* fits(round, "solvers", solvers.length))) return yield* stopEarly(round, "budget:max_calls")
        rounds = round
        yield* Architecture.progress("ensemble.round_started", { round, callsUsed: used() })
        const prompt = Template.fill(config.solverPrompt, { problem: input.prompt, feedback: round === 1 ? "" : feedback() })
        const answered = yield* Effect.forEach(
          solvers,
          (solver) => Roles.run(solver.agent, prompt, { role: "solver", index: `${solver.name}_round_${round}` }),
          each
        )
        let solverFailures = 0
        for (let s = 0; s < solvers.length; s++) {
          const solver = solvers[s]!
          const sessionId = Agent.childSessionId(run.sessionId, "solver", `${solver.name}_round_${round}`)
          const done = settle(round, "solver", sessionId, answered[s]!)
          if (done === undefined) {
            solverFailures++
            continue
          }
          const completions = completionsOf(done.metadata, done.output)
          for (let choice = 0; choice < completions.length; choice++) {
            const text = completions[choice]!
            const answer = finalAnswer(text, "first") ?? lastNonEmptyLine(text)
            if (answer === undefined) continue
            const key = normalize(answer)
            if (key === "") continue
            let candidate = byKey.get(key)
            const isNew = candidate === undefined
            if (candidate === undefined) {
              candidate = {
                index: candidates.length + 1,
                answer,
                key,
                support: 0,
                firstRound: round,
                supporters: [],
                critique: undefined,
                judgement: undefined
              }
              candidates.push(candidate)
              byKey.set(key, candidate)
            }
            candidate.support++
            changed = true
            candidate.supporters.push({ round, solver: solver.name, choice })
            yield* Architecture.progress("ensemble.candidate", {
              round,
              solver: solver.name,
              choice,
              index: candidate.index,
              answer,
              support: candidate.support,
              isNew
            })
          }
        }
        if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
        if (candidates.length === 0 && solverFailures === solvers.length && lastFailure !== undefined) {
          return yield* lastFailure
        }
        if (candidates.length > 0) yield* Architecture.setOutput(Evidence.bestSupported(candidates)!.answer)

        // Critics: one per distinct answer without a critique.
        const toCritique = candidates.filter((c) => c.critique === undefined)
        if (toCritique.length > 0) {
          if (!(yield* fits(round, "critics", toCritique.length))) return yield* stopEarly(round, "budget:max_calls")
          const reviews = yield* Effect.forEach(
            toCritique,
            (c) =>
              Roles.run(critic, Template.fill(config.criticPrompt, { problem: input.prompt, answer: c.answer }), {
                role: "critic",
                index: `${c.index}_round_${round}`
              }),
            each
          )
          for (let i = 0; i < toCritique.length; i++) {
            const c = toCritique[i]!
            const sessionId = Agent.childSessionId(run.sessionId, "critic", `${c.index}_round_${round}`)
            const done = settle(round, "critic", sessionId, reviews[i]!)
            if (done === undefined) continue
            c.critique = { ...parseCritique(done.output), round, sessionId }
            changed = true
            yield* Architecture.progress("ensemble.critique", {
              round,
              index: c.index,
              answer: c.answer,
              risk: c.critique.risk,
              notes: c.critique.notes,
              parsed: c.critique.parsed
            })
          }
          if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
        }

        // Judges: one per distinct answer without a judgement.
        const toJudge = candidates.filter((c) => c.judgement === undefined)
        if (toJudge.length > 0) {
          if (!(yield* fits(round, "judges", toJudge.length))) return yield* stopEarly(round, "budget:max_calls")
          const verdicts = yield* Effect.forEach(
            toJudge,
            (c) =>
              Roles.run(
                judge,
                Template.fill(config.judgePrompt, {
                  problem: input.prompt,
                  answer: c.answer,
                  support: String(c.support),
                  risk: c.critique !== undefined ? String(c.critique.risk) : "unknown",
                  critique: c.critique !== undefined && c.critique.notes !== "" ? cut(c.critique.notes, 1000) : "(no notes)",
                  reference: hasReference ? `\nReference answer (decide is_correct against it): ${reference}\n` : ""
                }),
                { role: "judge", index: `${c.index}_round_${round}` }
              ),
            each
          )
          for (let i = 0; i < toJudge.length; i++) {
            const c = toJudge[i]!
            const sessionId = Agent.childSessionId(run.sessionId, "judge", `${c.index}_round_${round}`)
            const done = settle(round, "judge", sessionId, verdicts[i]!)
            if (done === undefined) continue
            c.judgement = { ...parseJudgement(done.output, hasReference), round, sessionId }
            changed = true
            yield* Architecture.progress("ensemble.judgement", {
              round,
              index: c.index,
              answer: c.answer,
              score: c.judgement.score,
              confidence: c.judgement.confidence,
              isCorrect: c.judgement.isCorrect,
              notes: c.judgement.notes,
              parsed: c.judgement.parsed
            })
          }
          if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
        }

        const made = yield* decide(round, undefined)
        if (made.accept) return result(true, undefined)
      }
      return result(false, undefined)
    })
}
