/**
 * The errors an agent run can fail with: every `ModelError`, plus the failures of the run itself. A spent
 * budget is *not* among the failures a user sees: `Agent.run` turns `BudgetExhausted` into an interrupted
 * `RunResult` that keeps the best output so far.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, AgentError, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({ name: "astronomer", instructions: "Answer in JSON." })
 * const Moons = Schema.Struct({ moons: Schema.Int })
 *
 * // No answer decodes (the first and two repairs): the run fails with `OutputInvalid`, which is handled by its tag.
 * const moons = Agent.run(agent, "How many moons has Mars?", { output: Moons }).pipe(
 *   Effect.map((result) => result.value.moons),
 *   Effect.catchTag("OutputInvalid", (error) => Effect.fail(`no answer after ${error.attempts} attempts: ${error.error}`)),
 *   Effect.provide(ScriptedModel.layer(["two", "Two.", "two moons"]))
 * )
 *
 * // Every error is a schema too, so a failure crosses JSON (SSE, logs) and comes back typed.
 * const json = Schema.encodeSync(AgentError.AgentError)(new AgentError.InvalidOptions({ module: "Budget", message: "maxCalls must be >= 0" }))
 * ```
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as ModelError from "./ModelError.js"

/**
 * A budget limit was reached before a model call could be sent. Architectures see it in the error channel of
 * `Architecture.generate`; the run boundary turns it into an interruption with reason `budget:<limit>`.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {
  limit: Schema.String,
  used: Schema.Number,
  max: Schema.Number
}) {
  override get message(): string {
    return `budget exhausted: ${this.limit} (${this.used} of ${this.max})`
  }
  /** The interruption reason a run reports: `budget:<limit>`. */
  get reason(): string {
    return `budget:${this.limit}`
  }
}

/**
 * An agent cannot run as defined (an invalid tool name, `maxTurns` below 1, a bad session id…).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidAgent extends Schema.TaggedError<InvalidAgent>()("InvalidAgent", {
  agent: Schema.String,
  message: Schema.String
}) {}

/**
 * An architecture or budget was given options it cannot work with; `module` names which.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("InvalidOptions", {
  module: Schema.String,
  message: Schema.String
}) {}

/**
 * Two sub-runs of one parent asked for the same child session id, which would mix their events.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionConflict extends Schema.TaggedError<SessionConflict>()("SessionConflict", {
  sessionId: Schema.String
}) {
  override get message(): string {
    return `a sub-run with session id ${this.sessionId} already ran in this parent; give each child its own role / index`
  }
}

/**
 * An architecture could not go on for a reason of its own (a plan with a dependency cycle…).
 *
 * @since 0.1.0
 * @category errors
 */
export class ArchitectureFailed extends Schema.TaggedError<ArchitectureFailed>()("ArchitectureFailed", {
  architecture: Schema.String,
  message: Schema.String
}) {}

/**
 * A sub-agent failed; `error` is its own failure. A parent reports this instead of pretending the child answered
 * with nothing.
 *
 * @since 0.1.0
 * @category errors
 */
export class SubAgentFailed extends Schema.TaggedError<SubAgentFailed>()("SubAgentFailed", {
  sessionId: Schema.String,
  role: Schema.String,
  error: Schema.suspend((): Schema.Codec<AgentError, AgentErrorEncoded> => AgentError)
}) {
  override get message(): string {
    return `sub-agent ${this.sessionId} (${this.role}) failed: ${this.error.message}`
  }
  /** A short reason for an interruption message: the innermost error's tag (`RateLimited`, `ScriptExhausted`…). */
  get reason(): string {
    return this.error._tag === "SubAgentFailed" ? this.error.reason : this.error._tag
  }
}

/**
 * A run asked for structured output (`Agent.run(…, { output: schema })`) and its answer did not decode, even after
 * `attempts` tries (the first answer and the repairs): `text` is the last answer, `error` why it did not decode.
 *
 * @since 0.2.0
 * @category errors
 */
export class OutputInvalid extends Schema.TaggedError<OutputInvalid>()("OutputInvalid", {
  sessionId: Schema.String,
  attempts: Schema.Int,
  text: Schema.String,
  error: Schema.String
}) {
  override get message(): string {
    return `the answer of ${this.sessionId} does not match the output schema after ${this.attempts} attempts: ${this.error}`
  }
}

/**
 * A Router could not route a task: the classifier named no route, an unknown one, or one below `minConfidence`,
 * and there is no fallback. `answer` is what the classifier wrote (cut short), `reason` why it was refused.
 *
 * @since 0.2.0
 * @category errors
 */
export class Unroutable extends Schema.TaggedError<Unroutable>()("Unroutable", {
  sessionId: Schema.String,
  answer: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.sessionId} could not be routed (${this.reason}); the classifier answered: ${JSON.stringify(this.answer)}`
  }
}

/**
 * A ReWOO planner's plan could not be run, even after it was shown the problem once: an unknown tool, a duplicate
 * step id, a reference to an unknown step, or a cycle. `problem` names it.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidPlan extends Schema.TaggedError<InvalidPlan>()("InvalidPlan", {
  sessionId: Schema.String,
  problem: Schema.String
}) {
  override get message(): string {
    return `the plan of ${this.sessionId} cannot run: ${this.problem}`
  }
}

/**
 * A question the run asked a person (`Architecture.ask`) got no answer: nobody to ask (no `HumanLoop` in
 * context), or its timeout passed.
 *
 * @since 0.2.0
 * @category errors
 */
export class Unanswered extends Schema.TaggedError<Unanswered>()("Unanswered", {
  sessionId: Schema.String,
  questionId: Schema.String,
  question: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.sessionId} asked ${JSON.stringify(this.question)} and got no answer: ${this.reason}`
  }
}

