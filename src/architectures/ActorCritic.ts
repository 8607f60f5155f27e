/**
 * Actor-Critic: an actor agent answers (round 0); each round a critic agent returns a JSON critique
 * `{issues, score, summary}`; a score at or above `approvalThreshold` approves the answer, the last round ends
 * with `max_rounds_reached` (a normal end, not an interruption: there is no revision after the last critique),
 * and otherwise the actor revises its answer from the critique (`actorPrompt`).
 *
 * Actor and critic are agents of their own — each may carry its own model — and run as sub-agents under
 * `<parent>__actor_<r>` and `<parent>__critic_<r>`. One that stops early at a limit ends the run interrupted with
 * `actor:round_<r>:<reason>` or `critic:round_<r>:<reason>` and the best answer so far; a spent budget ends it
 * with `budget:<limit>`; one that fails: the run fails with that role's `SubAgentFailed` (the rule of every
 * architecture: a failure fails the run, a limit interrupts it).
 *
 * A critique whose score cannot be read — none, or one that is not a score in [0, 1] (`score: 7` with no scale,
 * `5/0`) — scores 0, so it never approves, and the run emits `actor_critic.parse_error` saying why.
 *
 * Events: `actor_critic.actor_started`, `.actor_completed`, `.critic_started`, `.critique`, `.parse_error`
 * (`{round, what: "critique", error, text}`), `.approved`, `.max_rounds_reached`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ActorCritic, Agent, ScriptedModel } from "valet"
 *
 * const architecture = ActorCritic.makeUnsafe({
 *   actor: Agent.make({ name: "poet", instructions: "You write haiku." }),
 *   critic: Agent.make({ name: "editor", instructions: "You are an exacting editor." }), // may carry its own `model`
 *   approvalThreshold: 0.9
 * })
 * const workshop = Agent.make({ name: "workshop", instructions: "", architecture })
 *
 * // The poem, a critique that scores it 0.4, the revision, a critique that approves it.
 * const model = ScriptedModel.layer([
 *   "white snow, cold and white",
 *   '{"issues": ["no image"], "score": 0.4, "summary": "Flat."}',
 *   "the cat's paw lifts, shakes",
 *   '{"issues": [], "score": 0.95, "summary": "Vivid."}'
 * ])
 * Effect.runPromise(Agent.run(workshop, "A haiku about snow.").pipe(Effect.provide(model))).then((result) =>
 *   console.log(result.output, result.metadata.scores) // "the cat's paw lifts, shakes" [ 0.4, 0.95 ]
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Result, Schema } from "effect"
import * as Architecture from "../core/Architecture.js"

/**
 * The critic's default prompt; placeholders `{task}`, `{output}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultCriticPrompt = `Review the answer to the task below. Reply with only a JSON object:
{"issues": ["<one concrete problem per item>"], "score": <from 0 to 1; 1 means nothing to improve>, "summary": "<one sentence>"}

Task:
{task}

Answer:
{output}`

/**
 * The actor's default revision prompt; placeholders `{task}`, `{output}`, `{critique}`, `{issues_bulleted}`, `{score}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultActorPrompt = `Revise your answer to the task so that it fixes every issue the reviewer found. Reply with the \
revised answer only.

Task:
{task}

Your answer:
{output}

Issues:
{issues_bulleted}

Reviewer's summary: {critique}`

/**
 * The critic's default prompt.
 *
 * @deprecated Use `defaultCriticPrompt` (the option is `criticPrompt`); valet 0.x keeps this name.
 * @since 0.1.0
 * @category prompts
 */
export const defaultCritiquePrompt = defaultCriticPrompt

/**
 * The actor's default revision prompt.
 *
 * @deprecated Use `defaultActorPrompt` (the option is `actorPrompt`); valet 0.x keeps this name.
 * @since 0.1.0
 * @category prompts
 */
export const defaultRefinePrompt = defaultActorPrompt

// ---------------------------------------------------------------------------------------------------------
// Critiques
// ---------------------------------------------------------------------------------------------------------

