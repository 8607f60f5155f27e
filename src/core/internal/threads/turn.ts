/**
 * A turn on a thread: the lease (one turn at a time, across processes), the history loaded (a page), the run, and
 * the turn's messages appended in one write when it ends — the root run's own transcript when it is a whole tool
 * loop ending in the answer, else the task and the answer; for a turn that did not complete, the task and a note of
 * how it ended (or what the app chooses). Never half a tool exchange.
 */
import { Cause, Duration, Effect, Exit, Schedule, type Scope, Stream } from "effect"
import type { AgentError } from "../../AgentError.js"
import type * as AgentEvent from "../../AgentEvent.js"
import type { ModelError } from "../../ModelError.js"
import * as Compact from "../compact.js"
import { type Content, type Message, textOf } from "../modelSchema.js"
import type { Emitter } from "../runtime.js"
import type * as Tool from "../../Tool.js"
import * as Recall from "./recall.js"
import * as ToolCalls from "../toolCalls.js"
import * as Summary from "./summary.js"
import * as WorkingMemory from "./workingMemory.js"
import { type Lease, type Service, type ThreadError, ThreadBusy, ThreadStoreError } from "./model.js"

/**
 * How a turn that did not complete is kept: `"note"` (the default) appends the task and an assistant message with
 * the partial answer and how the turn ended (nothing when an input guardrail refused the task); `"drop"` appends nothing; a function returns the messages to append.
 * `result` is the run's when it ended early with one (a budget spent, cancelled), `undefined` when it failed or its
 * fiber was interrupted.
 */
export type Incomplete =
  | "note"
  | "drop"
  | ((ending: {
    /** The task's text (`Model.textOf`: a task given as parts is appended whole, with its parts). */
    readonly task: string
    readonly output: string
    readonly reason: string
    readonly result: AgentEvent.RunResult | undefined
  }) => ReadonlyArray<Message>)

/** A turn's options: the thread, and how it is held, read and kept. */
export interface TurnOptions {
  readonly id: string
  /** The caller's owner: a thread of another owner is `ThreadForbidden`. */
  readonly owner?: string | undefined
  /** When another turn holds the thread: fail at once with `ThreadBusy` (the default), or wait for it (`"wait"`). */
  readonly onBusy?: "fail" | "wait" | undefined
  /** How long `"wait"` waits before `ThreadBusy` (default 30 seconds). */
  readonly busyTimeout?: Duration.Input | undefined
  /**
   * How many of the thread's last messages the run is given (default 100), after the thread's summary when it keeps
   * one (then only messages after the summary's end).
   */
  readonly historyLimit?: number | undefined
  readonly incomplete?: Incomplete | undefined
  /**
   * Keep the caller's `history` too: a client that sends the conversation whole (the Responses facade's first
   * turn, its items before the input) has it appended before the turn's own messages, in the turn's one write under
   * the lease, and only when the turn keeps messages (never when an input guardrail refused: the caller's messages
   * are checked with the task). Its system messages are not kept: they are that call's instructions, given again
   * by each call (and a thread's history starts at a user message). An empty task after them (the conversation
   * ends in a tool result) stores no user message of its own: the last kept user message is the turn's.
   */
  readonly keepHistory?: boolean | undefined
  /**
   * Told once the turn holds the thread and read its history: the thread's message count then, which is where the
   * turn's messages will go (a caller naming the turn by its place, as the Responses facade's ids do).
   */
  readonly onBegun?: ((thread: { readonly messageCount: number }) => void) | undefined
  /**
   * The turn's key: its lease is taken under it and its messages appended with it (`Threads.Service.append`'s
   * `turnKey`), so `Threads.Service.turnOf` finds where the turn's messages landed, or that it still holds the
   * thread. A caller naming the turn by the key (the Responses facade's ids) needs no count read before the turn.
   */
  readonly turnKey?: string | undefined
  /**
   * The thread's message count the caller chose this turn on (a turn that must go right after given messages, as a
   * Responses facade continuation does): when the thread holds another count once the turn holds its lease, the
   * turn fails with `ThreadBusy` before anything runs (another turn got in between).
   */
  readonly expectedCount?: number | undefined
  /** The lease's length, renewed every third of it while the turn runs (default 60 seconds). */
  readonly leaseDuration?: Duration.Input | undefined
  /**
   * A working memory (`Threads.workingMemory(schema, …)`): shown to the model at the start of the turn, replaced
   * through the `update_working_memory` tool the turn gives the agent.
   */
  readonly workingMemory?: WorkingMemory.WorkingMemory | undefined
  /**
   * Semantic recall: the owner's past messages nearest the task are shown to the model (a system message after the
   * working memory's), and the turn's messages are embedded once appended (see `Recall.RecallOptions`).
   */
  readonly recall?: Recall.RecallOptions | undefined
}

