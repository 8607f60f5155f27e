/**
 * Actor-Critic: an actor agent answers (round 0); each round a critic agent returns a JSON critique
 * `{issues, score, summary}`; a score at or above `approvalThreshold` approves the answer, the last round ends
 * with `max_rounds_reached` (a normal end, not an interruption: there is no revision after the last critique),
 * and otherwise the actor revises its answer from the critique.
 *
 * Actor and critic are agents of their own — each may carry its own model — and run as sub-agents under
 * `<parent>__actor_<r>` and `<parent>__critic_<r>`. One that stops early at a limit ends the run interrupted with
 * `actor:round_<r>:<reason>` or `critic:round_<r>:<reason>` and the best answer so far; a spent budget ends it
 * with `budget:<limit>`; one that fails: the run fails with that role's `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it).
 *
 * A critique whose score cannot be read — none, or one that is not a score in [0, 1] (`score: 7` with no scale,
 * `5/0`) — scores 0, so it never approves, and the run emits `actor_critic.parse_error` saying why.
 *
 * Events: `actor_critic.actor_started`, `.actor_completed`, `.critic_started`, `.critique`, `.parse_error`
 * (`{round, what: "critique", error, text}`), `.approved`, `.max_rounds_reached`.
 *
 * @since 0.1.0
 */
