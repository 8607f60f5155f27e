/**
 * Blackboard: agents collaborate through a shared board. The board is a list of entries `[kind] author: content`,
 * seeded with the task. Each round, the coordinator (an agent) reads the agents' names and descriptions and the
 * board and answers JSON `{"agent": <name>, "instruction"?: <text>, "terminate"?: true}`; the chosen agent reads the
 * board and the instruction and adds one contribution. Without a coordinator the agents take turns (round robin)
 * for `maxRounds` rounds. The answer is the decider's (an agent reading the whole board), or else the last
 * contribution.
 *
 * - `terminate` ends the rounds only when it is the JSON boolean `true` (`"false"`, `"true"` or `1` do not).
 * - A coordinator answer that is not such JSON, or names no agent of the board, is asked again once with the
 *   problem; a second miss gives that round to the next agent in turn (`blackboard.fallback`).
 * - An agent sees the task entry and the newest entries that fit in `boardLimit` characters (older ones are
 *   left out, and it is told how many).
 * - Sessions: `<parent>__bb_coordinator_<r>` (its second try `…_<r>_retry`), `<parent>__bb_<name>_<r>`,
 *   `<parent>__bb_decider`. A role that fails fails the run with its `SubAgentFailed` (the rule of every
 *   architecture). A role that stops at a limit ends the run interrupted with the last contribution (or the
 *   decider's partial answer, when it wrote one): `bb_coordinator:round_<r>:<reason>` (`round_<r>_retry` for the
 *   second try), `bb_<name>:round_<r>:<reason>`, `bb_decider:<reason>`, or `budget:<limit>` for a spent budget.
 *
 * Events: `blackboard.decided`, `blackboard.contribution`, `blackboard.fallback`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Blackboard, ScriptedModel } from "valet"
 *
 * const researcher = Agent.make({ name: "researcher", instructions: "You find facts." })
 * const writer = Agent.make({ name: "writer", instructions: "You write short, clear prose." })
 * const board = Blackboard.makeUnsafe({ agents: [researcher, writer], maxRounds: 2 })
 * const desk = Agent.make({ name: "desk", instructions: "", architecture: board })
 * // No coordinator: the researcher, then the writer, each adds one contribution; the writer's is the answer.
 * const result = Agent.run(desk, "One sentence on why octopuses are clever.").pipe(
 *   Effect.provide(ScriptedModel.layer([
 *     "Two thirds of an octopus's neurons are in its arms.",
 *     "Octopuses think with their arms, where two thirds of their neurons are."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Result, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"

/**
 * The coordinator's default prompt; placeholders `{agents}`, `{board}`, `{round}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultCoordinatorPrompt = `You coordinate a team working on a shared board. Team:
{agents}

The board (round {round}):
{board}

Choose who contributes next. Answer with JSON only: {"agent": "<name>", "instruction": "<what to add>"}, or \
{"terminate": true} when the board holds a complete answer.`

/**
 * A contributor's default prompt; placeholders `{board}`, `{instruction}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultContributorPrompt = `The shared board:
{board}

Your instruction: {instruction}

Add one contribution to the board: write only your contribution.`

/**
 * The decider's default prompt; placeholders `{task}`, `{board}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultDeciderPrompt = `Task: {task}

The team's board:
{board}

Write the final answer to the task from the board.`

// ---------------------------------------------------------------------------------------------------------
// The board and the coordinator
// ---------------------------------------------------------------------------------------------------------

/**
 * One entry of the board.
 *
 * @since 0.2.0
 * @category board
 */
export interface Entry {
  readonly kind: "task" | "contribution"
  readonly author: string
  readonly content: string
}

const line = (entry: Entry): string => `[${entry.kind}] ${entry.author}: ${entry.content.replace(/\s*\n\s*/g, " ")}`

/**
 * The board as an agent reads it: the task entry, then the newest entries that fit in `limit` characters.
 *
 * @since 0.2.0
 * @category board
 */