const defaults = { historyLimit: 100, leaseMs: 60_000, busyTimeoutMs: 30_000 }

/** The history a run is given: the page from its first user message, so that it never starts inside an exchange. */
export const fromFirstUserMessage = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> => {
  const first = messages.findIndex((message) => message.role === "user")
  if (first === -1) return []
  // And never ending in a call without its result (a thread forked inside an exchange): cut back before that call.
  let end = messages.length
  const answered = new Set<string>()
  for (let i = messages.length - 1; i >= first; i--) {
    const message = messages[i]!
    if (message.role === "tool") answered.add(message.toolCallId)
    else if (message.role === "assistant" && (message.toolCalls ?? []).some((call) => !answered.has(call.id))) end = i
  }
  return messages.slice(first, end)
}

/**
 * The root run's own model calls and tool results as messages, when they are one whole tool loop that ends in the
 * answer: every call answered by its result, the last reply the output. `undefined` otherwise (an architecture whose
 * answer comes from sub-agents, or whose root calls are not one conversation).
 */
export const transcriptOf = (events: ReadonlyArray<AgentEvent.AgentEvent>, output: string): ReadonlyArray<Message> | undefined => {
  const messages: Array<Message> = []
  let open = new Set<string>()
  for (const event of events) {
    if (event._tag === "ModelReplied") {
      if (open.size > 0) return undefined
      // A reply without calls ends a tool loop: one before the last is not one loop (a plan, then an answer).
      const previous = messages.at(-1)
      if (previous !== undefined && previous.role === "assistant" && previous.toolCalls === undefined) return undefined
      const calls = event.toolCalls
      messages.push(calls.length > 0 ? { role: "assistant", content: event.text, toolCalls: calls } : { role: "assistant", content: event.text })
      open = new Set(calls.map((call) => call.id))
    } else if (event._tag === "ToolReturned") {
      if (!open.delete(event.toolCallId)) return undefined
      // A tool's images (files, audio) are in the event's side table, not the event: kept in the thread too.
      const parts = ToolCalls.returnedParts.get(event)
      messages.push(
        parts !== undefined
          ? { role: "tool", toolCallId: event.toolCallId, name: event.name, content: event.content, parts }
          : { role: "tool", toolCallId: event.toolCallId, name: event.name, content: event.content }
      )
    }
  }
  const last = messages.at(-1)
  return open.size === 0 && last?.role === "assistant" && last.toolCalls === undefined && last.content === output ? messages : undefined
}

/** What a turn appends, by how it ended. */
export const turnMessages = (
  task: Content,
  events: ReadonlyArray<AgentEvent.AgentEvent>,
  exit: Exit.Exit<AgentEvent.RunResult, unknown>,
  incomplete: Incomplete
): ReadonlyArray<Message> => {
  const user: Message = { role: "user", content: task }
  if (Exit.isSuccess(exit) && !exit.value.interrupted) {
    const output = exit.value.output
    return [user, ...(transcriptOf(events, output) ?? [{ role: "assistant", content: output }])]
  }
  const output = Exit.isSuccess(exit) ? exit.value.output : ""
  const reason = Exit.isSuccess(exit)
    ? exit.value.interruptionReason ?? "interrupted"
    : Cause.hasInterruptsOnly(exit.cause)
    ? "interrupted"
    : `failed (${errorTagOf(exit.cause)})`
  if (incomplete === "drop") return []
  // A task the input guardrails refused is not kept: stored, it would be the next turn's history, which they do not
  // check again (its messages were checked in their own turns), and the model would read what they refused.
  if (typeof incomplete !== "function" && Exit.isFailure(exit) && inputTripped(exit.cause)) return []
  if (typeof incomplete === "function") {
    return incomplete({ task: textOf(task), output, reason, result: Exit.isSuccess(exit) ? exit.value : undefined })
  }
  const note = `(This turn ended early: ${reason}.)`
  return [user, { role: "assistant", content: output === "" ? note : `${output}\n\n${note}` }]
}

/** Whether a run failed because an input guardrail tripped (a refused or rewritten task). */
const inputTripped = (cause: Cause.Cause<unknown>): boolean => {
  const error = Cause.squash(cause)
  return typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "GuardrailTripped" &&
    (error as { kind?: unknown }).kind === "input"
}

const errorTagOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "a defect"
}

/** Root events, recorded as the run emits them: the transcript is made from them. */
const recorder = () => {
  const events: Array<AgentEvent.AgentEvent> = []
  const record = (event: AgentEvent.AgentEvent) => {
    if (event.sessionId.includes("__")) return
    // A compaction's summary is no reply of the run's conversation.
    if (event._tag === "ModelReplied" && !event.step.startsWith("context.")) events.push(event)
    else if (event._tag === "ToolReturned") events.push(event)
  }
  return { events, record }
}