import { Effect, Result, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { decodeJson, parseScore, preview, unitScore, yieldBeforeReading } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "actor_critic"

/** The critic's default prompt; placeholders `{prompt}`, `{output}`. */
export const defaultCritiquePrompt = `Review the answer to the task below. Reply with only a JSON object:
{"issues": ["<one concrete problem per item>"], "score": <from 0 to 1; 1 means nothing to improve>, "summary": "<one sentence>"}

Task:
{prompt}

Answer:
{output}`

/** The actor's default revision prompt; placeholders `{prompt}`, `{output}`, `{critique}`, `{issues_bulleted}`, `{score}`. */
export const defaultRefinePrompt = `Revise your answer to the task so that it fixes every issue the reviewer found. Reply with the \
revised answer only.

Task:
{prompt}

Your answer:
{output}

Issues:
{issues_bulleted}

Reviewer's summary: {critique}`

/** The options of Actor-Critic. */
export interface Options<RA, RC> {
  /** Answers the task, then revises. */
  readonly actor: Agent.Agent<RA>
  /** Reviews each answer; its reply is parsed with `parseCritique`. */
  readonly critic: Agent.Agent<RC>
  /** Critiques at most (≥ 1, default 3). */
  readonly maxRounds?: number | undefined
  /** A score at or above this approves the answer (in [0, 1], default 0.9). */
  readonly approvalThreshold?: number | undefined
  /** The critic's prompt template (`{prompt}`, `{output}`). */
  readonly critiquePrompt?: string | undefined
  /** The actor's revision template (`{prompt}`, `{output}`, `{critique}`, `{issues_bulleted}`, `{score}`). */
  readonly refinePrompt?: string | undefined
}

const OptionsSchema = Schema.Struct({
  actor: Opts.AgentSchema,
  critic: Opts.AgentSchema,
  maxRounds: Opts.IntAtLeast(1).pipe(Opts.withDefault(3)),
  approvalThreshold: Opts.UnitInterval.pipe(Opts.withDefault(0.9)),
  critiquePrompt: Template.Template(["prompt", "output"]).pipe(Opts.withDefault(defaultCritiquePrompt)),
  refinePrompt: Template.Template(["prompt", "output", "critique", "issues_bulleted", "score"]).pipe(Opts.withDefault(defaultRefinePrompt))
})
type Config = typeof OptionsSchema.Type

// ---------------------------------------------------------------------------------------------------------
// Critiques
// ---------------------------------------------------------------------------------------------------------

/** A parsed critique. `parsed` says how: from JSON, from a `score: n` pattern, or not at all (score 0). */
export interface Critique {
  readonly score: number
  readonly issues: ReadonlyArray<string>
  readonly summary: string
  readonly parsed: "json" | "score_pattern" | "none"
  /** Why no score could be read (the score is then 0); absent when it was. */
  readonly error?: string | undefined
}

// Models write issues as strings, numbers or small objects (`{"issue": …, "severity": …}`): keep them all.
const Issue = Schema.Union([Schema.String, Schema.Number, Schema.Record(Schema.String, Schema.Unknown)])
const CritiqueJson = Schema.Struct({
  // Checked by `unitScore`: a number in [0, 1], or a string such as "0.7" or "7/10".
  score: Schema.optional(Schema.NullOr(Schema.Union([Schema.Number, Schema.String]))),
  issues: Schema.optional(Schema.NullOr(Schema.Union([Schema.Array(Issue), Schema.String]))),
  summary: Schema.optional(Schema.NullOr(Schema.String))
})

const issueText = (issue: typeof Issue.Type): string => {
  if (typeof issue === "string") return issue.trim()
  if (typeof issue === "number") return String(issue)
  for (const key of ["issue", "description", "problem", "text"]) {
    const value = issue[key]
    if (typeof value === "string") return value.trim()
  }
  return JSON.stringify(issue)
}

/**
 * Parses a critic's reply: a JSON object `{issues, score, summary}` (in code fences or surrounded by prose
 * too), else a `score: 0.42` pattern (`7/10`, `7 out of 10`, `70%` too) with the whole text as the one issue,
 * else score 0 with the whole text as the one issue (no issue for an empty reply). A score is never clamped: one
 * that is missing or not in [0, 1] (`score: 7` with no scale, `5/0`) gives score 0 and `error` saying why. Reads
 * a bounded part of the reply in linear time (see `core/internal/parse.ts`).
 */
export const parseCritique = (text: string): Critique => {
  const json = decodeJson(CritiqueJson, text, { expect: "object" })
  if (Result.isSuccess(json)) {
    const { issues, score, summary } = json.success
    const list = issues === undefined || issues === null ? [] : typeof issues === "string" ? [issues] : issues
    const checked = unitScore(score, "score")
    return {
      score: Result.isSuccess(checked) ? checked.success : 0,
      issues: list.map(issueText).filter((issue) => issue !== ""),
      summary: summary?.trim() ?? "",
      parsed: "json",
      ...(Result.isFailure(checked) ? { error: checked.failure } : {})
    }
  }
  const trimmed = text.trim()
  const issues = trimmed === "" ? [] : [trimmed]
  const score = parseScore(text)
  return Result.isSuccess(score)
    ? { score: score.success, issues, summary: trimmed, parsed: "score_pattern" }
    : { score: 0, issues, summary: trimmed, parsed: "none", error: score.failure }
}

// ---------------------------------------------------------------------------------------------------------
// The architecture
// ---------------------------------------------------------------------------------------------------------

/**
 * Actor-Critic with options, checked here: a missing actor or critic, `maxRounds: 0`, a threshold outside
 * [0, 1] or a template with an unknown placeholder fail with `InvalidOptions`.
 */
export const make = <RA, RC>(options: Options<RA, RC>): Effect.Effect<Architecture.Architecture<RA | RC>, InvalidOptions> =>
  Effect.map(
    Opts.decode("ActorCritic", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RA | RC>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RA, RC>(options: Options<RA, RC>): Architecture.Architecture<RA | RC> => Opts.runUnsafe(make(options))

/** One critique of a run, as `RunResult.metadata.critiques` lists it. */
export interface RoundCritique extends Critique {
  readonly round: number
}

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const { actor, critic } = config
    const outputs: Array<string> = []
    const critiques: Array<RoundCritique> = []
    const metadata = (rounds: number, approved: boolean) => ({
      rounds,
      approved,
      scores: critiques.map((critique) => critique.score),
      critiques,
      outputs
    })

    yield* Architecture.progress("actor_critic.actor_started", { round: 0 })
    const first = yield* Roles.runOrFail(actor, input.prompt, { role: "actor", index: 0 })
    if (first._tag !== "Completed") {
      const partial = first._tag === "Interrupted" ? first.result.output : ""
      if (partial !== "") outputs.push(partial)
      return { output: partial, interrupted: Roles.stopReason("actor:round_0", first.reason), metadata: metadata(0, false) }
    }
    let output = first.result.output
    outputs.push(output)
    yield* Architecture.setOutput(output)
    yield* Architecture.progress("actor_critic.actor_completed", { round: 0, output })

    for (let round = 1; round <= config.maxRounds; round++) {
      yield* Architecture.progress("actor_critic.critic_started", { round })
      const review = yield* Roles.runOrFail(
        critic,
        Template.fill(config.critiquePrompt, { prompt: input.prompt, output }),
        { role: "critic", index: round }
      )
      if (review._tag !== "Completed") {
        return { output, interrupted: Roles.stopReason(`critic:round_${round}`, review.reason), metadata: metadata(round - 1, false) }
      }
      yield* yieldBeforeReading(review.result.output)
      const critique = parseCritique(review.result.output)
      critiques.push({ round, ...critique })
      yield* Architecture.progress("actor_critic.critique", { round, ...critique })
      if (critique.error !== undefined) {
        yield* Architecture.progress("actor_critic.parse_error", {
          round,
          what: "critique",
          error: critique.error,
          text: preview(review.result.output)
        })
      }
      if (critique.score >= config.approvalThreshold) {
        yield* Architecture.progress("actor_critic.approved", { round, score: critique.score })
        return { output, metadata: metadata(round, true) }
      }
      if (round === config.maxRounds) {
        yield* Architecture.progress("actor_critic.max_rounds_reached", { rounds: round, score: critique.score })
        return { output, metadata: metadata(round, false) }
      }
      yield* Architecture.progress("actor_critic.actor_started", { round })
      const revised = yield* Roles.runOrFail(
        actor,
        Template.fill(config.refinePrompt, {
          prompt: input.prompt,
          output,
          critique: critique.summary !== "" ? critique.summary : review.result.output.trim(),
          issues_bulleted: Template.bulleted(critique.issues),
          score: String(critique.score)
        }),
        { role: "actor", index: round }
      )
      if (revised._tag !== "Completed") {
        return { output, interrupted: Roles.stopReason(`actor:round_${round}`, revised.reason), metadata: metadata(round, false) }
      }
      output = revised.result.output
      outputs.push(output)
      yield* Architecture.setOutput(output)
      yield* Architecture.progress("actor_critic.actor_completed", { round, output })
    }
    // Unreachable: the last round returns above; kept so the program has one obvious end.
    return { output, metadata: metadata(config.maxRounds, false) }
  })
