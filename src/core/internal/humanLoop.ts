/**
 * The `HumanLoop` service, its models, errors and in-process implementation (re-exported by `HumanLoop`): here so
 * that the runtime, which waits on it, does not import the public module (whose `askTool` runs on the runtime).
 */
import { Context, Deferred, type Duration, Effect, Layer, type Option, Result, Schema } from "effect"
import { isWithinSession } from "../AgentEvent.js"
import { BoundedJson } from "./parse.js"

/**
 * A tool call waiting for a person's decision.
 *
 * @since 0.2.0
 * @category models
 */
export interface ApprovalRequest {
  /** The session of the run that made the call (a sub-agent's calls carry their own, under the root's). */
  readonly sessionId: string
  readonly toolCallId: string
  /** The tool's name. */
  readonly name: string
  /** The arguments as the model wrote them (JSON text). */
  readonly arguments: string
  /** When it started waiting (ms since the epoch, by the run's clock). */
  readonly requestedAt: number
}

/**
 * A person's decision on a waiting call: approved (with arguments edited, as a JSON value the tool's schema
 * decodes) or rejected (with a reason the model reads).
 *
 * @since 0.2.0
 * @category models
 */
export const Decision = Schema.Struct({
  approved: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  // Bounded: a deeper value would overflow the stack of the tool's schema check (a defect, not a refusal).
  arguments: Schema.optional(BoundedJson)
})

/**
 * @since 0.2.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * No call with this id waits for a decision (never asked, or it ended — a timeout, the run cancelled).
 *
 * @since 0.2.0
 * @category errors
 */
