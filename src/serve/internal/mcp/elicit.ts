/**
 * The person behind an MCP client as the `HumanLoop` of the runs it started: a tool call waiting for approval, or a
 * question a run asks, becomes an `elicitation/create` request (form mode) to the client that called the agent's
 * tool, and the client's answer decides the call or answers the question.
 *
 * The request goes through `McpServerClient.getClient` → `elicit`, not effect's `McpServer.elicit`: that one dies
 * on content that does not decode and interrupts on `cancel`, where here a bad answer is said to the client and
 * asked again (at most `maxAttempts` times), and a decline or a cancel is a rejection (a dismissed question) whose
 * reason the model reads. A client that cannot be asked (no elicitation capability, protocol 2025-03-26, no session,
 * or its answer failed) gets the same: the MCP call still returns a result, never hangs on a question nobody sees —
 * unless someone else may decide (the app's own `HumanLoop`), who then does, within the call's timeout.
 *
 * Each waiting call or question elicits on its own fiber, so the parallel calls of one turn are asked at once; a
 * wait that ends otherwise (the run interrupted by the client's `notifications/cancelled` or a closed session, a
 * timeout, a decision made elsewhere) interrupts its elicitation.
 */
import { type Duration, Effect, Option, Result, Schema } from "effect"
import { McpSchema } from "effect/ai"
import { describeIssue } from "../../../core/internal/decode.js"
import { jsonEqual } from "../../../core/internal/json.js"
import { parseJson } from "../../../core/internal/parse.js"
import type * as HumanLoop from "../../../core/HumanLoop.js"

/** How many times a client is asked before its answers are given up on (the first answer and two corrections). */
export const maxAttempts = 3

/** Arguments longer than this are not offered for editing in the form (the client's answer would carry them back). */
const maxEditableChars = 64 * 1024

/** What the message of a form shows of the arguments, at most. */
const maxShownChars = 2_000

/** The reason the model reads when the person declined. */
export const declinedReason = "declined by the MCP client"

/** The reason the model reads when the person dismissed the form without choosing. */
export const cancelledReason = "cancelled by the MCP client"

/** What came of one elicitation: the form's content, or why there is none (`unable`: the client could not be asked). */
type Asked =
  | { readonly _tag: "Accepted"; readonly content: Readonly<Record<string, unknown>> }
  | { readonly _tag: "Refused"; readonly reason: string; readonly unable: boolean }

const refused = (reason: string, unable: boolean): Asked => ({ _tag: "Refused", reason, unable })

const causeText = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "object" && cause !== null && "message" in cause ? String(cause.message) : String(cause)

/** Sends one form to the client and waits for its answer; every outcome is an `Asked`, nothing fails. */
const elicit = (
  client: Option.Option<McpSchema.McpServerClient["Service"]>,
  form: Result.Result<McpSchema.ElicitRequestFormParams, string>
): Effect.Effect<Asked> => {
  if (Option.isNone(client)) return Effect.succeed(refused("the MCP client cannot answer: this request has no session to ask on", true))
  if (Result.isFailure(form)) return Effect.succeed(refused(`valet could not build the form to ask the MCP client: ${form.failure}`, true))
  return Effect.scoped(Effect.flatMap(client.value.getClient, (reverse) => reverse.elicit(form.success))).pipe(
    Effect.map((result): Asked =>
      result.action === "accept"
        ? { _tag: "Accepted", content: result.content ?? {} }
        : refused(result.action === "decline" ? declinedReason : cancelledReason, false)
    ),
    Effect.catchTags({
      McpReverseOperationUnsupported: (error) =>
        Effect.succeed(refused(`the MCP client cannot answer (elicitation not supported: ${error.reason})`, true)),
      McpReverseOperationError: (error) => Effect.succeed(refused(`the MCP client could not be asked: ${causeText(error.cause)}`, true))
    })
  )
}

const decodeForm = Schema.decodeUnknownResult(McpSchema.ElicitRequestFormParams)

