/**
 * Tree of Thoughts: a beam search over chains of thoughts. From the task, each node of the frontier asks a proposer
 * for next thoughts, an evaluator scores every candidate, and the best `beamWidth` candidates (scoring at least
 * `minScore`) become the next frontier, for up to `maxDepth` levels; a candidate that reaches `solvedThreshold`
 * ends the search at once. The winner is the best node of the deepest level reached (ties: the earliest); with
 * `synthesize` a last call turns its chain of thoughts into the answer, else the chain is the answer.
 *
 * - A proposal sees the task and the chain so far (`Step 1: …`) and is read as a numbered or bulleted list
 *   (continuation lines folded in, cut to `branchFactor`); a reply with no list is one thought.
 * - An evaluation answers a score in [0, 1]: `score: 0.8`, `85%`, `7/10`, or a bare decimal. A number above 1
 *   without a scale (`Score=7`, `7`) is not a score: the candidate scores 0 and a `tot.parse_error` event says
 *   why — never read as "solved".
 * - Every call is a sub-agent with a session derived from depth and position (`<parent>__proposer_<d>_<i>`,
 *   `<parent>__evaluator_<d>_<k>`, `<parent>__synthesizer`), so a recorded run replays.
 * - A role that fails fails the run with its `SubAgentFailed` (the rule of every architecture); a spent budget ends
 *   the run interrupted with `budget:<limit>` and the best chain so far.
 *
 * Events: `tot.level_started`, `tot.proposed`, `tot.evaluated`, `tot.pruned`, `tot.solved`, `tot.empty_beam`,
 * `tot.parse_error`.
 *
 * @since 0.2.0
 */