interface Begun {
  readonly lease: Lease
  readonly history: ReadonlyArray<Message>
  /** Told of the run's compactions: the thread keeps the summary (`summary.ts`). */
  readonly observer: Compact.Observer
  /** Tools the turn gives the agent (the working memory's). */
  readonly tools: ReadonlyArray<Tool.Tool>
  /** Appends the turn's messages and gives the lease back. */
  readonly finish: (exit: Exit.Exit<AgentEvent.RunResult, unknown>, events: ReadonlyArray<AgentEvent.AgentEvent>) => Effect.Effect<void, ThreadError | ModelError>
}

const leaseMsOf = (options: TurnOptions): Effect.Effect<number, ThreadStoreError> => {
  if (options.leaseDuration === undefined) return Effect.succeed(defaults.leaseMs)
  try {
    const ms = Duration.toMillis(Duration.fromInputUnsafe(options.leaseDuration))
    if (Number.isFinite(ms) && ms >= 1000) return Effect.succeed(ms)
  } catch {
    // Refused below, naming the value.
  }
  return Effect.fail(new ThreadStoreError({
    operation: "turn",
    threadId: options.id,
    message: `Threads: leaseDuration must be a duration of at least 1 second, got ${JSON.stringify(String(options.leaseDuration))}`
  }))
}

/** Takes the lease (renewed in the scope), loads the page, and says how to finish. */
const begin = (
  threads: Service,
  options: TurnOptions,
  task: Content,
  extraHistory: ReadonlyArray<Message> | undefined
): Effect.Effect<Begun, ThreadError | ModelError, Scope.Scope> =>
  Effect.gen(function*() {
    const leaseMs = yield* leaseMsOf(options)
    const acquire = threads.acquire(options.id, {
      owner: options.owner,
      durationMs: leaseMs,
      ...(options.turnKey !== undefined ? { turnKey: options.turnKey } : {})
    })
    const lease = yield* (options.onBusy === "wait"
      ? acquire.pipe(
        Effect.retry({ while: (error) => error._tag === "ThreadBusy", schedule: Schedule.spaced("200 millis") }),
        Effect.timeoutOrElse({
          duration: options.busyTimeout ?? defaults.busyTimeoutMs,
          orElse: () => Effect.fail(new ThreadBusy({ threadId: options.id, message: `Threads: thread ${JSON.stringify(options.id)} stayed in another turn for ${Duration.format(Duration.fromInputUnsafe(options.busyTimeout ?? defaults.busyTimeoutMs))}` }))
        })
      )
      : acquire)
    // Given back however the turn ends; a lease lost meanwhile is not ours to give back (release does nothing).
    yield* Effect.addFinalizer(() => Effect.ignore(threads.release(lease)))
    // Renewed while the turn runs, so that a long run keeps it. A store that fails once is tried again at the next
    // renewal; a lease taken by another turn (expired meanwhile) stops the renewals, and the append finds out.
    yield* Effect.forkScoped(Effect.ignore(Effect.repeat(
      threads.renew(lease, leaseMs).pipe(Effect.catchTag("ThreadStoreError", () => Effect.void)),
      Schedule.spaced(Math.max(100, Math.floor(leaseMs / 3)))
    )))
    // The thread's summary, if it keeps one, then the page after it.
    const loaded = yield* Summary.load(threads, options.id, options.owner, options.historyLimit ?? defaults.historyLimit)
    // Read under the lease: no other turn's messages land between this and the append.
    if (options.expectedCount !== undefined && loaded.total !== options.expectedCount) {
      return yield* new ThreadBusy({
        threadId: options.id,
        message: `Threads: thread ${JSON.stringify(options.id)} holds ${loaded.total} messages, not the ${options.expectedCount} this turn was to follow: another turn got in first`
      })
    }
    const given = fromFirstUserMessage(loaded.messages)
    const memory = options.workingMemory
    let shown: ReadonlyArray<Message> = []
    let tools: ReadonlyArray<Tool.Tool> = []
    const thread = memory !== undefined || options.recall !== undefined ? yield* threads.get(options.id, { owner: options.owner }) : undefined
    if (memory !== undefined && thread !== undefined) {
      const key = WorkingMemory.keyOf(memory.scope, thread.owner, thread.id)
      const document = yield* memory.show(yield* threads.readMemory(key), key)
      // A system message, so that compaction keeps it whole with the instructions.
      shown = [{
        role: "system",
        content: `Your working memory (replace it with the ${WorkingMemory.toolName} tool when something worth remembering changes):\n${document}`
      }]
      tools = [memory.tool((next) => threads.writeMemory(key, next))]
    }
    const recall = options.recall !== undefined && thread !== undefined
      ? yield* Recall.prepare(threads, options.recall, { threadId: thread.id, owner: thread.owner, task: textOf(task), pageStart: loaded.start })
      : undefined
    options.onBegun?.({ messageCount: loaded.total })
    const kept = options.keepHistory === true ? (extraHistory ?? []).filter((message) => message.role !== "system") : []
    return {
      lease,
      tools,
      history: [...shown, ...(recall?.shown ?? []), ...given],
      observer: loaded.observer(given),
      finish: (exit, events) => {
        const own = turnMessages(task, events, exit, options.incomplete ?? "note")
        // A conversation that ends in a tool result has no task (""): its last user message is among the kept items.
        // An empty user message stored after them would be read by every later turn's model (this one's never saw
        // it), and some providers refuse empty content.
        const first = own[0]
        const ownKept = kept.length > 0 && task === "" && first?.role === "user" && first.content === "" ? own.slice(1) : own
        const messages = ownKept.length === 0 ? ownKept : [...kept, ...ownKept]
        const appended = messages.length === 0
          ? Effect.succeed(undefined)
          : threads.append(options.id, messages, {
            owner: options.owner,
            lease,
            ...(options.turnKey !== undefined ? { turnKey: options.turnKey } : {})
          })
        // The vectors last, in a write of their own after the append and the summary (see recall.ts for why).
        return Effect.flatMap(appended, (after) =>
          Effect.andThen(
            loaded.save(lease),
            recall === undefined || after === undefined
              ? Effect.void
              : recall.store(options.id, options.owner, after.messageCount - messages.length, messages)
          ))
      }
    }
  })