/**
 * A parsed critique. `parsed` says how: from JSON, from a `score: n` pattern, or not at all (score 0).
 *
 * @since 0.1.0
 * @category parsing
 */
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
 * a bounded part of the reply in linear time (`Architecture.parse`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseCritique = (text: string): Critique => {
  const json = Architecture.parse.json(CritiqueJson, text, { expect: "object" })
  if (Result.isSuccess(json)) {
    const { issues, score, summary } = json.success
    const list = issues === undefined || issues === null ? [] : typeof issues === "string" ? [issues] : issues
    const checked = Architecture.parse.unitScore(score, "score")
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
  const score = Architecture.parse.score(text)
  return Result.isSuccess(score)
    ? { score: score.success, issues, summary: trimmed, parsed: "score_pattern" }
    : { score: 0, issues, summary: trimmed, parsed: "none", error: score.failure }
}

// ---------------------------------------------------------------------------------------------------------
// The architecture
// ---------------------------------------------------------------------------------------------------------

/**
 * One critique of a run, as `RunResult.metadata.critiques` lists it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RoundCritique extends Critique {
  readonly round: number
}

const { agent, int, template, unit, withDefault } = Architecture.option

/**
 * Actor-Critic, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "actor_critic",
  title: "ActorCritic",
  description: "an actor answers and revises, a critic scores each answer, until approval or the last round",
  options: {
    /** Answers the task, then revises; give it its own `model` to answer with another model. */
    actor: agent,
    /** Reviews each answer; its reply is parsed with `parseCritique`. */
    critic: agent,
    /** Critiques at most (≥ 1, default 3). */
    maxRounds: int(1).pipe(withDefault(3)),
    /** A score at or above this approves the answer (in [0, 1], default 0.9). */
    approvalThreshold: unit.pipe(withDefault(0.9)),
    /** The critic's prompt template (`{task}`, `{output}`). */
    criticPrompt: template(["task", "output"]).pipe(withDefault(defaultCriticPrompt)),
    /** The actor's revision template (`{task}`, `{output}`, `{critique}`, `{issues_bulleted}`, `{score}`). */
    actorPrompt: template(["task", "output", "critique", "issues_bulleted", "score"]).pipe(withDefault(defaultActorPrompt))
  },
  agentOptions: ["actor", "critic"],
  deprecated: { critiquePrompt: "criticPrompt", refinePrompt: "actorPrompt" },
  program: (input, options) =>
    Effect.gen(function*() {
      const { actor, critic } = options
      const outputs: Array<string> = []
      const critiques: Array<RoundCritique> = []
      // The rounds whose critique is in: what a run ended by a stopped role reports.
      let rounds = 0
      const metadata = (approved: boolean) => ({
        rounds,
        approved,
        scores: critiques.map((critique) => critique.score),
        critiques,
        outputs
      })
      yield* Architecture.setMetadata(() => metadata(false))

      yield* Architecture.progress("actor_critic.actor_started", { round: 0 })
      const first = yield* Architecture.role(actor, input.prompt, { role: "actor", index: 0, answers: true })
      let output = first.output
      outputs.push(output)
      yield* Architecture.setOutput(output)
      yield* Architecture.progress("actor_critic.actor_completed", { round: 0, output })

      for (let round = 1; round <= options.maxRounds; round++) {
        yield* Architecture.progress("actor_critic.critic_started", { round })
        const review = yield* Architecture.role(
          critic,
          Architecture.fill(options.criticPrompt, { task: input.prompt, output }),
          { role: "critic", index: round }
        )
        const critique = parseCritique(review.output)
        critiques.push({ round, ...critique })
        rounds = round
        yield* Architecture.progress("actor_critic.critique", { round, ...critique })
        if (critique.error !== undefined) {
          yield* Architecture.progress("actor_critic.parse_error", {
            round,
            what: "critique",
            error: critique.error,
            text: Architecture.parse.preview(review.output)
          })
        }
        if (critique.score >= options.approvalThreshold) {
          yield* Architecture.progress("actor_critic.approved", { round, score: critique.score })
          return { output, metadata: metadata(true) }
        }
        if (round === options.maxRounds) {
          yield* Architecture.progress("actor_critic.max_rounds_reached", { rounds: round, score: critique.score })
          return { output, metadata: metadata(false) }
        }
        yield* Architecture.progress("actor_critic.actor_started", { round })
        const revised = yield* Architecture.role(
          actor,
          Architecture.fill(options.actorPrompt, {
            task: input.prompt,
            output,
            critique: critique.summary !== "" ? critique.summary : review.output.trim(),
            issues_bulleted: Architecture.bulleted(critique.issues),
            score: String(critique.score)
          }),
          { role: "actor", index: round }
        )
        output = revised.output
        outputs.push(output)
        yield* Architecture.setOutput(output)
        yield* Architecture.progress("actor_critic.actor_completed", { round, output })
      }
      // Unreachable: the last round returns above; kept so the program has one obvious end.
      return { output, metadata: metadata(false) }
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
 * The options of Actor-Critic (`critiquePrompt` and `refinePrompt` are still read, as `criticPrompt` and
 * `actorPrompt`).
 *
 * @since 0.1.0
 * @category constructors
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Actor-Critic with options, checked here: a missing actor or critic, `maxRounds: 0`, a threshold outside
 * [0, 1] or a template with an unknown placeholder fail with `InvalidOptions`.
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
