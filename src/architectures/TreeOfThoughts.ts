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
 *   without a scale (`Score=7`, `7`) is not a score: the candidate scores 0 and a `tree_of_thoughts.parse_error`
 *   event says why — never read as "solved".
 * - Every call is a sub-agent with a session derived from depth and position (`<parent>__proposer_<d>_<i>`,
 *   `<parent>__evaluator_<d>_<k>`, `<parent>__synthesizer`), so a recorded run replays.
 * - A role that fails fails the run with its `SubAgentFailed` (the rule of every architecture). A role that stops
 *   at a limit ends the run interrupted with the best chain so far: `proposer_<d>_<i>:<reason>`,
 *   `evaluator_<d>_<k>:<reason>`, `synthesizer:<reason>` (its partial answer, when it wrote one), or
 *   `budget:<limit>` for a spent budget.
 *
 * Events: `tree_of_thoughts.level_started`, `.proposed`, `.evaluated`, `.pruned`, `.solved`, `.empty_beam`,
 * `.parse_error`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Model, ScriptedModel, TreeOfThoughts } from "valet"
 *
 * // One level of two thoughts: a proposal, a score for each thought, then the answer from the better chain.
 * const solver = Agent.make({
 *   name: "solver",
 *   instructions: "",
 *   architecture: TreeOfThoughts.makeUnsafe({ branchFactor: 2, beamWidth: 1, maxDepth: 1 })
 * })
 * const result = Agent.run(solver, "Use 4, 7, 8 and 8 once each to make 24.").pipe(
 *   Effect.provide(ScriptedModel.layer((request) => {
 *     const prompt = Model.textOf(request.messages?.at(-1)?.content ?? "")
 *     if (prompt.includes("Propose up to")) return "1. 8 ÷ 8 = 1, leaving 4 7 1\n2. 8 + 8 = 16, leaving 4 7 16"
 *     if (prompt.includes("How promising")) return prompt.includes("8 ÷ 8") ? "score: 0.9" : "score: 0.2"
 *     return "(7 − 8 ÷ 8) × 4 = 24"
 *   }))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Result, Schema } from "effect"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"

/**
 * The proposer's default prompt; placeholders `{task}`, `{chain}`, `{branch_factor}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultProposerPrompt = `Task: {task}

Steps so far:
{chain}

Propose up to {branch_factor} different next steps toward solving the task, as a numbered list, one step each.`

/**
 * The evaluator's default prompt; placeholders `{task}`, `{chain}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultEvaluatorPrompt = `Task: {task}

Proposed steps:
{chain}

How promising are these steps for solving the task? Answer "score: <a number between 0 and 1>" (1: the task is \
solved), then one sentence why.`

/**
 * The synthesizer's default prompt; placeholders `{task}`, `{chain}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultSynthesizerPrompt = `Task: {task}

Steps:
{chain}

Using these steps, write the final answer to the task.`

// ---------------------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------------------

/**
 * The thoughts of a proposal: its list items (continuation lines folded), or the whole text; at most `max`.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseThoughts = (text: string, max: number): Array<string> => {
  const items = Architecture.parse.foldedListItems(text)
  if (items !== undefined) return items.slice(0, max)
  const whole = text.trim().replace(/\s*\n\s*/g, " ")
  return whole === "" ? [] : [whole]
}

/**
 * An evaluation's score, or why it has none (then it counts as 0).
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseEvaluation = (text: string): { readonly score: number; readonly error?: string } => {
  const read = Architecture.parse.score(text, { fallbackToAnyNumber: true })
  return Result.isSuccess(read) ? { score: read.success } : { score: 0, error: read.failure }
}

// ---------------------------------------------------------------------------------------------------------
// The declaration
// ---------------------------------------------------------------------------------------------------------

interface Node {
  readonly chain: ReadonlyArray<string>
  readonly score: number
  /** Its place in its level, for ties: the earliest wins. */
  readonly order: number
}

const render = (chain: ReadonlyArray<string>): string =>
  chain.length === 0 ? "(none yet)" : chain.map((thought, i) => `Step ${i + 1}: ${thought}`).join("\n")

const { agent, int, optional, template, unit, withDefault } = Architecture.option