/**
 * A guardrail tripped (`Guardrail`): `guardrail` names it, `kind` says where it ran (`input`, `output`, `tool`),
 * `reason` is its own word for why. An input guardrail's trip interrupts the run's first model call; an output
 * one's fails the run (after its repair round, when asked for); a tool one's when the run asked for `onToolTrip: "fail"`.
 *
 * @since 0.2.0
 * @category errors
 */
export class GuardrailTripped extends Schema.TaggedError<GuardrailTripped>()("GuardrailTripped", {
  sessionId: Schema.String,
  guardrail: Schema.String,
  kind: Schema.Literals(["input", "output", "tool"]),
  reason: Schema.String
}) {
  override get message(): string {
    return `guardrail ${this.guardrail} (${this.kind}) tripped in ${this.sessionId}: ${this.reason}`
  }
}

/**
 * A guardrail could not check (its own effect failed: a judge whose model is down, a check that threw): the run
 * fails with this, since a check that did not run is no pass. `error` is the guardrail's error, as text.
 *
 * @since 0.2.0
 * @category errors
 */
export class GuardrailFailed extends Schema.TaggedError<GuardrailFailed>()("GuardrailFailed", {
  sessionId: Schema.String,
  guardrail: Schema.String,
  kind: Schema.Literals(["input", "output", "tool"]),
  error: Schema.String
}) {
  override get message(): string {
    return `guardrail ${this.guardrail} (${this.kind}) failed in ${this.sessionId}: ${this.error}`
  }
}

/**
 * A remote agent (an A2A agent used as a valet agent, `A2A.agent`) failed: `url` is the agent's card or endpoint,
 * `code` the JSON-RPC error code it answered, or the HTTP status of a non-2xx answer, or 0 when neither applies (a
 * broken connection, an answer that is not A2A, a task that failed), `reason` a short word for what went wrong
 * (`http`, `json_rpc`, `no_jsonrpc_interface`, `task_failed`, `task_rejected`, `task_canceled`, `transport`,
 * `malformed`, `stream_lost`, `timeout`), and `detail` the remote's own one line.
 *
 * @since 0.2.0
 * @category errors
 */
export class RemoteAgentFailed extends Schema.TaggedError<RemoteAgentFailed>()("RemoteAgentFailed", {
  url: Schema.String,
  code: Schema.Number,
  reason: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `remote agent ${this.url} failed (${this.reason}${this.code !== 0 ? ` ${this.code}` : ""}): ${this.detail}`
  }
}

/**
 * Every error an agent run can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type AgentError =
  | ModelError.ModelError
  | BudgetExhausted
  | InvalidAgent
  | InvalidOptions
  | SessionConflict
  | ArchitectureFailed
  | SubAgentFailed
  | OutputInvalid
  | Unroutable
  | InvalidPlan
  | Unanswered
  | GuardrailTripped
  | GuardrailFailed
  | RemoteAgentFailed

/**
 * The JSON form of an `AgentError`.
 *
 * @since 0.1.0
 * @category errors
 */
export type AgentErrorEncoded = typeof ModelError.ModelError.Encoded | {
  readonly _tag: "BudgetExhausted"
  readonly limit: string
  readonly used: number
  readonly max: number
} | {
  readonly _tag: "InvalidAgent"
  readonly agent: string
  readonly message: string
} | {
  readonly _tag: "InvalidOptions"
  readonly module: string
  readonly message: string
} | {
  readonly _tag: "SessionConflict"
  readonly sessionId: string
} | {
  readonly _tag: "ArchitectureFailed"
  readonly architecture: string
  readonly message: string
} | {
  readonly _tag: "SubAgentFailed"
  readonly sessionId: string
  readonly role: string
  readonly error: AgentErrorEncoded
} | {
  readonly _tag: "OutputInvalid"
  readonly sessionId: string
  readonly attempts: number
  readonly text: string
  readonly error: string
} | {
  readonly _tag: "Unroutable"
  readonly sessionId: string
  readonly answer: string
  readonly reason: string
} | {
  readonly _tag: "InvalidPlan"
  readonly sessionId: string
  readonly problem: string
} | {
  readonly _tag: "Unanswered"
  readonly sessionId: string
  readonly questionId: string
  readonly question: string
  readonly reason: string
} | {
  readonly _tag: "GuardrailTripped"
  readonly sessionId: string
  readonly guardrail: string
  readonly kind: "input" | "output" | "tool"
  readonly reason: string
} | {
  readonly _tag: "GuardrailFailed"
  readonly sessionId: string
  readonly guardrail: string
  readonly kind: "input" | "output" | "tool"
  readonly error: string
} | {
  readonly _tag: "RemoteAgentFailed"
  readonly url: string
  readonly code: number
  readonly reason: string
  readonly detail: string
}

/**
 * The schema of `AgentError`, so failures cross JSON boundaries (SSE, workflows, logs) and come back typed.
 *
 * @since 0.1.0
 * @category errors
 */
export const AgentError: Schema.Codec<AgentError, AgentErrorEncoded> = Schema.Union([
  ModelError.ModelError,
  BudgetExhausted,
  InvalidAgent,
  InvalidOptions,
  SessionConflict,
  ArchitectureFailed,
  SubAgentFailed,
  OutputInvalid,
  Unroutable,
  InvalidPlan,
  Unanswered,
  GuardrailTripped,
  GuardrailFailed,
  RemoteAgentFailed
])
