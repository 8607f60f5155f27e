/**
 * Roles played by sub-agents (actor, critic, planner, worker…), as the reflective and multi-agent architectures
 * see them: a child run either completed, stopped early at a limit (its `interrupted` result, which the caller must
 * look at) or failed (`SubAgentFailed`). A spent budget travels up unchanged as `budget:<limit>`; any other stop is
 * reported under the role that stopped (`critic:round_2:max_turns_exceeded`). A failure is the caller's failure
 * (`runOrFail`) unless the architecture documents a recovery (`run`: Ensemble, Supervisor, ToolVote).
 */
import { Effect } from "effect"
import * as Agent from "../Agent.js"
import type { InvalidOptions, SessionConflict, SubAgentFailed } from "../AgentError.js"
import type * as AgentEvent from "../AgentEvent.js"
import type * as Architecture from "../Architecture.js"

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
  Agent.with_(agent as Agent.Agent<unknown>, { architecture }) as unknown as Agent.Agent<R>