/** A form-mode request, checked by effect's schema of one (which the client's SDK checks too). */
const formOf = (
  message: string,
  properties: Readonly<Record<string, unknown>>,
  required: ReadonlyArray<string>
): Result.Result<McpSchema.ElicitRequestFormParams, string> => {
  const params = { mode: "form", message, requestedSchema: { type: "object", properties, ...(required.length > 0 ? { required } : {}) } }
  return Result.mapError(decodeForm(params), (error) => describeIssue(error.issue, params))
}

const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

const retryNote = (problem: string | undefined) => (problem === undefined ? "" : `Your last answer did not fit: ${problem}\n\n`)

// ---------------------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------------------

/** The form that asks for a decision on `request` of the agent `agent` (`problem`: why the last answer was refused). */
export const approvalForm = (agent: string, request: HumanLoop.ApprovalRequest, problem?: string) =>
  formOf(
    `${retryNote(problem)}The agent ${agent} wants to call the tool ${request.name} with ${cut(request.arguments, maxShownChars)}. Approve this call?`,
    {
      approve: { type: "boolean", title: "Approve", description: `Run ${request.name} (unchecked: the call is rejected).` },
      reason: { type: "string", title: "Reason", description: "Why (the agent reads it)." },
      arguments: {
        type: "string",
        title: "Arguments",
        description: "The arguments as JSON: change them to run the tool with others, or leave them.",
        ...(request.arguments.length <= maxEditableChars ? { default: request.arguments } : {})
      }
    },
    ["approve"]
  )

const ApprovalContent = Schema.Struct({
  approve: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.String)
})
const decodeApproval = Schema.decodeUnknownResult(ApprovalContent)

/** The model's arguments, unchanged: the same text, blank, or the same JSON value written otherwise. */
const unchanged = (text: string, original: string): boolean => {
  if (text.trim() === "" || text === original) return true
  const [a, b] = [parseJson(text), parseJson(original)]
  return Result.isSuccess(a) && Result.isSuccess(b) && jsonEqual(a.success, b.success)
}

/** What an accepted form decides, or why it does not fit (the client is asked again with that). */
const resolutionOf = (
  request: HumanLoop.ApprovalRequest,
  check: (value: unknown) => Result.Result<string, string>,
  content: Readonly<Record<string, unknown>>
): Result.Result<HumanLoop.Resolution, string> => {
  const decoded = decodeApproval(content)
  if (Result.isFailure(decoded)) return Result.fail(describeIssue(decoded.failure.issue, content))
  const { approve, arguments: text } = decoded.success
  const reason = decoded.success.reason?.trim() === "" ? undefined : decoded.success.reason
  const given = reason !== undefined ? { reason } : {}
  if (!approve) return Result.succeed({ approved: false, reason: reason ?? "rejected on the MCP client", arguments: request.arguments, edited: false })
  if (text === undefined || unchanged(text, request.arguments)) {
    return Result.succeed({ approved: true, ...given, arguments: request.arguments, edited: false })
  }
  const parsed = parseJson(text)
  if (Result.isFailure(parsed)) return Result.fail(`arguments must be JSON: ${parsed.failure}`)
  // The tool's schema decides edited arguments, as for any other decision (`HumanLoop.decide`).
  const checked = check(parsed.success)
  return Result.isFailure(checked)
    ? Result.fail(`arguments: ${checked.failure}`)
    : Result.succeed({ approved: true, ...given, arguments: checked.success, edited: true })
}

/** Asks the client about `request` until an answer fits (at most `maxAttempts` times). `None`: it cannot be asked. */
const decideBy = (
  client: Option.Option<McpSchema.McpServerClient["Service"]>,
  agent: string,
  request: HumanLoop.ApprovalRequest,
  check: (value: unknown) => Result.Result<string, string>
): Effect.Effect<Result.Result<HumanLoop.Resolution, { readonly unable: string }>> =>
  Effect.gen(function*() {
    const rejected = (reason: string): HumanLoop.Resolution => ({ approved: false, reason, arguments: request.arguments, edited: false })
    let problem: string | undefined
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      const asked = yield* elicit(client, approvalForm(agent, request, problem))
      if (asked._tag === "Refused") return asked.unable ? Result.fail({ unable: asked.reason }) : Result.succeed(rejected(asked.reason))
      const resolution = resolutionOf(request, check, asked.content)
      if (Result.isSuccess(resolution)) return Result.succeed(resolution.success)
      problem = resolution.failure
    }
    return Result.succeed(rejected(`the MCP client's answer did not fit ${maxAttempts} times; the last: ${problem}`))
  })