export const render = (board: ReadonlyArray<Entry>, limit: number): string => {
  const [task, ...rest] = board.map(line)
  const kept: Array<string> = []
  let used = (task?.length ?? 0) + 1
  for (let i = rest.length - 1; i >= 0; i--) {
    if (used + rest[i]!.length + 1 > limit) break
    used += rest[i]!.length + 1
    kept.unshift(rest[i]!)
  }
  const left = rest.length - kept.length
  return [task ?? "", ...(left > 0 ? [`(${left} older ${left === 1 ? "entry" : "entries"} left out)`] : []), ...kept].join("\n")
}

const Decision = Schema.Struct({
  agent: Schema.optional(Schema.String),
  instruction: Schema.optional(Schema.String),
  terminate: Schema.optional(Schema.Unknown)
})

/**
 * What a coordinator decided: an agent (with an instruction), to terminate, or why its answer cannot be used.
 *
 * @since 0.2.0
 * @category coordinator
 */
export type Decided =
  | { readonly _tag: "Agent"; readonly agent: string; readonly instruction: string }
  | { readonly _tag: "Terminate" }
  | { readonly _tag: "Invalid"; readonly problem: string }

/**
 * Reads a coordinator's answer. `terminate` counts only as the JSON boolean `true`.
 *
 * @since 0.2.0
 * @category coordinator
 */
export const parseDecision = (text: string, names: ReadonlyArray<string>): Decided => {
  const decoded = Architecture.parse.json(Decision, text, { expect: "object" })
  if (Result.isFailure(decoded)) return { _tag: "Invalid", problem: `the answer is not JSON {"agent", "instruction"} (${decoded.failure})` }
  const decision = decoded.success
  if (decision.terminate === true) return { _tag: "Terminate" }
  if (decision.agent === undefined) {
    return { _tag: "Invalid", problem: decision.terminate !== undefined ? `"terminate" must be the JSON boolean true, got ${JSON.stringify(decision.terminate)}, and no agent is named` : "no agent is named" }
  }
  const agent = names.find((n) => n.toLowerCase() === decision.agent!.trim().toLowerCase())
  if (agent === undefined) return { _tag: "Invalid", problem: `there is no agent ${JSON.stringify(decision.agent)} (agents: ${names.join(", ")})` }
  return { _tag: "Agent", agent, instruction: decision.instruction ?? "" }
}

// ---------------------------------------------------------------------------------------------------------
// The declaration
// ---------------------------------------------------------------------------------------------------------

const describe = (agent: Agent.Agent<unknown>): string => {
  const first = agent.instructions.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "") ?? "(no description)"
  return `- ${agent.name}: ${first.length <= 200 ? first : `${first.slice(0, 199)}…`}`
}

const { agent, agents, int, optional, template, withDefault } = Architecture.option

const keepGoing = "Add what the board still needs toward the task."