import { Effect, Result, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { foldedListItems, parseScore, yieldBeforeReading } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "tree_of_thoughts"

/** The options of TreeOfThoughts. */
export interface Options<RP = never, RE = never, RS = never> {
  /** Thoughts asked of each frontier node (≥ 1, default 3). */
  readonly branchFactor?: number | undefined
  /** Levels at most (≥ 1, default 3). */
  readonly maxDepth?: number | undefined
  /** Nodes kept per level (≥ 1, default 2). */
  readonly beamWidth?: number | undefined
  /** A score at or above this solves the task (in [0, 1], default 1). */
  readonly solvedThreshold?: number | undefined
  /** Candidates scoring below this are pruned (in [0, 1], default 0). */
  readonly minScore?: number | undefined
  /** Turn the winning chain into an answer with one more call (default true). */
  readonly synthesize?: boolean | undefined
  /** Proposes thoughts; default: a plain agent on the run's model. */
  readonly proposer?: Agent.Agent<RP> | undefined
  /** Scores candidates; default: a plain agent on the run's model. */
  readonly evaluator?: Agent.Agent<RE> | undefined
  /** Writes the answer from the winning chain; default: a plain agent on the run's model. */
  readonly synthesizer?: Agent.Agent<RS> | undefined
  /** `{task}`, `{chain}`, `{branch_factor}`. */
  readonly proposerPrompt?: string | undefined
  /** `{task}`, `{chain}`. */
  readonly evaluatorPrompt?: string | undefined
  /** `{task}`, `{chain}`. */
  readonly synthesizerPrompt?: string | undefined
}

export const defaultProposerPrompt = `Task: {task}

Steps so far:
{chain}

Propose up to {branch_factor} different next steps toward solving the task, as a numbered list, one step each.`

export const defaultEvaluatorPrompt = `Task: {task}

Proposed steps:
{chain}

How promising are these steps for solving the task? Answer "score: <a number between 0 and 1>" (1: the task is \
solved), then one sentence why.`

export const defaultSynthesizerPrompt = `Task: {task}

Steps:
{chain}

Using these steps, write the final answer to the task.`

const OptionsSchema = Schema.Struct({
  branchFactor: Opts.IntAtLeast(1).pipe(Opts.withDefault(3)),
  maxDepth: Opts.IntAtLeast(1).pipe(Opts.withDefault(3)),
  beamWidth: Opts.IntAtLeast(1).pipe(Opts.withDefault(2)),
  solvedThreshold: Opts.UnitInterval.pipe(Opts.withDefault(1)),
  minScore: Opts.UnitInterval.pipe(Opts.withDefault(0)),
  synthesize: Schema.Boolean.pipe(Opts.withDefault(true)),
  proposer: Schema.optional(Opts.AgentSchema),
  evaluator: Schema.optional(Opts.AgentSchema),
  synthesizer: Schema.optional(Opts.AgentSchema),
  proposerPrompt: Template.Template(["task", "chain", "branch_factor"]).pipe(Opts.withDefault(defaultProposerPrompt)),
  evaluatorPrompt: Template.Template(["task", "chain"]).pipe(Opts.withDefault(defaultEvaluatorPrompt)),
  synthesizerPrompt: Template.Template(["task", "chain"]).pipe(Opts.withDefault(defaultSynthesizerPrompt))
})
type Config = typeof OptionsSchema.Type
const defaults: Config = Schema.decodeSync(OptionsSchema)({})

/**
 * TreeOfThoughts with options, checked here: a count below 1, a threshold outside [0, 1] or a template with an
 * unknown placeholder fail with `InvalidOptions`.
 */
export const make = <RP = never, RE = never, RS = never>(
  options: Options<RP, RE, RS> = {}
): Effect.Effect<Architecture.Architecture<RP | RE | RS | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("TreeOfThoughts", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RP | RE | RS | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RP = never, RE = never, RS = never>(
  options: Options<RP, RE, RS> = {}
): Architecture.Architecture<RP | RE | RS | Model.Model> => Opts.runUnsafe(make(options))

/** TreeOfThoughts with its defaults. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  program: (input) => program(defaults)(input)
}) as Architecture.Architecture<Model.Model>

// ---------------------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------------------

/** The thoughts of a proposal: its list items (continuation lines folded), or the whole text; at most `max`. */
export const parseThoughts = (text: string, max: number): Array<string> => {
  const items = foldedListItems(text)
  if (items !== undefined) return items.slice(0, max)
  const whole = text.trim().replace(/\s*\n\s*/g, " ")
  return whole === "" ? [] : [whole]
}

/** An evaluation's score, or why it has none (then it counts as 0). */
export const parseEvaluation = (text: string): { readonly score: number; readonly error?: string } => {
  const read = parseScore(text, { fallbackToAnyNumber: true })
  return Result.isSuccess(read) ? { score: read.success } : { score: 0, error: read.failure }
}

// ---------------------------------------------------------------------------------------------------------
// Program
// ---------------------------------------------------------------------------------------------------------

interface Node {
  readonly chain: ReadonlyArray<string>
  readonly score: number
  /** Its place in its level, for ties: the earliest wins. */
  readonly order: number
}

const render = (chain: ReadonlyArray<string>): string =>
  chain.length === 0 ? "(none yet)" : chain.map((thought, i) => `Step ${i + 1}: ${thought}`).join("\n")

const preview = (text: string) => (text.length > 200 ? `${text.slice(0, 199)}…` : text)

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const proposer = config.proposer ?? Roles.plain("proposer")
    const evaluator = config.evaluator ?? Roles.plain("evaluator")
    const synthesizer = config.synthesizer ?? Roles.plain("synthesizer")
    let frontier: ReadonlyArray<Node> = [{ chain: [], score: 0, order: 0 }]
    let best: Node | undefined
    let depthReached = 0
    let solved = false
    const metadata = () => ({
      depth: depthReached,
      solved,
      chain: best?.chain ?? [],
      score: best?.score ?? 0
    })
    const stopped = (reason: string) => ({ output: render(best?.chain ?? []), interrupted: reason, metadata: metadata() })

    search: for (let depth = 1; depth <= config.maxDepth; depth++) {
      yield* Architecture.progress("tot.level_started", { depth, frontier: frontier.length })
      // Proposals of a level run at once; each node's index names its session.
      const proposals = yield* Effect.forEach(frontier, (node, i) =>
        Roles.runOrFail(
          proposer,
          Template.fill(config.proposerPrompt, { task: input.prompt, chain: render(node.chain), branch_factor: String(config.branchFactor) }),
          { role: "proposer", index: `${depth}_${i + 1}` }
        ), { concurrency: "unbounded" })
      const spentProposal = proposals.find((p) => p._tag === "Interrupted" && Roles.isBudget(p.reason))
      if (spentProposal?._tag === "Interrupted") return stopped(spentProposal.reason)
      const candidates: Array<ReadonlyArray<string>> = []
      for (const [i, proposal] of proposals.entries()) {
        yield* yieldBeforeReading(proposal.result.output)
        const thoughts = parseThoughts(proposal.result.output, config.branchFactor)
        yield* Architecture.progress("tot.proposed", { depth, node: i + 1, thoughts })
        for (const thought of thoughts) candidates.push([...frontier[i]!.chain, thought])
      }
      const evaluations = yield* Effect.forEach(candidates, (chain, k) =>
        Roles.runOrFail(
          evaluator,
          Template.fill(config.evaluatorPrompt, { task: input.prompt, chain: render(chain) }),
          { role: "evaluator", index: `${depth}_${k + 1}` }
        ), { concurrency: "unbounded" })
      const spentEvaluation = evaluations.find((e) => e._tag === "Interrupted" && Roles.isBudget(e.reason))
      if (spentEvaluation?._tag === "Interrupted") return stopped(spentEvaluation.reason)
      const scored: Array<Node> = []
      for (const [k, evaluation] of evaluations.entries()) {
        const read = parseEvaluation(evaluation.result.output)
        if (read.error !== undefined) {
          yield* Architecture.progress("tot.parse_error", { depth, candidate: k + 1, error: read.error, text: preview(evaluation.result.output) })
        }
        scored.push({ chain: candidates[k]!, score: read.score, order: k })
        yield* Architecture.progress("tot.evaluated", { depth, candidate: k + 1, score: read.score })
      }
      // The best first; the earliest among equals (a stable sort keeps their order).
      const ranked = scored.filter((node) => node.score >= config.minScore).sort((a, b) => b.score - a.score)
      const kept = ranked.slice(0, config.beamWidth)
      yield* Architecture.progress("tot.pruned", {
        depth,
        kept: kept.map((node) => node.order + 1),
        dropped: scored.length - kept.length
      })
      if (kept.length === 0) {
        yield* Architecture.progress("tot.empty_beam", { depth })
        break search
      }
      depthReached = depth
      best = kept[0]!
      yield* Architecture.setOutput(render(best.chain))
      if (best.score >= config.solvedThreshold) {
        solved = true
        yield* Architecture.progress("tot.solved", { depth, score: best.score })
        break search
      }
      frontier = kept
    }

    if (best === undefined) return { output: "", metadata: metadata() }
    if (!config.synthesize) return { output: render(best.chain), metadata: metadata() }
    const answer = yield* Roles.runOrFail(
      synthesizer,
      Template.fill(config.synthesizerPrompt, { task: input.prompt, chain: render(best.chain) }),
      { role: "synthesizer" }
    )
    if (answer._tag === "Interrupted") {
      return Roles.isBudget(answer.reason)
        ? stopped(answer.reason)
        : { output: answer.result.output, interrupted: Roles.stopReason("synthesizer", answer.reason), metadata: metadata() }
    }
    return { output: answer.result.output, metadata: metadata() }
  })