// ---------------------------------------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------------------------------------

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const stringFormats = new Set(["email", "uri", "date", "date-time"])

/**
 * A JSON schema as a field of an elicitation form when it is one of the primitives a form may hold (a string, a
 * number, an integer, a boolean, a choice among strings), with the keywords a form knows; `None` otherwise.
 * Keywords dropped (a `pattern`, …) are still checked: the answer is decoded by the question's own schema.
 */
const primitiveField = (schema: unknown): Option.Option<Record<string, unknown>> => {
  if (!isRecord(schema)) return Option.none()
  const pick = (keys: ReadonlyArray<string>, accept: (value: unknown) => boolean) =>
    Object.fromEntries(keys.filter((key) => key in schema && accept(schema[key])).map((key) => [key, schema[key]]))
  const isString = (value: unknown) => typeof value === "string"
  const isFinite = (value: unknown) => typeof value === "number" && Number.isFinite(value)
  const isInt = (value: unknown) => Number.isInteger(value)
  const common = pick(["title", "description"], isString)
  switch (schema.type) {
    case "string":
      if ("enum" in schema) {
        return Array.isArray(schema.enum) && schema.enum.length > 0 && schema.enum.every(isString)
          ? Option.some({ type: "string", ...common, enum: schema.enum })
          : Option.none()
      }
      return Option.some({
        type: "string",
        ...common,
        ...pick(["minLength", "maxLength"], isInt),
        ...pick(["format"], (value) => isString(value) && stringFormats.has(value as string)),
        ...pick(["default"], isString)
      })
    case "number":
    case "integer":
      return Option.some({ type: schema.type, ...common, ...pick(["minimum", "maximum", "default"], isFinite) })
    case "boolean":
      return Option.some({ type: "boolean", ...common, ...pick(["default"], (value) => typeof value === "boolean") })
    default:
      return Option.none()
  }
}

/** A question's form, and how its content becomes the answer its schema decodes. */
interface QuestionForm {
  readonly form: Result.Result<McpSchema.ElicitRequestFormParams, string>
  readonly answerOf: (content: Readonly<Record<string, unknown>>) => Result.Result<unknown, string>
}

/** The one field of a form whose answer is not an object of primitives. */
const answerField = "answer"

const single = (content: Readonly<Record<string, unknown>>): Result.Result<unknown, string> =>
  answerField in content ? Result.succeed(content[answerField]) : Result.fail(`${answerField} is required`)

/**
 * The form for `request`: its schema's own fields when it is an object of primitives; one field `answer` when it is
 * a primitive; otherwise one `answer` field of JSON text (a form holds primitives only), parsed before the question's
 * schema decodes it.
 */
export const questionForm = (request: HumanLoop.QuestionRequest, problem?: string): QuestionForm => {
  const message = `${retryNote(problem)}${request.question}`
  const schema = request.schema
  if (isRecord(schema) && schema.type === "object" && isRecord(schema.properties)) {
    const fields = Object.entries(schema.properties).map(([name, field]) => [name, primitiveField(field)] as const)
    if (fields.length > 0 && fields.every(([, field]) => Option.isSome(field))) {
      const required = Array.isArray(schema.required) ? schema.required.filter((name): name is string => typeof name === "string") : []
      const form = formOf(message, Object.fromEntries(fields.map(([name, field]) => [name, Option.getOrThrow(field)])), required)
      if (Result.isSuccess(form)) return { form, answerOf: (content) => Result.succeed(content) }
    }
  }
  const field = primitiveField(schema)
  if (Option.isSome(field)) {
    const form = formOf(message, { [answerField]: { title: "Answer", ...field.value } }, [answerField])
    if (Result.isSuccess(form)) return { form, answerOf: single }
  }
  return {
    form: formOf(message, {
      [answerField]: {
        type: "string",
        title: "Answer (JSON)",
        description: `JSON matching this schema: ${cut(JSON.stringify(schema) ?? "{}", maxShownChars)}`
      }
    }, [answerField]),
    answerOf: (content) =>
      Result.flatMap(single(content), (text) =>
        typeof text === "string"
          ? Result.mapError(parseJson(text), (error) => `${answerField} must be JSON: ${error}`)
          : Result.fail(`${answerField} must be JSON text`))
  }
}