/** The options of a turn given as an id or as options. */
export const optionsOf = (thread: string | TurnOptions): TurnOptions => (typeof thread === "string" ? { id: thread } : thread)

/** `run` as a turn: `body` runs the agent on the history with a recording emitter. */
export const run = <A extends AgentEvent.RunResult, R>(
  threads: Service,
  thread: string | TurnOptions,
  task: Content,
  extraHistory: ReadonlyArray<Message> | undefined,
  body: (history: ReadonlyArray<Message>, emitter: Emitter, tools: ReadonlyArray<Tool.Tool>) => Effect.Effect<A, AgentError, R>
): Effect.Effect<A, AgentError | ThreadError, R> =>
  Effect.scoped(Effect.gen(function*() {
    const begun = yield* begin(threads, optionsOf(thread), task, extraHistory)
    const { events, record } = recorder()
    const emitter: Emitter = {
      observed: true,
      emit: (event) => Effect.sync(() => record(event)),
      unsafeEmit: (event) => {
        record(event)
        return true
      }
    }
    // The run alone is interruptible: an interrupt stops it, and the turn is still kept (its note) before the
    // interruption goes on.
    return yield* Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Effect.exit(restore(body([...begun.history, ...(extraHistory ?? [])], emitter, begun.tools).pipe(Effect.provideService(Compact.CurrentObserver, begun.observer)))), (exit) =>
        Effect.andThen(begun.finish(exit, events), exit))
    )
  }))

/** `stream` as a turn: the run's events pass through; the turn is kept when the stream ends, however it ends. */
export const stream = <E, R>(
  threads: Service,
  thread: string | TurnOptions,
  task: Content,
  extraHistory: ReadonlyArray<Message> | undefined,
  body: (history: ReadonlyArray<Message>, tools: ReadonlyArray<Tool.Tool>) => Stream.Stream<AgentEvent.AgentEvent, E, R>
): Stream.Stream<AgentEvent.AgentEvent, E | ThreadError | ModelError, R> =>
  Stream.unwrap(Effect.gen(function*() {
    const begun = yield* begin(threads, optionsOf(thread), task, extraHistory)
    const { events, record } = recorder()
    let result: AgentEvent.RunResult | undefined
    let finished = false
    const finish = (exit: Exit.Exit<AgentEvent.RunResult, unknown>) =>
      Effect.suspend(() => {
        if (finished) return Effect.void
        finished = true
        return begun.finish(exit, events)
      })
    return body([...begun.history, ...(extraHistory ?? [])], begun.tools).pipe(
      Stream.provideService(Compact.CurrentObserver, begun.observer),
      Stream.tap((event) =>
        Effect.sync(() => {
          record(event)
          if (event._tag === "RunCompleted" && !event.sessionId.includes("__")) result = event.result
        })
      ),
      // After the last event: the append's failure is the stream's.
      Stream.concat(Stream.fromEffectDrain(Effect.suspend(() => finish(result === undefined ? Exit.interrupt() : Exit.succeed(result))))),
      // A run that failed, or a reader that stopped early (the stream then ends without reaching the append): the
      // note. Its own failure cannot replace the run's.
      Stream.onExit((exit) =>
        Effect.ignore(finish(
          Exit.isFailure(exit) ? (exit as Exit.Exit<never, unknown>) : result === undefined ? Exit.interrupt() : Exit.succeed(result)
        ))
      )
    )
  }))
