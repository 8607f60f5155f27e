/**
 * Questions that wait durably (DESIGN §15): inside a durable run, `Architecture.ask` and the `ask_human` tool wait
 * (`waits.ts`) for an answer given from any process on the same store. Whoever answers checks the answer against
 * the question's JSON schema (stored with it: that process may not have the run's code) and is refused with the
 * decode error when it does not fit; the run decodes it again with the question's own schema when it wakes, and when
 * that refuses what the JSON schema let through (a check JSON Schema cannot say), it asks again: the question waits
 * anew under the same id (`#2`), its timeout counted again.
 */
import { type Duration, Effect, Option, Result, Schema, SchemaRepresentation } from "effect"
import type { Workflow, WorkflowEngine } from "effect/workflow"
import * as HumanLoop from "../../../core/HumanLoop.js"
import { maxJsonDepth, valueDepthWithin } from "../../../core/internal/parse.js"
import { checkerOf } from "../../../core/internal/question.js"
import type { WorkflowContext } from "./activities.js"
import type { HumanLoopStore, Row, Store } from "./humanLoopStore.js"
import * as Waits from "./waits.js"

/** What a waiting question resumes with, as stored on its deferred (changing it breaks runs waiting on the old one). */
export const Outcome = Schema.Union([
  Schema.TaggedStruct("Answered", { answer: Schema.Json }),
  Schema.TaggedStruct("Dismissed", { reason: Schema.String })
])

/** What a waiting question's row keeps of it (its `request`). */
const Asked = Schema.fromJsonString(Schema.Struct({ question: Schema.String, schema: Schema.Json }))
const encodeAsked = Schema.encodeSync(Asked)
const decodeAsked = Schema.decodeUnknownSync(Asked)

/** The question a row waits on, as `HumanLoop` lists it. */
export const requestOf = (row: Row): HumanLoop.QuestionRequest => ({
  sessionId: row.sessionId,
  questionId: row.requestId,
  ...decodeAsked(row.request),
  requestedAt: row.requestedAt
})

/**
 * Waits durably for the answer to `request` of run `runId`: the value `check` makes of it, or why none came
 * (dismissed); `None` when `timeout` passed first.
 */
export const ask = (
  store: Store,
  execution: Waits.Execution,
  run: { readonly runId: string; readonly agent: string },
  request: HumanLoop.QuestionRequest,
  check: (answer: unknown) => Result.Result<unknown, string>,
  timeout: Duration.Duration | undefined
): Effect.Effect<Option.Option<Result.Result<unknown, string>>, never, WorkflowContext> =>
  Effect.gen(function*() {
    while (true) {
      const outcome = yield* Waits.wait(
        store,
        execution,
        {
          runId: run.runId,
          kind: "question",
          key: execution.keyOf("question", request.sessionId, request.questionId),
          sessionId: request.sessionId,
          requestId: request.questionId,
          agent: run.agent,
          request: encodeAsked({ question: request.question, schema: (request.schema ?? {}) as Schema.Json }),
          requestedAt: request.requestedAt
        },
        Outcome,
        timeout
      )
      if (Option.isNone(outcome)) return Option.none()
      if (outcome.value._tag === "Dismissed") return Option.some(Result.fail(outcome.value.reason))
      const value = check(outcome.value.answer)
      if (Result.isSuccess(value)) return Option.some(value)
      yield* Effect.logWarning(`durable run ${run.runId}: the answer to ${request.questionId} does not fit its schema (${value.failure}); asking again`)
    }
  })

/**
 * The check of an answer by a question's stored JSON schema, as Effect's `SchemaRepresentation` reads it back (a
 * schema it cannot read checks nothing here: the run checks the answer when it wakes).
 */
const checkOfStored = (schema: unknown): (answer: unknown) => Result.Result<unknown, string> => {
  try {
    const { $defs, ...root } = (typeof schema === "object" && schema !== null ? schema : {}) as Record<string, unknown>
    const document = { dialect: "draft-2020-12" as const, schema: root, definitions: ($defs ?? {}) as Record<string, never> }
    return checkerOf(SchemaRepresentation.fromJsonSchemaDocument(document))
  } catch {
    return Result.succeed
  }
}

const isJson = Schema.is(Schema.Json)

/**
 * Answers (or, with `dismissed`, dismisses) a waiting question of durable run `runId` from any process on the store:
 * an answer its stored schema refuses is `InvalidDecision` with the decode error, and the question still waits.
 */
export const settle = <W extends Workflow.Any>(
  workflow: W,
  executionId: string,
  runId: string,
  questionId: string,
  how: { readonly answer: unknown } | { readonly dismissed: string },
  sessionId: string | undefined
): Effect.Effect<HumanLoop.QuestionRequest, HumanLoop.DecideError, HumanLoopStore | WorkflowEngine.WorkflowEngine> =>
  Effect.map(
    Waits.settle(workflow, executionId, {
      runId,
      kind: "question",
      id: questionId,
      sessionId,
      outcome: Outcome,
      prepare: (row) => {
        if ("dismissed" in how) return Effect.succeed({ _tag: "Dismissed" as const, reason: how.dismissed })
        const refused = (message: string) => Effect.fail(new HumanLoop.InvalidDecision({ toolCallId: questionId, message: `answer: ${message}` }))
        if (!valueDepthWithin(how.answer)) return refused(`the answer nests deeper than ${maxJsonDepth} levels`)
        if (!isJson(how.answer)) return refused("not a JSON value")
        const checked = checkOfStored(requestOf(row).schema)(how.answer)
        return Result.isFailure(checked) ? refused(checked.failure) : Effect.succeed({ _tag: "Answered" as const, answer: how.answer })
      }
    }),
    requestOf
  )