/**
 * Tree of Thoughts, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "tree_of_thoughts",
  title: "TreeOfThoughts",
  description: "a beam search over chains of thoughts, proposed and scored level by level",
  options: {
    /** Thoughts asked of each frontier node (≥ 1, default 3). */
    branchFactor: int(1).pipe(withDefault(3)),
    /** Levels at most (≥ 1, default 3). */
    maxDepth: int(1).pipe(withDefault(3)),
    /** Nodes kept per level (≥ 1, default 2). */
    beamWidth: int(1).pipe(withDefault(2)),
    /** A score at or above this solves the task (in [0, 1], default 1). */
    solvedThreshold: unit.pipe(withDefault(1)),
    /** Candidates scoring below this are pruned (in [0, 1], default 0). */
    minScore: unit.pipe(withDefault(0)),
    /** Turn the winning chain into an answer with one more call (default true); else the chain is the answer. */
    synthesize: Schema.Boolean.pipe(withDefault(true)),
    /** Proposes thoughts. Default: a plain agent on the run's model. */
    proposer: optional(agent),
    /** Scores candidates. Default: a plain agent on the run's model. */
    evaluator: optional(agent),
    /** Writes the answer from the winning chain. Default: a plain agent on the run's model. */
    synthesizer: optional(agent),
    /** The proposer's prompt template (`{task}`, `{chain}`, `{branch_factor}`). */
    proposerPrompt: template(["task", "chain", "branch_factor"]).pipe(withDefault(defaultProposerPrompt)),
    /** The evaluator's prompt template (`{task}`, `{chain}`). */
    evaluatorPrompt: template(["task", "chain"]).pipe(withDefault(defaultEvaluatorPrompt)),
    /** The synthesizer's prompt template (`{task}`, `{chain}`). */
    synthesizerPrompt: template(["task", "chain"]).pipe(withDefault(defaultSynthesizerPrompt))
  },
  agentOptions: ["proposer", "evaluator", "synthesizer"],
  program: (input, options) =>
    Effect.gen(function*() {
      const proposer = options.proposer ?? Architecture.plainAgent("proposer")
      const evaluator = options.evaluator ?? Architecture.plainAgent("evaluator")
      const synthesizer = options.synthesizer ?? Architecture.plainAgent("synthesizer")
      let frontier: ReadonlyArray<Node> = [{ chain: [], score: 0, order: 0 }]
      let best: Node | undefined
      let depthReached = 0
      let solved = false
      const metadata = () => ({ depth: depthReached, solved, chain: best?.chain ?? [], score: best?.score ?? 0 })
      yield* Architecture.setMetadata(metadata)

      search: for (let depth = 1; depth <= options.maxDepth; depth++) {
        yield* Architecture.progress("tree_of_thoughts.level_started", { depth, frontier: frontier.length })
        // Proposals of a level run at once; each node's index names its session.
        const proposals = yield* Effect.forEach(frontier, (node, i) =>
          Architecture.role(
            proposer,
            Architecture.fill(options.proposerPrompt, {
              task: input.prompt,
              chain: render(node.chain),
              branch_factor: String(options.branchFactor)
            }),
            { role: "proposer", index: `${depth}_${i + 1}`, label: `proposer_${depth}_${i + 1}` }
          ), { concurrency: "unbounded" })
        const candidates: Array<ReadonlyArray<string>> = []
        for (const [i, proposal] of proposals.entries()) {
          const thoughts = parseThoughts(proposal.output, options.branchFactor)
          yield* Architecture.progress("tree_of_thoughts.proposed", { depth, node: i + 1, thoughts })
          for (const thought of thoughts) candidates.push([...frontier[i]!.chain, thought])
        }
        const evaluations = yield* Effect.forEach(candidates, (chain, k) =>
          Architecture.role(
            evaluator,
            Architecture.fill(options.evaluatorPrompt, { task: input.prompt, chain: render(chain) }),
            { role: "evaluator", index: `${depth}_${k + 1}`, label: `evaluator_${depth}_${k + 1}` }
          ), { concurrency: "unbounded" })
        const scored: Array<Node> = []
        for (const [k, evaluation] of evaluations.entries()) {
          const read = parseEvaluation(evaluation.output)
          if (read.error !== undefined) {
            yield* Architecture.progress("tree_of_thoughts.parse_error", {
              depth,
              candidate: k + 1,
              error: read.error,
              text: Architecture.parse.preview(evaluation.output)
            })
          }
          scored.push({ chain: candidates[k]!, score: read.score, order: k })
          yield* Architecture.progress("tree_of_thoughts.evaluated", { depth, candidate: k + 1, score: read.score })
        }
        // The best first; the earliest among equals (a stable sort keeps their order).
        const ranked = scored.filter((node) => node.score >= options.minScore).sort((a, b) => b.score - a.score)
        const kept = ranked.slice(0, options.beamWidth)
        yield* Architecture.progress("tree_of_thoughts.pruned", {
          depth,
          kept: kept.map((node) => node.order + 1),
          dropped: scored.length - kept.length
        })
        if (kept.length === 0) {
          yield* Architecture.progress("tree_of_thoughts.empty_beam", { depth })
          break search
        }
        depthReached = depth
        best = kept[0]!
        yield* Architecture.setOutput(render(best.chain))
        if (best.score >= options.solvedThreshold) {
          solved = true
          yield* Architecture.progress("tree_of_thoughts.solved", { depth, score: best.score })
          break search
        }
        frontier = kept
      }

      if (best === undefined) return { output: "", metadata: metadata() }
      if (!options.synthesize) return { output: render(best.chain), metadata: metadata() }
      const answer = yield* Architecture.role(
        synthesizer,
        Architecture.fill(options.synthesizerPrompt, { task: input.prompt, chain: render(best.chain) }),
        { role: "synthesizer", answers: true }
      )
      return { output: answer.output, metadata: metadata() }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of TreeOfThoughts.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * TreeOfThoughts with options, checked here: a count below 1, a threshold outside [0, 1] or a template with an
 * unknown placeholder fail with `InvalidOptions`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

/**
 * TreeOfThoughts with its defaults: three thoughts per node, three levels, a beam of two, solved at 1, a synthesis.
 *
 * @since 0.2.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()