/** Asks the client `request` until an answer fits (at most `maxAttempts` times). `unable`: it cannot be asked. */
const answerBy = (
  client: Option.Option<McpSchema.McpServerClient["Service"]>,
  request: HumanLoop.QuestionRequest,
  check: (answer: unknown) => Result.Result<unknown, string>
): Effect.Effect<Result.Result<Result.Result<unknown, string>, { readonly unable: string }>> =>
  Effect.gen(function*() {
    let problem: string | undefined
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      const shaped = questionForm(request, problem)
      const asked = yield* elicit(client, shaped.form)
      if (asked._tag === "Refused") return asked.unable ? Result.fail({ unable: asked.reason }) : Result.succeed(Result.fail(asked.reason))
      const checked = Result.flatMap(shaped.answerOf(asked.content), check)
      if (Result.isSuccess(checked)) return Result.succeed(checked)
      problem = checked.failure
    }
    return Result.succeed(Result.fail(`the MCP client's answer did not fit ${maxAttempts} times; the last: ${problem}`))
  })

// ---------------------------------------------------------------------------------------------------------
// The loop
// ---------------------------------------------------------------------------------------------------------

/**
 * `base` (where the waits are listed and may be decided too), its waits also asked of `client`: the first answer
 * wins. When the client cannot be asked, the wait ends with the reason (rejected, dismissed) — unless `others` may
 * decide (an app's own `HumanLoop`), who then do.
 */
export const humanLoop = (
  base: HumanLoop.Service,
  client: Option.Option<McpSchema.McpServerClient["Service"]>,
  options: {
    /** The agent whose runs wait (named in the forms). */
    readonly agent: string
    /** Whether anyone but the client may decide (an app's own `HumanLoop`). */
    readonly others: boolean
  }
): HumanLoop.Service => {
  const orOthers = <A>(outcome: Result.Result<A, { readonly unable: string }>, unable: (reason: string) => A): Effect.Effect<A> =>
    Result.isSuccess(outcome) ? Effect.succeed(outcome.success) : options.others ? Effect.never : Effect.succeed(unable(outcome.failure.unable))
  const decided = (request: HumanLoop.ApprovalRequest, check: (value: unknown) => Result.Result<string, string>) =>
    Effect.flatMap(decideBy(client, options.agent, request, check), (outcome) =>
      orOthers(outcome, (reason): HumanLoop.Resolution => ({ approved: false, reason, arguments: request.arguments, edited: false })))
  const answered = (request: HumanLoop.QuestionRequest, check: (answer: unknown) => Result.Result<unknown, string>) =>
    Effect.flatMap(answerBy(client, request, check), (outcome) => orOthers(outcome, (reason) => Result.fail(reason)))
  const { askWithin, waitWithin, ...rest } = base
  return {
    ...rest,
    wait: (request, check) => Effect.raceFirst(base.wait(request, check), decided(request, check)),
    // A loop with a clock of its own (a durable one) keeps it; the client's answer still wins when it comes first.
    ...(waitWithin !== undefined
      ? {
        waitWithin: (request: HumanLoop.ApprovalRequest, check: (value: unknown) => Result.Result<string, string>, timeout: Duration.Duration) =>
          Effect.raceFirst(waitWithin(request, check, timeout), Effect.map(decided(request, check), Option.some))
      }
      : {}),
    // The same for a question with a timeout (`Question.wait` takes `askWithin` over `ask` when the loop has it).
    ...(askWithin !== undefined
      ? {
        askWithin: (request: HumanLoop.QuestionRequest, check: (answer: unknown) => Result.Result<unknown, string>, timeout: Duration.Duration) =>
          Effect.raceFirst(askWithin(request, check, timeout), Effect.map(answered(request, check), Option.some))
      }
      : {}),
    ask: (request, check) => Effect.raceFirst(base.ask(request, check), answered(request, check))
  }
}