/**
 * Blackboard, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "blackboard",
  title: "Blackboard",
  description: "agents contribute to a shared board, picked by a coordinator or in turn; a decider answers",
  options: {
    /** The agents that contribute, with unique names (letters and digits joined by single `-` or `_`). */
    agents,
    /** Picks the agent of each round; without one, the agents take turns. */
    coordinator: optional(agent),
    /** Writes the answer from the board; without one, the last contribution is the answer. */
    decider: optional(agent),
    /** Rounds at most (≥ 1, default 10). */
    maxRounds: int(1).pipe(withDefault(10)),
    /** Characters of the board an agent reads, newest first (≥ 100, default 12,000). */
    boardLimit: int(100).pipe(withDefault(12_000)),
    /** The coordinator's prompt template (`{agents}`, `{board}`, `{round}`). */
    coordinatorPrompt: template(["agents", "board", "round"]).pipe(withDefault(defaultCoordinatorPrompt)),
    /** A contributor's prompt template (`{board}`, `{instruction}`). */
    contributorPrompt: template(["board", "instruction"]).pipe(withDefault(defaultContributorPrompt)),
    /** The decider's prompt template (`{task}`, `{board}`). */
    deciderPrompt: template(["task", "board"]).pipe(withDefault(defaultDeciderPrompt))
  },
  agentOptions: ["agents.*", "coordinator", "decider"],
  program: (input, options) =>
    Effect.gen(function*() {
      const names = options.agents.map((agent) => agent.name)
      const byName = new Map(options.agents.map((agent) => [agent.name, agent]))
      const board: Array<Entry> = [{ kind: "task", author: "user", content: input.prompt }]
      const team = options.agents.map(describe).join("\n")
      let last = ""
      let next = 0
      let rounds = 0
      let deciding = false
      // A stopped run says whose text its output is: the decider's partial answer when it wrote one, else the last
      // contribution.
      const run = yield* Architecture.CurrentRun
      yield* Architecture.setMetadata(() => ({
        rounds,
        decided_by: deciding && run.output !== last ? "decider" : "last_contribution",
        board
      }))

      for (let round = 1; round <= options.maxRounds; round++) {
        let chosen: { readonly agent: string; readonly instruction: string } | undefined
        if (options.coordinator !== undefined) {
          const prompt = Architecture.fill(options.coordinatorPrompt, {
            agents: team,
            board: render(board, options.boardLimit),
            round: String(round)
          })
          let decided: Decided = { _tag: "Invalid", problem: "" }
          for (const attempt of [0, 1]) {
            const asked = yield* Architecture.role(
              options.coordinator,
              attempt === 0
                ? prompt
                : `${prompt}\n\nYour last answer could not be used: ${decided._tag === "Invalid" ? decided.problem : ""}. Answer with the JSON only.`,
              { role: "bb_coordinator", index: attempt === 0 ? round : `${round}_retry` }
            )
            decided = parseDecision(asked.output, names)
            if (decided._tag !== "Invalid") break
          }
          if (decided._tag === "Terminate") {
            yield* Architecture.progress("blackboard.decided", { round, terminate: true })
            break
          }
          if (decided._tag === "Agent") {
            chosen = decided
            yield* Architecture.progress("blackboard.decided", { round, agent: decided.agent, instruction: decided.instruction })
          } else {
            yield* Architecture.progress("blackboard.fallback", { round, problem: decided.problem, agent: names[next % names.length] })
          }
        }
        chosen ??= { agent: names[next % names.length]!, instruction: keepGoing }
        next = names.indexOf(chosen.agent) + 1
        const contributed = yield* Architecture.role(
          byName.get(chosen.agent)!,
          Architecture.fill(options.contributorPrompt, {
            board: render(board, options.boardLimit),
            instruction: chosen.instruction || keepGoing
          }),
          { role: `bb_${chosen.agent}`, index: round }
        )
        rounds = round
        const content = contributed.output
        if (content !== "") {
          board.push({ kind: "contribution", author: chosen.agent, content })
          last = content
          yield* Architecture.setOutput(last)
        }
        yield* Architecture.progress("blackboard.contribution", { round, agent: chosen.agent, content })
      }

      if (options.decider === undefined) return { output: last, metadata: { rounds, decided_by: "last_contribution", board } }
      deciding = true
      const decided = yield* Architecture.role(
        options.decider,
        Architecture.fill(options.deciderPrompt, { task: input.prompt, board: board.map(line).join("\n") }),
        { role: "bb_decider", answers: true }
      )
      return { output: decided.output, metadata: { rounds, decided_by: "decider", board } }
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
 * The options of Blackboard.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Blackboard with options, checked here: no agents, two agents with one name, a name that cannot be part of a
 * session id, `maxRounds: 0`, a `boardLimit` below 100 or a template with an unknown placeholder fail with
 * `InvalidOptions`.
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
