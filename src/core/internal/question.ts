/**
 * A question a run asks a person (`Architecture.ask`): asked through the `HumanLoop` in context, the answer decoded
 * by the question's schema (an answer that does not decode is refused to whoever gave it, and the question still
 * waits), within an optional timeout. The runtime emits the events; this file knows nothing of runs.
 */
import { Duration, Effect, Option, Result, Schema } from "effect"
import { Unanswered } from "../AgentError.js"
import * as HumanLoop from "./humanLoop.js"
import { formatSchemaError } from "./decode.js"
import { parametersSchema } from "./jsonSchema.js"
import { maxJsonDepth, valueDepthWithin } from "./parse.js"

/** Each run's questions are numbered: `q1`, `q2`, … (the same in a run replayed from its start). */
const counts = new WeakMap<object, number>()
export const nextId = (run: object): string => {
  const n = (counts.get(run) ?? 0) + 1
  counts.set(run, n)
  return `q${n}`
}

/**
 * The `call`s of tools that wait for a person themselves (`HumanLoop.askTool`): a durable run does not make them an
 * activity — an activity cannot suspend its run, and the question's own wait is durable — but runs them as they are.
 * (Keyed by the function: a tool's copies, `{ ...tool }`, keep it.)
 */
export const asksPeople = new WeakSet<object>()

/** The JSON schema a UI renders a form from. */
export const schemaOf = (schema: Schema.Top): unknown => parametersSchema(schema)

/**
 * What checks an answer against `schema`: the value the run gets, or why the answer does not fit (depth first: an
 * answer is any JSON value, and a deep one would overflow the decoder's stack).
 */
export const checkerOf = (schema: Schema.Top): (answer: unknown) => Result.Result<unknown, string> => {
  const decode = Schema.decodeUnknownResult(schema as unknown as Schema.Codec<unknown, unknown>)
  return (answer) =>
    !valueDepthWithin(answer)
      ? Result.fail(`the answer nests deeper than ${maxJsonDepth} levels`)
      : Result.mapError(decode(answer), (issue) => formatSchemaError("the answer does not fit", issue, answer))
}

/** Waits for the answer: the decoded value, or `Unanswered` naming why none came. */
export const wait = <A, I>(
  request: HumanLoop.QuestionRequest,
  schema: Schema.Codec<A, I>,
  timeout: Duration.Input | undefined
): Effect.Effect<A, Unanswered> =>
  Effect.flatMap(Effect.serviceOption(HumanLoop.HumanLoop), (loop) => {
    const unanswered = (reason: string) =>
      new Unanswered({ sessionId: request.sessionId, questionId: request.questionId, question: request.question, reason })
    if (Option.isNone(loop)) return Effect.fail(unanswered("nobody can answer it here (no HumanLoop in context)"))
    const check = checkerOf(schema)
    const answered = (answer: Result.Result<unknown, string>): Effect.Effect<A, Unanswered> =>
      Result.isSuccess(answer) ? Effect.succeed(answer.success as A) : Effect.fail(unanswered(answer.failure))
    if (timeout === undefined) return Effect.flatMap(loop.value.ask(request, check), answered)
    const limit = Duration.fromInputUnsafe(timeout)
    const late = unanswered(`no answer within ${Duration.format(limit)}`)
    // A loop with a clock of its own (a durable one keeps it in its store) times the wait itself.
    const within = loop.value.askWithin !== undefined
      ? loop.value.askWithin(request, check, limit)
      : Effect.timeoutOption(loop.value.ask(request, check), limit)
    return Effect.flatMap(within, (answer) => Option.isSome(answer) ? answered(answer.value) : Effect.fail(late))
  })
