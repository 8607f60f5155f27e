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
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel, SelfRefine } from "valet"
 *
 * const writer = Agent.make({ name: "writer", instructions: "Write one exact sentence.", architecture: SelfRefine.makeUnsafe({ maxRounds: 2 }) })
 *
 * // The base answers, the critic asks for a fix, the refiner fixes it, the critic is satisfied.
 * const model = ScriptedModel.layer(["Paris is the capital of France", "Add a full stop.", "Paris is the capital of France.", "No issues."])
 * const program = Effect.map(Agent.run(writer, "What is the capital of France?"), (result) =>
 *   console.log(result.output, result.metadata.converged)) // "Paris is the capital of France." true
 *
 * Effect.runPromise(program.pipe(Effect.provide(model)))
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"
import * as ReAct from "./ReAct.js"

/**
 * The critic's default prompt; placeholders `{task}`, `{output}`, `{stop_phrase}`. The task and the answer come
 * first and the instruction last, as in the refiner's prompt: the two share their start, so a server's prefix cache
 * serves the refiner's reading of the task and answer the critic just sent (`bench/prefix.ts`).
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultCriticPrompt = `Task:
{task}

Answer:
{output}

Review the answer above. List the concrete problems that matter: mistakes, missing parts, unclear wording. Be \
brief. If the answer needs no change, reply with exactly "{stop_phrase}".`

/**
 * The refiner's default prompt; placeholders `{task}`, `{output}`, `{critique}`. Starts as the critic's does.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultRefinerPrompt = `Task:
{task}

Answer:
{output}

Review:
{critique}

Improve the answer so that it addresses every point of the review. Reply with the improved answer only.`

const { agent, architecture: architectureOption, int, optional, template, withDefault } = Architecture.option

/**
 * Self-Refine, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "self_refine",
  title: "SelfRefine",
  description: "a base answer, then critic / refiner rounds until the critique says it is done",
  options: {
    /** How round 0 answers: the running agent with this architecture. Default ReAct. */
    base: optional(architectureOption),
    /** The critic; give it its own `model` to review with another model. Default: a plain agent on the run's model. */
    critic: optional(agent),
    /** The refiner; give it its own `model` to rewrite with another model. Default: a plain agent on the run's model. */
    refiner: optional(agent),
    /** Critique rounds at most (≥ 1, default 3). */
    maxRounds: int(1).pipe(withDefault(3)),
    /** The critic's prompt template (`{task}`, `{output}`, `{stop_phrase}`). */
    criticPrompt: template(["task", "output", "stop_phrase"]).pipe(withDefault(defaultCriticPrompt)),
    /** The refiner's prompt template (`{task}`, `{output}`, `{critique}`). */
    refinerPrompt: template(["task", "output", "critique"]).pipe(withDefault(defaultRefinerPrompt)),
    /** A critique containing this (case-insensitive) ends the rounds: converged. Default `no issues`. */
    stopPhrase: Schema.Trimmed.check(Schema.isNonEmpty()).pipe(withDefault("no issues"))
  },
  agentOptions: ["critic", "refiner"],
  program: (input, options) =>
    Effect.gen(function*() {
      const base = Architecture.withArchitecture(input.agent, options.base ?? ReAct.architecture)
      const critic = options.critic ?? Architecture.plainAgent("critic")
      const refiner = options.refiner ?? Architecture.plainAgent("refiner")
      const outputs: Array<string> = []
      const critiques: Array<string> = []
      let rounds = 0
      yield* Architecture.setMetadata(() => ({ rounds, converged: false, critiques, outputs }))

      const first = yield* Architecture.role(base, input.prompt, { role: "base", answers: true })
      let output = first.output
      outputs.push(output)
      yield* Architecture.setOutput(output)

      for (let round = 1; round <= options.maxRounds; round++) {
        yield* Architecture.progress("self_refine.round_started", { round })
        const review = yield* Architecture.role(
          critic,
          Architecture.fill(options.criticPrompt, { task: input.prompt, output, stop_phrase: options.stopPhrase }),
          { role: "critic", index: round }
        )
        const critique = review.output
        critiques.push(critique)
        yield* Architecture.progress("self_refine.critique", { round, critique })
        if (critique.toLowerCase().includes(options.stopPhrase.toLowerCase())) {
          yield* Architecture.progress("self_refine.converged", { round })
          return { output, metadata: { rounds: round, converged: true, critiques, outputs } }
        }
        // A refiner that stops now reports this round as reviewed.
        rounds = round
        const refined = yield* Architecture.role(
          refiner,
          Architecture.fill(options.refinerPrompt, { task: input.prompt, output, critique }),
          { role: "refiner", index: round }
        )
        output = refined.output
        outputs.push(output)
        yield* Architecture.setOutput(output)
        yield* Architecture.progress("self_refine.refined", { round, output })
      }
      yield* Architecture.progress("self_refine.max_rounds_reached", { rounds: options.maxRounds })
      return { output, metadata: { rounds: options.maxRounds, converged: false, critiques, outputs } }
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
 * The options of Self-Refine (each with its default; `definition.options` is their schema).
 *
 * @since 0.1.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Self-Refine with options, checked here: `maxRounds: 0`, an empty stop phrase or a template with an unknown
 * placeholder fail with `InvalidOptions`.
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
 * Self-Refine with its defaults: a ReAct base, three rounds, stop phrase `no issues`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()
