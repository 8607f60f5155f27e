/**
 * The Ensemble's options, declared once: their schemas, defaults and one-line docs. `Ensemble.definition.options` is
 * built from these fields, and the program reads the same fields decoded (`Config`), so an option is added, renamed
 * or documented here and nowhere else in the Ensemble. (They live beside the program rather than in `Ensemble.ts`
 * because the program's type is derived from them, and `Ensemble.ts` imports the program.)
 */
import { Schema } from "effect"
import * as Architecture from "../../../core/Architecture.js"
import type { Checked } from "../../../core/internal/define.js"
import { RequestOptions } from "../sampling.js"
import * as Evidence from "./evidence.js"

const { agent, concurrency, function: fn, int, name, optional, template, unit, withDefault } = Architecture.option

/** The default solvers: three ways into a problem. */
export const defaultSolvers = [
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
] as const satisfies ReadonlyArray<{ readonly name: string; readonly prompt: string }>

/** The solvers' default prompt; placeholders `{task}`, `{feedback}` (empty in round 1). */
export const defaultSolverPrompt = `Solve the problem below. Work it out, then end your reply with one line of the form
FINAL: <answer>

Problem:
{task}{feedback}`

/**
 * The critic's default prompt; placeholders `{task}`, `{answer}`. The problem and the answer come first and the
 * instruction last, as in the judge's prompt: the judge's request for an answer starts as its critic's did, so a
 * server's prefix cache serves it (`bench/prefix.ts`).
 */
export const defaultCriticPrompt = `Problem:
{task}

Proposed answer: {answer}

A solver proposed the answer above to the problem. Look for reasons it could be wrong: misread conditions, \
arithmetic slips, missing cases, a wrong form or unit.

Reply with only a JSON object: {"risk": <from 0 to 1, the chance the answer is wrong>, "notes": "<your main concerns, briefly>"}`

/**
 * The judge's default prompt; placeholders `{task}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`.
 * Starts as the critic's does.
 */
export const defaultJudgePrompt = `Problem:
{task}

Proposed answer: {answer}

Judge a proposed answer: the one above. Solvers who gave it: {support}. A reviewer put the risk that it is wrong at \
{risk}: {critique}
{reference}
Reply with only a JSON object: {"score": <from 0 to 1, the quality of the answer>, "confidence": <from 0 to 1, how sure \
you are that it is correct>, "is_correct": <true or false against the reference answer; null without one>, "notes": "<one sentence>"}`

/** One solver role. */
export const Solver = Schema.Struct({
  /** Names the role's sessions (`<parent>__solver_<name>_round_<r>`): letters and digits joined by single - or _. */
  name,
  /** Its approach, sent after the shared problem (so the solvers' requests start alike); without one, its agent's instructions. */
  prompt: optional(Schema.String),
  /** An agent whose model (and, without `prompt`, instructions) the solver uses. */
  agent: optional(agent)
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

/** The Ensemble's options: every one has a default. */
export const fields = {
  /** The solver roles, each `{ name, prompt?, agent? }` (default `defaultSolvers`: algebra, invariants, constructive). */
  solvers: Schema.Array(Solver).check(
    Schema.isMinLength(1, { expected: "a non-empty array of solvers" }),
    Schema.makeFilter((solvers) => {
      const twice = duplicateName(solvers)
      return twice === undefined || `must have distinct names (${JSON.stringify(twice)} is used twice)`
    })
  ).pipe(withDefault<Schema.$Array<typeof Solver>>(defaultSolvers)),
  /** The critic; give it its own `model` to review with another model. Its instructions become the system message. */
  critic: optional(agent),
  /** The judge; give it its own `model` to judge with another model. */
  judge: optional(agent),
  /** Rounds at most (≥ 1, default 2). */
  maxRounds: int(1).pipe(withDefault(2)),
  /** Model calls at most, all roles and rounds (≥ 1, default 10); a phase that does not fit is not started. */
  maxCalls: int(1).pipe(withDefault(10)),
  /** Calls in flight at most, in every phase (≥ 1 or `"unbounded"`, default 6). */
  concurrency: concurrency.pipe(withDefault<typeof concurrency>(6)),
  /** Completions per solver call (`Model.Request.n`, ≥ 1, default 1); one call whatever `n`. */
  n: int(1).pipe(withDefault(1)),
  /** The best answer's judge confidence needed to accept it (in [0, 1], default 0.75). */
  acceptConfidence: unit.pipe(withDefault(0.75)),
  /** The lead over the runner-up needed to accept (default 0.15). */
  acceptMargin: Schema.Finite.pipe(withDefault(0.15)),
  /** The decision rule, a function of the round's evidence (default `defaultPolicy`). */
  policy: fn<Evidence.Policy>("Policy").pipe(withDefault<Schema.declare<Evidence.Policy>>(Evidence.defaultPolicy)),
  /** Pools answers and compares them with the reference (default: the shared normalizer, `42.0` = `42`). */
  normalize: fn<(answer: string) => string>("normalize").pipe(
    withDefault<Schema.declare<(answer: string) => string>>(Architecture.parse.normalizeAnswer)
  ),
  /** The reference answer: told to the judge, and `isCorrect` is computed. Else an evaluation may share one. */
  reference: optional(Schema.String),
  /** The solvers' prompt template (`{task}`, `{feedback}`). */
  solverPrompt: template(["task", "feedback"]).pipe(withDefault(defaultSolverPrompt)),
  /** The critic's prompt template (`{task}`, `{answer}`). */
  criticPrompt: template(["task", "answer"]).pipe(withDefault(defaultCriticPrompt)),
  /** The judge's prompt template (`{task}`, `{answer}`, `{support}`, `{risk}`, `{critique}`, `{reference}`). */
  judgePrompt: template(["task", "answer", "support", "risk", "critique", "reference"]).pipe(withDefault(defaultJudgePrompt)),
  /** Sampling options of every call (temperature, maxTokens, seed, extra…). */
  request: optional(RequestOptions)
}

/** Old option names, still read (said once per process). */
export const deprecated = { maxConcurrency: "concurrency" } as const

/** The options as the program reads them: decoded, with their defaults. */
export type Config = Checked<Schema.Struct.Type<typeof fields>>
