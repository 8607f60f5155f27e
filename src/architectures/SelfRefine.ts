/**
 * Self-Refine: a base run answers (round 0), then each round a critic reviews the task and the current answer
 * and a refiner rewrites the answer from the critique, until the critique contains the stop phrase
 * (case-insensitive) or `maxRounds` rounds are done. At most `base + 2 × maxRounds` model calls when the base
 * answers in one call.
 *
 * Every role is a sub-agent, so each has its own session and can have its own model:
 * `<parent>__base`, `<parent>__critic_<r>`, `<parent>__refiner_<r>`. The base is the running agent itself (its
 * instructions, tools and model) with the `base` architecture (ReAct by default). A sub-agent that stops early at a
 * limit ends the run interrupted with `base:<reason>`, `critic:round_<r>:<reason>` or `refiner:round_<r>:<reason>`
 * and the best answer so far; a spent budget ends it with `budget:<limit>`; a sub-agent that fails (a model error
 * after retries…): the run fails with that role's `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it).
 *
 * Events: `self_refine.round_started`, `.critique`, `.refined`, `.converged`, `.max_rounds_reached`.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { yieldBeforeReading } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"
import * as ReAct from "./ReAct.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "self_refine"

/** The critic's default prompt; placeholders `{prompt}`, `{output}`, `{stop_phrase}`. */
export const defaultCriticPrompt = `Review an answer to a task. List the concrete problems that matter: mistakes, missing parts, unclear \
wording. Be brief. If the answer needs no change, reply with exactly "{stop_phrase}".

Task:
{prompt}

Answer:
{output}`

/** The refiner's default prompt; placeholders `{prompt}`, `{output}`, `{critique}`. */
export const defaultRefinerPrompt = `Improve the answer to the task below so that it addresses every point of the review. Reply with \
the improved answer only.

Task:
{prompt}

Answer:
{output}

Review:
{critique}`

/** The options of Self-Refine. */
export interface Options<RB = Model.Model, RC = never, RR = never> {
  /** How round 0 answers: the running agent with this architecture. Default ReAct. */
  readonly base?: Architecture.Architecture<RB> | undefined
  /** The critic; give it its own `model` to review with another model. Default: a plain agent on the run's model. */
  readonly critic?: Agent.Agent<RC> | undefined
  /** The refiner; give it its own `model` to rewrite with another model. Default: a plain agent on the run's model. */
  readonly refiner?: Agent.Agent<RR> | undefined
  /** Critique rounds at most (≥ 1, default 3). */
  readonly maxRounds?: number | undefined
  /** The critic's prompt template (`{prompt}`, `{output}`, `{stop_phrase}`). */
  readonly criticPrompt?: string | undefined
  /** The refiner's prompt template (`{prompt}`, `{output}`, `{critique}`). */
  readonly refinerPrompt?: string | undefined
  /** A critique containing this (case-insensitive) ends the rounds: converged. Default `no issues`. */
  readonly stopPhrase?: string | undefined
}

const OptionsSchema = Schema.Struct({
  base: Schema.optional(Opts.ArchitectureSchema),
  critic: Schema.optional(Opts.AgentSchema),
  refiner: Schema.optional(Opts.AgentSchema),
  maxRounds: Opts.IntAtLeast(1).pipe(Opts.withDefault(3)),
  criticPrompt: Template.Template(["prompt", "output", "stop_phrase"]).pipe(Opts.withDefault(defaultCriticPrompt)),
  refinerPrompt: Template.Template(["prompt", "output", "critique"]).pipe(Opts.withDefault(defaultRefinerPrompt)),
  stopPhrase: Schema.Trimmed.check(Schema.isNonEmpty()).pipe(Opts.withDefault("no issues"))
})
type Config = typeof OptionsSchema.Type
const defaults: Config = Schema.decodeSync(OptionsSchema)({})

/**
 * Self-Refine with options, checked here: `maxRounds: 0`, an empty stop phrase or a template with an unknown
 * placeholder fail with `InvalidOptions`.
 */
export const make = <RB = Model.Model, RC = never, RR = never>(
  options: Options<RB, RC, RR> = {}
): Effect.Effect<Architecture.Architecture<RB | RC | RR | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("SelfRefine", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RB | RC | RR | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RB = Model.Model, RC = never, RR = never>(options: Options<RB, RC, RR> = {}): Architecture.Architecture<RB | RC | RR | Model.Model> => Opts.runUnsafe(make(options))

/** Self-Refine with its defaults: a ReAct base, three rounds, stop phrase `no issues`. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  // A closure: `program` is defined below.
  program: (input) => program(defaults)(input)
}) as Architecture.Architecture<Model.Model>

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const base = Roles.withArchitecture(input.agent, config.base ?? ReAct.architecture)
    const critic = config.critic ?? Roles.plain("critic")
    const refiner = config.refiner ?? Roles.plain("refiner")
    const outputs: Array<string> = []
    const critiques: Array<string> = []
    const metadata = (rounds: number, converged: boolean) => ({ rounds, converged, critiques, outputs })

    const first = yield* Roles.runOrFail(base, input.prompt, { role: "base" })
    if (first._tag !== "Completed") {
      const partial = first._tag === "Interrupted" ? first.result.output : ""
      if (partial !== "") outputs.push(partial)
      return { output: partial, interrupted: Roles.stopReason("base", first.reason), metadata: metadata(0, false) }
    }
    let output = first.result.output
    outputs.push(output)
    yield* Architecture.setOutput(output)

    for (let round = 1; round <= config.maxRounds; round++) {
      yield* Architecture.progress("self_refine.round_started", { round })
      const review = yield* Roles.runOrFail(
        critic,
        Template.fill(config.criticPrompt, { prompt: input.prompt, output, stop_phrase: config.stopPhrase }),
        { role: "critic", index: round }
      )
      if (review._tag !== "Completed") {
        return { output, interrupted: Roles.stopReason(`critic:round_${round}`, review.reason), metadata: metadata(round - 1, false) }
      }
      const critique = review.result.output
      yield* yieldBeforeReading(critique)
      critiques.push(critique)
      yield* Architecture.progress("self_refine.critique", { round, critique })
      if (critique.toLowerCase().includes(config.stopPhrase.toLowerCase())) {
        yield* Architecture.progress("self_refine.converged", { round })
        return { output, metadata: metadata(round, true) }
      }
      const refined = yield* Roles.runOrFail(
        refiner,
        Template.fill(config.refinerPrompt, { prompt: input.prompt, output, critique }),
        { role: "refiner", index: round }
      )
      if (refined._tag !== "Completed") {
        return { output, interrupted: Roles.stopReason(`refiner:round_${round}`, refined.reason), metadata: metadata(round, false) }
      }
      output = refined.result.output
      outputs.push(output)
      yield* Architecture.setOutput(output)
      yield* Architecture.progress("self_refine.refined", { round, output })
    }
    yield* Architecture.progress("self_refine.max_rounds_reached", { rounds: config.maxRounds })
    return { output, metadata: metadata(config.maxRounds, false) }
  })
