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
 *   architecture); a spent budget ends it interrupted (`budget:<limit>`) with the last contribution.
 *
 * Events: `blackboard.decided`, `blackboard.contribution`, `blackboard.fallback`.
 *
 * @since 0.2.0
 */
import { Effect, Result, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { decodeJson, yieldBeforeReading } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "blackboard"

/** The options of Blackboard. */
export interface Options<R, RC = never, RD = never> {
  /** The agents that contribute, with unique names (letters and digits joined by single `-` or `_`). */
  readonly agents: ReadonlyArray<Agent.Agent<R>>
  /** Picks the agent of each round; without one, the agents take turns. */
  readonly coordinator?: Agent.Agent<RC> | undefined
  /** Writes the answer from the board; without one, the last contribution is the answer. */
  readonly decider?: Agent.Agent<RD> | undefined
  /** Rounds at most (≥ 1, default 10). */
  readonly maxRounds?: number | undefined
  /** Characters of the board an agent reads, newest first (≥ 100, default 12,000). */
  readonly boardLimit?: number | undefined
  /** The coordinator's prompt (`{agents}`, `{board}`, `{round}`). */
  readonly coordinatorPrompt?: string | undefined
  /** A contributor's prompt (`{board}`, `{instruction}`). */
  readonly contributorPrompt?: string | undefined
  /** The decider's prompt (`{task}`, `{board}`). */
  readonly deciderPrompt?: string | undefined
}

export const defaultCoordinatorPrompt = `You coordinate a team working on a shared board. Team:
{agents}

The board (round {round}):
{board}

Choose who contributes next. Answer with JSON only: {"agent": "<name>", "instruction": "<what to add>"}, or \
{"terminate": true} when the board holds a complete answer.`

export const defaultContributorPrompt = `The shared board:
{board}

Your instruction: {instruction}

Add one contribution to the board: write only your contribution.`

export const defaultDeciderPrompt = `Task: {task}

The team's board:
{board}

Write the final answer to the task from the board.`

const OptionsSchema = Schema.Struct({
  agents: Opts.NamedAgents,
  coordinator: Schema.optional(Opts.AgentSchema),
  decider: Schema.optional(Opts.AgentSchema),
  maxRounds: Opts.IntAtLeast(1).pipe(Opts.withDefault(10)),
  boardLimit: Opts.IntAtLeast(100).pipe(Opts.withDefault(12_000)),
  coordinatorPrompt: Template.Template(["agents", "board", "round"]).pipe(Opts.withDefault(defaultCoordinatorPrompt)),
  contributorPrompt: Template.Template(["board", "instruction"]).pipe(Opts.withDefault(defaultContributorPrompt)),
  deciderPrompt: Template.Template(["task", "board"]).pipe(Opts.withDefault(defaultDeciderPrompt))
})
type Config = typeof OptionsSchema.Type

/**
 * Blackboard with options, checked here: no agents, two agents with one name, a name that cannot be part of a
 * session id, `maxRounds: 0`, a `boardLimit` below 100 or a template with an unknown placeholder fail with
 * `InvalidOptions`.
 */
export const make = <R, RC = never, RD = never>(
  options: Options<R, RC, RD>
): Effect.Effect<Architecture.Architecture<R | RC | RD | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("Blackboard", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<R | RC | RD | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <R, RC = never, RD = never>(options: Options<R, RC, RD>): Architecture.Architecture<R | RC | RD | Model.Model> =>
  Opts.runUnsafe(make(options))

// ---------------------------------------------------------------------------------------------------------
// The board and the coordinator
// ---------------------------------------------------------------------------------------------------------

/** One entry of the board. */
export interface Entry {
  readonly kind: "task" | "contribution"
  readonly author: string
  readonly content: string
}

const line = (entry: Entry): string => `[${entry.kind}] ${entry.author}: ${entry.content.replace(/\s*\n\s*/g, " ")}`

/** The board as an agent reads it: the task entry, then the newest entries that fit in `limit` characters. */
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

/** What a coordinator decided: an agent (with an instruction), to terminate, or why its answer cannot be used. */
export type Decided =
  | { readonly _tag: "Agent"; readonly agent: string; readonly instruction: string }
  | { readonly _tag: "Terminate" }
  | { readonly _tag: "Invalid"; readonly problem: string }

/** Reads a coordinator's answer. `terminate` counts only as the JSON boolean `true`. */
export const parseDecision = (text: string, names: ReadonlyArray<string>): Decided => {
  const decoded = decodeJson(Decision, text, { expect: "object" })
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
// Program
// ---------------------------------------------------------------------------------------------------------

const describe = (agent: Agent.Agent<unknown>): string => {
  const first = agent.instructions.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "") ?? "(no description)"
  return `- ${agent.name}: ${first.length <= 200 ? first : `${first.slice(0, 199)}…`}`
}

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const names = config.agents.map((agent) => agent.name)
    const byName = new Map(config.agents.map((agent) => [agent.name, agent]))
    const board: Array<Entry> = [{ kind: "task", author: "user", content: input.prompt }]
    const team = config.agents.map(describe).join("\n")
    let last = ""
    let next = 0
    const metadata = (rounds: number, decidedBy: string) => ({ rounds, decided_by: decidedBy, board })
    const budgetStop = (reason: string, rounds: number) => ({ output: last, interrupted: reason, metadata: metadata(rounds, "budget") })

    let rounds = 0
    for (let round = 1; round <= config.maxRounds; round++) {
      let chosen: { readonly agent: string; readonly instruction: string } | undefined
      if (config.coordinator !== undefined) {
        const prompt = Template.fill(config.coordinatorPrompt, { agents: team, board: render(board, config.boardLimit), round: String(round) })
        let decided: Decided = { _tag: "Invalid", problem: "" }
        for (const attempt of [0, 1]) {
          const asked = yield* Roles.runOrFail(
            config.coordinator,
            attempt === 0 ? prompt : `${prompt}\n\nYour last answer could not be used: ${decided._tag === "Invalid" ? decided.problem : ""}. Answer with the JSON only.`,
            { role: "bb_coordinator", index: attempt === 0 ? round : `${round}_retry` }
          )
          if (asked._tag === "Interrupted" && Roles.isBudget(asked.reason)) return budgetStop(asked.reason, rounds)
          yield* yieldBeforeReading(asked.result.output)
          decided = parseDecision(asked.result.output, names)
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
      chosen ??= { agent: names[next % names.length]!, instruction: "Add what the board still needs toward the task." }
      next = names.indexOf(chosen.agent) + 1
      const contributed = yield* Roles.runOrFail(
        byName.get(chosen.agent)!,
        Template.fill(config.contributorPrompt, { board: render(board, config.boardLimit), instruction: chosen.instruction || "Add what the board still needs toward the task." }),
        { role: `bb_${chosen.agent}`, index: round }
      )
      if (contributed._tag === "Interrupted" && Roles.isBudget(contributed.reason)) return budgetStop(contributed.reason, rounds)
      rounds = round
      const content = contributed.result.output
      if (content !== "") {
        board.push({ kind: "contribution", author: chosen.agent, content })
        last = content
        yield* Architecture.setOutput(last)
      }
      yield* Architecture.progress("blackboard.contribution", { round, agent: chosen.agent, content })
    }

    if (config.decider === undefined) return { output: last, metadata: metadata(rounds, "last_contribution") }
    const decided = yield* Roles.runOrFail(
      config.decider,
      Template.fill(config.deciderPrompt, { task: input.prompt, board: board.map(line).join("\n") }),
      { role: "bb_decider" }
    )
    if (decided._tag === "Interrupted") {
      return Roles.isBudget(decided.reason)
        ? budgetStop(decided.reason, rounds)
        : { output: decided.result.output, interrupted: Roles.stopReason("bb_decider", decided.reason), metadata: metadata(rounds, "decider") }
    }
    return { output: decided.result.output, metadata: metadata(rounds, "decider") }
  })
