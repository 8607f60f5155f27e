/**
 * The errors a `Model` call can fail with. Each says whether retrying the same request could succeed, so
 * providers (and users) choose retries per error kind instead of retrying everything.
 *
 * @example
 * ```ts
 * import { Effect, Schedule } from "effect"
 * import { Model, ModelError, ScriptedModel } from "valet"
 *
 * // A server that is rate-limited once, then answers.
 * const server = ScriptedModel.layer([{ error: new ModelError.RateLimited({ message: "slow down" }) }, "Hello!"])
 *
 * // Send again what may succeed (rate limits, 5xx, timeouts, broken connections); fail at once on the rest.
 * const hello = Model.generate({ messages: [Model.user("Hi")] }).pipe(
 *   Effect.retry({ while: ModelError.isRetryable, schedule: Schedule.exponential("100 millis"), times: 3 }),
 *   Effect.map(Model.text), // "Hello!"
 *   Effect.catchTag("ContextLengthExceeded", () => Effect.succeed("(the prompt is too long)")),
 *   Effect.provide(server)
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Predicate, Schema } from "effect"

/**
 * The server refused because of rate limits (HTTP 429). Retryable, after `retryAfterMs` when the server said.
 *
 * @since 0.1.0
 * @category errors
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  retryAfterMs: Schema.optional(Schema.Number)
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return true
  }
}

/**
 * The server failed (HTTP 5xx). Retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class ServerError extends Schema.TaggedError<ServerError>()("ServerError", {
  status: Schema.Number,
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return true
  }
}

/**
 * No answer within the time allowed (per attempt or per call). Retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class Timeout extends Schema.TaggedError<Timeout>()("Timeout", {
  message: Schema.String,
  timeoutMs: Schema.Number
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return true
  }
}

/**
 * The connection failed or broke (refused, reset, cut mid-stream). Retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class Transport extends Schema.TaggedError<Transport>()("Transport", {
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return true
  }
}

/**
 * The server rejected the request (HTTP 4xx), with the server's own message. Not retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  status: Schema.Number,
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
}

/**
 * The prompt (plus `maxTokens`) does not fit in the model's context window. Not retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class ContextLengthExceeded extends Schema.TaggedError<ContextLengthExceeded>()("ContextLengthExceeded", {
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
}

/**
 * Missing or wrong credentials (HTTP 401 / 403). Not retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  status: Schema.Number,
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
}

/**
 * The server does not serve the requested model. Not retryable.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelNotFound extends Schema.TaggedError<ModelNotFound>()("ModelNotFound", {
  model: Schema.String,
  message: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
}

/**
 * The server answered something that is not what its protocol says; `body` holds the start of it.
 *
 * @since 0.1.0
 * @category errors
 */
export class MalformedResponse extends Schema.TaggedError<MalformedResponse>()("MalformedResponse", {
  message: Schema.String,
  body: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
}

/**
 * A `ScriptedModel` was called more times than its script has turns: the test must know.
 *
 * @since 0.1.0
 * @category errors
 */
export class ScriptExhausted extends Schema.TaggedError<ScriptExhausted>()("ScriptExhausted", {
  callIndex: Schema.Number,
  scriptLength: Schema.Number
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
  override get message(): string {
    return `ScriptedModel: call #${this.callIndex + 1} has no turn left (the script has ${this.scriptLength} turns)`
  }
}

/**
 * A replayed run made a model call that the cassette does not hold.
 *
 * @since 0.1.0
 * @category errors
 */
export class ReplayMiss extends Schema.TaggedError<ReplayMiss>()("ReplayMiss", {
  key: Schema.String,
  path: Schema.String
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
  override get message(): string {
    return `Journal: no recorded model call for ${this.key} in ${this.path}`
  }
}

/**
 * A content part that cannot be sent, named by where it is: `messageIndex` in the request's messages, `partIndex`
 * in that message's parts (a media type valet does not know, a URL scheme other than http(s) or data, bytes over
 * the cap, a part the server cannot take at all). Not retryable.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidContent extends Schema.TaggedError<InvalidContent>()("InvalidContent", {
  messageIndex: Schema.Number,
  partIndex: Schema.Number,
  reason: Schema.String,
  /** Which list of the message holds the part: `content` (absent), or a tool message's `parts`. @since 0.2.0 */
  field: Schema.optional(Schema.Literal("parts"))
}) {
  /** Whether the same request may succeed when sent again. */
  get retryable(): boolean {
    return false
  }
  override get message(): string {
    return `messages[${this.messageIndex}].${this.field ?? "content"}[${this.partIndex}]: ${this.reason}`
  }
}

/**
 * Every error a `Model` call can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type ModelError =
  | RateLimited
  | ServerError
  | Timeout
  | Transport
  | InvalidRequest
  | ContextLengthExceeded
  | Unauthorized
  | ModelNotFound
  | MalformedResponse
  | ScriptExhausted
  | ReplayMiss
  | InvalidContent

/**
 * The schema of `ModelError`, to carry model failures across JSON boundaries (cassettes, workflows, HTTP).
 *
 * @since 0.1.0
 * @category errors
 */
export const ModelError: Schema.Union<readonly [
  typeof RateLimited,
  typeof ServerError,
  typeof Timeout,
  typeof Transport,
  typeof InvalidRequest,
  typeof ContextLengthExceeded,
  typeof Unauthorized,
  typeof ModelNotFound,
  typeof MalformedResponse,
  typeof ScriptExhausted,
  typeof ReplayMiss,
  typeof InvalidContent
]> = Schema.Union([
  RateLimited,
  ServerError,
  Timeout,
  Transport,
  InvalidRequest,
  ContextLengthExceeded,
  Unauthorized,
  ModelNotFound,
  MalformedResponse,
  ScriptExhausted,
  ReplayMiss,
  InvalidContent
])

const tags: ReadonlySet<string> = new Set(ModelError.members.map((member) => member.identifier))

/**
 * Whether a value is one of the `ModelError` classes.
 *
 * @since 0.1.0
 * @category guards
 */
export const isModelError = (u: unknown): u is ModelError =>
  Predicate.hasProperty(u, "_tag") && typeof u._tag === "string" && tags.has(u._tag)

/**
 * Whether an error is worth sending the same request again for.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRetryable = (error: ModelError): boolean => error.retryable
