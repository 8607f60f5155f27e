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

/** The JSON schema a UI renders a form from. */
export const schemaOf = (schema: Schema.Top): unknown => parametersSchema(schema)

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
    const decode = Schema.decodeUnknownResult(schema as unknown as Schema.Codec<A, unknown>)
    const check = (answer: unknown): Result.Result<unknown, string> =>
      // Depth first: an answer is any JSON value, and a deep one would overflow the decoder's stack.
      !valueDepthWithin(answer)
        ? Result.fail(`the answer nests deeper than ${maxJsonDepth} levels`)
        : Result.mapError(decode(answer), (issue) => formatSchemaError("the answer does not fit", issue, answer))
    const asked = Effect.flatMap(loop.value.ask(request, check), (answer) =>
      Result.isSuccess(answer) ? Effect.succeed(answer.success as A) : Effect.fail(unanswered(answer.failure)))
    if (timeout === undefined) return asked
    const limit = Duration.fromInputUnsafe(timeout)
    return Effect.flatMap(Effect.timeoutOption(asked, limit), (answer) =>
      Option.isSome(answer) ? Effect.succeed(answer.value) : Effect.fail(unanswered(`no answer within ${Duration.format(limit)}`)))
  })
