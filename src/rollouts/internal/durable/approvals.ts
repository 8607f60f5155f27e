/**
 * Approvals that wait durably (DESIGN §15): inside a durable run, a call that needs a person's decision is a wait
 * (`waits.ts`) the workflow suspends on; the decision, made from any process on the same store, wakes the run
 * wherever it is served. The run then runs the call (an activity: once) or answers the rejection.
 */
import { type Duration, Effect, Option, Result, Schema } from "effect"
import type { Workflow, WorkflowEngine } from "effect/workflow"
import * as HumanLoop from "../../../core/HumanLoop.js"
import type { WorkflowContext } from "./activities.js"
import type { HumanLoopStore, Row, Store } from "./humanLoopStore.js"
import * as Waits from "./waits.js"

/** What a waiting call resumes with, as stored on its deferred (changing it breaks runs waiting on the old one). */
export const Resolution = Schema.Struct({
  approved: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  arguments: Schema.String,
  edited: Schema.Boolean
})

/** What a waiting call's row keeps of it (its `request`). */
const Requested = Schema.fromJsonString(Schema.Struct({ name: Schema.String, arguments: Schema.String }))
const encodeRequested = Schema.encodeSync(Requested)
const decodeRequested = Schema.decodeUnknownSync(Requested)

/** The call a row waits on, as `HumanLoop` lists it. */
export const requestOf = (row: Row): HumanLoop.ApprovalRequest => ({
  sessionId: row.sessionId,
  toolCallId: row.requestId,
  ...decodeRequested(row.request),
  requestedAt: row.requestedAt
})

/**
 * Waits durably for the decision on `request` of run `runId` (started for `agent`): `None` when `timeout` passed
 * first. An approved call of one of the execution's tools holds it busy until the tool's activity starts.
 */
export const waitFor = (
  store: Store,
  execution: Waits.Execution,
  run: { readonly runId: string; readonly agent: string },
  request: HumanLoop.ApprovalRequest,
  timeout: Duration.Duration | undefined
): Effect.Effect<Option.Option<HumanLoop.Resolution>, never, WorkflowContext> =>
  Waits.wait(
    store,
    execution,
    {
      runId: run.runId,
      kind: "approval",
      key: execution.keyOf("approval", request.sessionId, request.toolCallId),
      sessionId: request.sessionId,
      requestId: request.toolCallId,
      agent: run.agent,
      request: encodeRequested({ name: request.name, arguments: request.arguments }),
      requestedAt: request.requestedAt
    },
    Resolution,
    timeout,
    (resolution) => {
      const handsOff = resolution.approved && execution.tools.has(request.name)
      if (handsOff) execution.handOff(request.sessionId, request.toolCallId)
      return handsOff
    }
  )

/** The `Result` a tool's check gives, as the error `decide` fails with. */
const checked = (toolCallId: string, result: Result.Result<string, string>): Effect.Effect<string, HumanLoop.InvalidDecision> =>
  Result.isSuccess(result)
    ? Effect.succeed(result.success)
    : Effect.fail(new HumanLoop.InvalidDecision({ toolCallId, message: `arguments: ${result.failure}` }))

/**
 * Decides a waiting call of durable run `runId` from any process on the store. `checkOf` finds the tool's check for
 * edited arguments (by the run's agent and the tool's name): they are checked before anything changes.
 */
export const decide = <W extends Workflow.Any>(
  workflow: W,
  executionId: string,
  runId: string,
  toolCallId: string,
  decision: HumanLoop.Decision,
  options: {
    readonly sessionId?: string | undefined
    readonly checkOf: (agent: string, tool: string) => Effect.Effect<Option.Option<(value: unknown) => Result.Result<string, string>>>
  }
): Effect.Effect<HumanLoop.ApprovalRequest, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.map(
    Waits.settle(workflow, executionId, {
      runId,
      kind: "approval",
      id: toolCallId,
      sessionId: options.sessionId,
      outcome: Resolution,
      prepare: (row) =>
        Effect.gen(function*() {
          const request = requestOf(row)
          const edited = decision.approved && decision.arguments !== undefined
          let argumentsText = request.arguments
          if (edited) {
            const check = yield* options.checkOf(row.agent, request.name)
            if (Option.isNone(check)) {
              return yield* new HumanLoop.InvalidDecision({
                toolCallId,
                message: `arguments: cannot check edited arguments here: this process does not know tool ${JSON.stringify(request.name)} of agent ${JSON.stringify(row.agent)} (pass its agents)`
              })
            }
            argumentsText = yield* checked(toolCallId, check.value(decision.arguments))
          }
          return {
            approved: decision.approved,
            ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
            arguments: argumentsText,
            edited
          }
        })
    }),
    requestOf
  )
