/**
 * Roles played by sub-agents (actor, critic, planner, worker…), as the reflective and multi-agent architectures
 * see them: a child run either completed, stopped early at a limit (its `interrupted` result, which the caller must
 * look at) or failed (`SubAgentFailed`). A spent budget travels up unchanged as `budget:<limit>`; any other stop is
 * reported under the role that stopped (`critic:round_2:max_turns_exceeded`). A failure is the caller's failure
 * (`runOrFail`) unless the architecture documents a recovery (`run`: Ensemble, Supervisor, ToolVote, a
 * Plan-and-Execute step, a Reflexion attempt).
 */
import { Effect } from "effect"
import * as Agent from "../Agent.js"
import type { InvalidOptions, SessionConflict, SubAgentFailed } from "../AgentError.js"
import type * as AgentEvent from "../AgentEvent.js"
import { yieldBeforeReading } from "./parse.js"
import * as Architecture from "./runtime.js"

/** How a sub-agent's run ended. */
export type Ran =
  | { readonly _tag: "Completed"; readonly result: AgentEvent.RunResult }
  | { readonly _tag: "Interrupted"; readonly result: AgentEvent.RunResult; readonly reason: string }
  | { readonly _tag: "Failed"; readonly error: SubAgentFailed; readonly reason: string }

/** Runs a sub-agent and says how it ended; only misuse (a bad role, a session clash) fails. */
export const run = <R>(
  agent: Agent.Agent<R>,
  prompt: string,
  options: Agent.ChildOptions
): Effect.Effect<Ran, InvalidOptions | SessionConflict, R | Architecture.CurrentRun> =>
  Agent.runChild(agent, prompt, options).pipe(
    Effect.map((result): Ran =>
      result.interrupted
        ? { _tag: "Interrupted", result, reason: result.interruptionReason ?? "interrupted" }
        : { _tag: "Completed", result }
    ),
    // As `role`: a long reply is read after a turn of the event loop.
    Effect.tap((ran) => (ran._tag === "Failed" ? Effect.void : yieldBeforeReading(ran.result.output))),
    Effect.catchTag("SubAgentFailed", (error) => Effect.succeed<Ran>({ _tag: "Failed", error, reason: error.reason }))
  )

/** How a sub-agent's run ended, when its failure is the caller's. */
export type Ended = Exclude<Ran, { readonly _tag: "Failed" }>

/**
 * Runs a sub-agent whose failure is the caller's: the run fails with the child's `SubAgentFailed` (the rule of
 * every architecture, unless it documents a recovery); completed or stopped at a limit, it answers how.
 */
export const runOrFail = <R>(
  agent: Agent.Agent<R>,
  prompt: string,
  options: Agent.ChildOptions
): Effect.Effect<Ended, InvalidOptions | SessionConflict | SubAgentFailed, R | Architecture.CurrentRun> =>
  Effect.flatMap(run(agent, prompt, options), (ran) => (ran._tag === "Failed" ? Effect.fail(ran.error) : Effect.succeed(ran)))

/** Options of `role`: the child's role and index (its session id), and how a stop is reported. */
export interface RoleOptions extends Agent.ChildOptions {
  /**
   * The prefix of the run's interruption reason when this role stops at a limit: by default the role, and
   * `round_<index>` when there is an index (`critic:round_2:max_turns_exceeded`). A spent budget is reported as it is.
   */
  readonly label?: string | undefined
  /**
   * This role writes the run's answer (a judge, a synthesizer, the chosen route, a base run doing the task): when it
   * stops, its partial output, if it wrote any, is the run's. Otherwise the run keeps its best output so far
   * (`setOutput`): a critic's or an evaluator's half-written reply is never the run's answer.
   */
  readonly answers?: boolean | undefined
}

/**
 * Runs a sub-agent in a role whose failure is the caller's and whose stop at a limit ends the run: completed, its
 * result (a long reply read after a turn of the event loop, so that many replies of megabytes do not hold it);
 * stopped, the run ends there (`RoleStopped`, which the runtime turns into the run's interrupted outcome with its
 * best output so far); failed, the run fails with the child's `SubAgentFailed`.
 */
export const role = <R>(
  agent: Agent.Agent<R>,
  prompt: string,
  options: RoleOptions
): Effect.Effect<AgentEvent.RunResult, InvalidOptions | SessionConflict | SubAgentFailed | Architecture.RoleStopped, R | Architecture.CurrentRun> =>
  Effect.flatMap(runOrFail(agent, prompt, options), (ended) => {
    if (ended._tag === "Completed") return Effect.as(yieldBeforeReading(ended.result.output), ended.result)
    const label = options.label ?? (options.index === undefined ? options.role : `${options.role}:round_${options.index}`)
    return Architecture.CurrentRun.use((run) => {
      const state = Architecture.stateOf(run)
      // An empty partial is no answer: it never replaces the run's best output (a judge refused its first call by a
      // spent budget leaves the run's answer so far).
      if (options.answers === true && ended.result.output !== "") state.output = ended.result.output
      return Effect.fail(new Architecture.RoleStopped({ reason: stopReason(label, ended.reason) }))
    })
  })

/** Whether an interruption reason is a spent budget. */
export const isBudget = (reason: string): boolean => reason.startsWith("budget:")

/** The reason a parent reports for a child that stopped: a budget reason as it is, anything else under `label`. */
export const stopReason = (label: string, reason: string): string => (isBudget(reason) ? reason : `${label}:${reason}`)

/** A plain agent for a role whose prompt template says everything; it uses the `Model` in context. */
export const plain = (name: string): Agent.Agent<never> =>
  // Cast: `Agent.make` types a model-less agent as needing `Model`; the architectures that use it add `Model`
  // to their own requirements.
  Agent.make({ name, instructions: "" }) as unknown as Agent.Agent<never>

/**
 * The agent running the architecture, with another architecture: the role that does the task itself (a base
 * run, an executor step, an attempt) keeps the agent's instructions, tools, turn limit and model.
 */
export const withArchitecture = <R>(
  agent: Architecture.AgentDefinition,
  architecture: Architecture.Architecture<R>
): Agent.Agent<R> =>
  // Casts: a run's agent (an `AgentDefinition` in `Architecture.Input`) is always an `Agent`, and its own
  // requirements (its tools') are already provided by whoever runs it.
  Agent.clone(agent as Agent.Agent<unknown>, { architecture }) as unknown as Agent.Agent<R>