export class NotWaiting extends Schema.TaggedError<NotWaiting>()("NotWaiting", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * The call was decided already: a decision counts once.
 *
 * @since 0.2.0
 * @category errors
 */
export class AlreadyDecided extends Schema.TaggedError<AlreadyDecided>()("AlreadyDecided", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * A decision that cannot be taken: edited arguments the tool's schema refuses, or a call id that several waiting
 * calls share (name the session). Nothing changed: the call still waits.
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()("InvalidDecision", {
  toolCallId: Schema.String,
  message: Schema.String
}) {}

/**
 * What `decide` may fail with.
 *
 * @since 0.2.0
 * @category errors
 */
export type DecideError = NotWaiting | AlreadyDecided | InvalidDecision

/**
 * What a decided call resumes with: the decision, and the argument text to call the tool with when approved.
 *
 * @since 0.2.0
 * @category models
 */
export interface Resolution {
  readonly approved: boolean
  readonly reason?: string | undefined
  /** The argument text the tool runs with (the model's, or the edited arguments as JSON). */
  readonly arguments: string
  readonly edited: boolean
}

/**
 * A question a run asks a person (`Architecture.ask`, the `ask_human` tool), waiting for the answer.
 *
 * @since 0.2.0
 * @category models
 */
export interface QuestionRequest {
  readonly sessionId: string
  /** The question's id in its run (`q1`, `q2`, …). */
  readonly questionId: string
  readonly question: string
  /** The JSON schema of the answer expected, for a UI to render a form. */
  readonly schema: unknown
  readonly requestedAt: number
}

/**
 * Where waiting calls and questions are kept, decided and answered.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /**
   * Waits for the decision on `request` (the runtime calls this for a call that needs approval). `check` checks
   * edited arguments (the tool's schema): the argument text to call with, or why they do not fit.
   */
  readonly wait: (
    request: ApprovalRequest,
    check: (value: unknown) => Result.Result<string, string>
  ) => Effect.Effect<Resolution>
  /**
   * Waits as `wait` does, for at most `timeout` (`None` when it passed), on a clock of the loop's own: a durable loop
   * keeps it in its store so that it survives the process. Without it, `wait` is raced with a timer of this process.
   *
   * @since 0.2.0
   */
  readonly waitWithin?: (
    request: ApprovalRequest,
    check: (value: unknown) => Result.Result<string, string>,
    timeout: Duration.Duration
  ) => Effect.Effect<Option.Option<Resolution>>
  /**
   * Decides a waiting call. `sessionId` narrows it to a run (its root session: its sub-agents' calls too) when call
   * ids repeat across runs.
   */
  readonly decide: (
    toolCallId: string,
    decision: Decision,
    options?: { readonly sessionId?: string | undefined }
  ) => Effect.Effect<ApprovalRequest, DecideError>
  /** The calls waiting now, oldest first (of one run and its sub-agents with `sessionId`). */
  readonly pending: (options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<ApprovalRequest>>
  /** Waits until at least `count` calls wait (of one run with `sessionId`), and answers them. */
  readonly awaitPending: (count: number, options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<ApprovalRequest>>
  /**
   * Waits for the answer to `request` (the runtime calls this for `Architecture.ask`). `check` decodes an answer
   * with the question's schema: the value the run gets, or why the answer does not fit.
   */
  readonly ask: (
    request: QuestionRequest,
    check: (answer: unknown) => Result.Result<unknown, string>
  ) => Effect.Effect<Result.Result<unknown, string>>
  /**
   * Waits as `ask` does, for at most `timeout` (`None` when it passed), on the loop's own clock (see `waitWithin`).
   *
   * @since 0.2.0
   */
  readonly askWithin?: (
    request: QuestionRequest,
    check: (answer: unknown) => Result.Result<unknown, string>,
    timeout: Duration.Duration
  ) => Effect.Effect<Option.Option<Result.Result<unknown, string>>>
  /**
   * Answers a waiting question: `NotWaiting` when none with that id waits, `AlreadyDecided` for a second answer,
   * `InvalidDecision` for an answer the question's schema refuses (it still waits).
   */
  readonly answer: (
    questionId: string,
    answer: unknown,
    options?: { readonly sessionId?: string | undefined }
  ) => Effect.Effect<QuestionRequest, DecideError>
  /**
   * Ends a waiting question without an answer (a person declines; nobody is there to answer): the run gets
   * `Unanswered` with `reason`. `NotWaiting` / `AlreadyDecided` as for `answer`.
   */
  readonly dismiss: (
    questionId: string,
    reason: string,
    options?: { readonly sessionId?: string | undefined }
  ) => Effect.Effect<QuestionRequest, DecideError>
  /** The questions waiting now, oldest first (of one run and its sub-agents with `sessionId`). */
  readonly questions: (options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<QuestionRequest>>
  /** Waits until at least `count` questions wait, and answers them. */
  readonly awaitQuestions: (count: number, options?: { readonly sessionId?: string | undefined }) => Effect.Effect<ReadonlyArray<QuestionRequest>>
}

/**
 * The service.
 *
 * @since 0.2.0
 * @category services
 */
export class HumanLoop extends Context.Service<HumanLoop, Service>()("valet/HumanLoop") {}

/** A run's session and its sub-agents' (`<root>__…`, not another root's that merely begins the same). */
const inRun = (sessionId: string, root: string | undefined): boolean => root === undefined || isWithinSession(sessionId, root)

/** How many decided calls are remembered (to answer `AlreadyDecided` rather than `NotWaiting`). */
const rememberedDecisions = 10_000

/**
 * The waiting requests of one kind (tool calls, questions): each a fiber on a `Deferred` until settled, listed by
 * run, settled once (a settled id is remembered, to answer `AlreadyDecided` rather than `NotWaiting`).
 */
const registry = <Request extends { readonly sessionId: string }, Check, Out>(
  idOf: (request: Request) => string,
  words: { readonly what: string; readonly settled: string; readonly waits: string },
  wakeUp: () => void
) => {
  interface Entry {
    readonly request: Request
    readonly check: Check
    readonly done: Deferred.Deferred<Out>
  }
  const entries = new Map<string, Entry>()
  const settled = new Map<string, true>()
  const keyOf = (sessionId: string, id: string) => `${sessionId}\u0000${id}`

  const list = (root: string | undefined): ReadonlyArray<Request> =>
    [...entries.values()].filter((entry) => inRun(entry.request.sessionId, root)).map((entry) => entry.request)

  const enter = (request: Request, check: Check): Effect.Effect<Out> =>
    Effect.suspend(() => {
      const key = keyOf(request.sessionId, idOf(request))
      const done = Deferred.makeUnsafe<Out>()
      entries.set(key, { request, check, done })
      wakeUp()
      // However the wait ends (settled, timed out, the run interrupted), it no longer waits.
      return Deferred.await(done).pipe(Effect.ensuring(Effect.sync(() => {
        if (entries.get(key)?.done === done) entries.delete(key)
      })))
    })

  /** Settles the one waiting request `id` (of the run `root`) with what `outcome` makes of it, or says why not. */
  const settle = (
    id: string,
    root: string | undefined,
    outcome: (entry: Entry) => Result.Result<Out, string>
  ): Effect.Effect<Request, DecideError> =>
    Effect.suspend((): Effect.Effect<Request, DecideError> => {
      const matches = [...entries.entries()].filter(([, entry]) => idOf(entry.request) === id && inRun(entry.request.sessionId, root))
      if (matches.length === 0) {
        const wasSettled = [...settled.keys()].some((key) => {
          const [sessionId, settledId] = key.split("\u0000")
          return settledId === id && inRun(sessionId!, root)
        })
        return wasSettled
          ? Effect.fail(new AlreadyDecided({ toolCallId: id, message: `the ${words.what} ${JSON.stringify(id)} was ${words.settled} already` }))
          : Effect.fail(new NotWaiting({ toolCallId: id, message: `no ${words.what} ${JSON.stringify(id)} ${words.waits}` }))
      }
      if (matches.length > 1) {
        return Effect.fail(new InvalidDecision({
          toolCallId: id,
          message: `${matches.length} waiting ${words.what}s have the id ${JSON.stringify(id)} (sessions ${matches.map(([, entry]) => entry.request.sessionId).join(", ")}): name the session`
        }))
      }
      const [key, entry] = matches[0]!
      const out = outcome(entry)
      if (Result.isFailure(out)) return Effect.fail(new InvalidDecision({ toolCallId: id, message: out.failure }))
      entries.delete(key)
      settled.set(key, true)
      if (settled.size > rememberedDecisions) settled.delete(settled.keys().next().value!)
      Deferred.doneUnsafe(entry.done, Effect.succeed(out.success))
      return Effect.succeed(entry.request)
    })

  return { list, enter, settle }
}

/**
 * A `HumanLoop` in this process: waiting calls and questions are fibers on `Deferred`s.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make: Effect.Effect<Service> = Effect.sync(() => {
  // Woken whenever a call or a question starts waiting, for `awaitPending` / `awaitQuestions`.
  let changed = Deferred.makeUnsafe<void>()
  const wakeUp = () => {
    const wake = changed
    changed = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(wake, Effect.void)
  }
  const waitUntil = <A>(list: () => ReadonlyArray<A>, count: number) =>
    Effect.suspend(function loop(): Effect.Effect<ReadonlyArray<A>> {
      const now = list()
      if (now.length >= count) return Effect.succeed(now)
      return Effect.flatMap(Deferred.await(changed), loop)
    })

  const calls = registry<ApprovalRequest, (value: unknown) => Result.Result<string, string>, Resolution>(
    (request) => request.toolCallId,
    { what: "call", settled: "decided", waits: "waits for a decision" },
    wakeUp
  )
  const asked = registry<QuestionRequest, (answer: unknown) => Result.Result<unknown, string>, Result.Result<unknown, string>>(
    (request) => request.questionId,
    { what: "question", settled: "answered", waits: "waits for an answer" },
    wakeUp
  )

  const decide: Service["decide"] = (toolCallId, decision, options) =>
    calls.settle(toolCallId, options?.sessionId, (entry) => {
      const edited = decision.approved && decision.arguments !== undefined
      if (!edited) return Result.succeed({ approved: decision.approved, reason: decision.reason, arguments: entry.request.arguments, edited })
      const checked = entry.check(decision.arguments)
      return Result.isFailure(checked)
        ? Result.fail(`arguments: ${checked.failure}`)
        : Result.succeed({ approved: true, reason: decision.reason, arguments: checked.success, edited })
    })

  return {
    wait: calls.enter,
    decide,
    pending: (options) => Effect.sync(() => calls.list(options?.sessionId)),
    awaitPending: (count, options) => waitUntil(() => calls.list(options?.sessionId), count),
    ask: asked.enter,
    answer: (questionId, value, options) =>
      asked.settle(questionId, options?.sessionId, (entry) => {
        const checked = entry.check(value)
        return Result.isFailure(checked) ? Result.fail(`answer: ${checked.failure}`) : Result.succeed(Result.succeed(checked.success))
      }),
    dismiss: (questionId, reason, options) => asked.settle(questionId, options?.sessionId, () => Result.succeed(Result.fail(reason))),
    questions: (options) => Effect.sync(() => asked.list(options?.sessionId)),
    awaitQuestions: (count, options) => waitUntil(() => asked.list(options?.sessionId), count)
  }
})

/**
 * `make` as a layer: one per process (or per server), shared by every run that may wait.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer: Layer.Layer<HumanLoop> = Layer.effect(HumanLoop, make)

/**
 * Decides a waiting call (see `Service.decide`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const decide = (
  toolCallId: string,
  decision: Decision,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<ApprovalRequest, DecideError, HumanLoop> => HumanLoop.use((loop) => loop.decide(toolCallId, decision, options))

/**
 * The calls waiting now (see `Service.pending`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const pending = (options?: { readonly sessionId?: string | undefined }): Effect.Effect<ReadonlyArray<ApprovalRequest>, never, HumanLoop> =>
  HumanLoop.use((loop) => loop.pending(options))

/**
 * Waits until at least `count` calls wait (see `Service.awaitPending`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const awaitPending = (
  count: number,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<ReadonlyArray<ApprovalRequest>, never, HumanLoop> => HumanLoop.use((loop) => loop.awaitPending(count, options))

/**
 * Answers a waiting question (see `Service.answer`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const answer = (
  questionId: string,
  value: unknown,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<QuestionRequest, DecideError, HumanLoop> => HumanLoop.use((loop) => loop.answer(questionId, value, options))

/**
 * The questions waiting now (see `Service.questions`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const questions = (options?: { readonly sessionId?: string | undefined }): Effect.Effect<ReadonlyArray<QuestionRequest>, never, HumanLoop> =>
  HumanLoop.use((loop) => loop.questions(options))

/**
 * Waits until at least `count` questions wait (see `Service.awaitQuestions`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const awaitQuestions = (
  count: number,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<ReadonlyArray<QuestionRequest>, never, HumanLoop> => HumanLoop.use((loop) => loop.awaitQuestions(count, options))

/**
 * Ends a waiting question without an answer (see `Service.dismiss`).
 *
 * @since 0.2.0
 * @category accessors
 */
export const dismiss = (
  questionId: string,
  reason: string,
  options?: { readonly sessionId?: string | undefined }
): Effect.Effect<QuestionRequest, DecideError, HumanLoop> => HumanLoop.use((loop) => loop.dismiss(questionId, reason, options))
