/**
 * The architecture of a remote A2A agent (`A2A.agent`): each exchange with the remote task is one model call of the
 * run, made through `Architecture.generate` over a `Model` of this module that sends the message with
 * `SendStreamingMessage` and turns the task's artifact text into text chunks. So the runtime does what it does for
 * any call: `ModelCalled` / `TextDelta` / `ModelReplied` (zero usage: a remote agent reports no tokens), the budget's
 * `maxCalls`, and interruption, which aborts the request. Around it, the program handles what a task adds: status
 * lines as `Progress`, input required as `Architecture.ask` and a follow-up message on the same task, a dropped stream
 * resumed with `SubscribeToTask`, and a run that ends otherwise than with the task's answer (interrupted, or failed)
 * cancelling the remote task.
 */
import { Cause, Duration, Effect, Exit, Result, Schedule, Schema, Stream } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { RemoteAgentFailed, type Unanswered } from "../../../core/AgentError.js"
import * as Architecture from "../../../core/Architecture.js"
import * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import * as Client from "./client.js"
import * as Wire from "./wire.js"

/** Options of `make`. */
export interface Options extends Client.Connection {
  /** How a dropped stream is resumed with `SubscribeToTask` (default: exponential from 200 ms, 5 tries). */
  readonly resubscribe?: Schedule.Schedule<unknown, unknown> | undefined
  /** How long the cancel of the remote task may take when the run is interrupted (default 5 s). */
  readonly cancelTimeout?: Duration.Input | undefined
  /** How often a task is asked for (`GetTask`) while it works, when the card says it does not stream (default 1 s). */
  readonly poll?: Duration.Input | undefined
  /**
   * How long one exchange (a message until its task ends or asks for input) may take; then it is cancelled (default:
   * no limit). It bounds the card read as well.
   */
  readonly timeout?: Duration.Input | undefined
  /** The most output a task may give, all artifacts together, in characters (default 64 Mi); past it: `malformed`. */
  readonly maxOutputChars?: number | undefined
}

/** What the exchanges of one run learned of the remote task. */
interface TaskState {
  taskId: string | undefined
  contextId: string | undefined
  state: Wire.TaskState | undefined
  /** The text of the latest status message (what an input-required task asks, why a task failed). */
  statusText: string
  /** The failure behind a model call's failure (a `Model` fails with a `ModelError` only). */
  failure: RemoteAgentFailed | undefined
  /** Whether the task was already told to stop (a timeout, an unanswered question): the run's end cancels it once. */
  cancelled: boolean
}

const defaultResubscribe: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis", 2).pipe(
  Schedule.while(({ attempt }) => attempt <= 5)
)

const textOfParts = (parts: ReadonlyArray<Wire.Part>): string =>
  parts.flatMap((part) => (part.text !== undefined ? [part.text] : part.data !== undefined ? [JSON.stringify(part.data)] : [])).join("")

/**
 * The line of a status message: a valet server's question as asked (its data part `{kind: "question", question}`:
 * the text part beside it adds how an A2A client answers, which is this module's business, not the person's); else
 * its text parts; else its data as JSON.
 */
const lineOf = (parts: ReadonlyArray<Wire.Part>): string => {
  for (const part of parts) {
    const data = part.data as { readonly kind?: unknown; readonly question?: unknown } | undefined
    if (typeof data === "object" && data !== null && data.kind === "question" && typeof data.question === "string") return data.question
  }
  const text = parts.flatMap((part) => (part.text !== undefined ? [part.text] : [])).join("")
  return text !== "" ? text : textOfParts(parts)
}

const audioTypes: Record<string, string> = { wav: "audio/wav", mp3: "audio/mpeg", flac: "audio/flac", ogg: "audio/ogg", webm: "audio/webm", m4a: "audio/mp4" }

/** A message's content as A2A parts. */
const partsOf = (content: Model.Content): Array<Wire.Part> => {
  if (typeof content === "string") return [{ text: content }]
  return content.map((part): Wire.Part => {
    switch (part.type) {
      case "text":
        return { text: part.text }
      case "image":
        return part.url !== undefined
          ? { url: part.url, mediaType: part.mediaType ?? "image/*" }
          : { raw: part.data ?? "", mediaType: part.mediaType ?? "image/png" }
      case "file":
        return {
          ...(part.url !== undefined ? { url: part.url } : { raw: part.data ?? "" }),
          mediaType: part.mediaType,
          ...(part.name !== undefined ? { filename: part.name } : {})
        }
      case "audio":
        return { raw: part.data, mediaType: audioTypes[part.format] ?? "application/octet-stream" }
    }
  })
}

/** The artifacts of a task, by id in the order first seen; `append: false` replaces, `true` adds. */
class Artifacts {
  private readonly texts = new Map<string, string>()
  replaceAll(artifacts: ReadonlyArray<Wire.Artifact> | undefined): void {
    this.texts.clear()
    for (const artifact of artifacts ?? []) this.texts.set(artifact.artifactId, textOfParts(artifact.parts))
  }
  update(event: Wire.TaskArtifactUpdateEvent): void {
    const text = textOfParts(event.artifact.parts)
    const id = event.artifact.artifactId
    this.texts.set(id, event.append === true ? (this.texts.get(id) ?? "") + text : text)
  }
  text(): string {
    return [...this.texts.values()].filter((text) => text !== "").join("\n")
  }
  /** The characters held, all artifacts together. */
  size(): number {
    let size = 0
    for (const text of this.texts.values()) size += text.length
    return size
  }
}

/** The most output a task may give, all artifacts together (`Options.maxOutputChars`): each event is capped, the sum must be too. */
const defaultMaxOutputChars = 64 * 1024 * 1024

/** Whether the remote task is done with this exchange: terminal, or waiting for input or authentication. */
const settled = (state: Wire.TaskState | undefined): boolean =>
  state !== undefined && (Wire.terminalStates.has(state) || state === "TASK_STATE_INPUT_REQUIRED" || state === "TASK_STATE_AUTH_REQUIRED")

/** A failure whose detail is one line: the remote's status text in it could otherwise fake lines of the CLI's output. */
const failedWith = (url: string, reason: string, detail: string, code = 0) => new RemoteAgentFailed({ url, code, reason, detail: Client.oneLine(detail) })

/** The most of a remote's status line shown as `Progress`. */
const maxProgressChars = 2000

/**
 * The `Model` of one run's exchanges: the last user message of a request goes to the remote task (a follow-up,
 * with the task's ids, when the task asked for input), and its artifact text comes back as the reply.
 */
const exchangeModel = (
  http: HttpClient.HttpClient,
  resolved: Client.Resolved,
  task: TaskState,
  run: Architecture.RunContext,
  resubscribe: Schedule.Schedule<unknown, unknown>,
  pollEvery: Duration.Input,
  maxOutputChars: number
): Model.Service => {
  const url = resolved.endpoint
  const exchange = (request: Model.Request, onChunk: (chunk: Model.Chunk) => Effect.Effect<void>): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const artifacts = new Artifacts()
    let emitted = ""
    /** Sends what the artifacts now hold beyond what was sent: a replacement that is no extension sends nothing. */
    const flush = (): Effect.Effect<void> => {
      const text = artifacts.text()
      if (text === emitted || !text.startsWith(emitted)) {
        emitted = text
        return Effect.void
      }
      const delta = text.slice(emitted.length)
      emitted = text
      return onChunk({ _tag: "TextDelta", index: 0, text: delta })
    }
    const status = (status: Wire.TaskStatus): Effect.Effect<void> => {
      task.state = status.state
      if (status.message === undefined) return Effect.void
      const text = lineOf(status.message.parts)
      task.statusText = text
      return Effect.provideService(
        Architecture.progress("a2a.status", { state: status.state, text: Client.oneLine(text, maxProgressChars) }),
        Architecture.CurrentRun,
        run
      )
    }
    /** Applies one event; answers whether to read on. */
    const apply = (event: Wire.StreamResponse): Effect.Effect<boolean, RemoteAgentFailed> =>
      Effect.flatMap(applyOne(event), (more) =>
        artifacts.size() > maxOutputChars
          ? Effect.fail(failedWith(url, "malformed", `the output of task ${task.taskId ?? "(none)"} is over ${maxOutputChars} characters`))
          : Effect.succeed(more))
    const applyOne = (event: Wire.StreamResponse): Effect.Effect<boolean> => {
      if ("task" in event) {
        task.taskId = event.task.id
        task.contextId = event.task.contextId
        // A snapshot (the first event, or a resubscription's): its artifacts are the whole text so far.
        artifacts.replaceAll(event.task.artifacts)
        return Effect.andThen(Effect.andThen(status(event.task.status), flush()), Effect.sync(() => !settled(task.state)))
      }
      if ("statusUpdate" in event) {
        task.taskId = event.statusUpdate.taskId
        task.contextId = event.statusUpdate.contextId
        return Effect.andThen(status(event.statusUpdate.status), Effect.sync(() => !settled(task.state)))
      }
      if ("artifactUpdate" in event) {
        task.taskId = event.artifactUpdate.taskId
        task.contextId = event.artifactUpdate.contextId
        artifacts.update(event.artifactUpdate)
        return Effect.as(flush(), true)
      }
      // A message instead of a task: the remote answered at once, with no task to follow.
      task.state = "TASK_STATE_COMPLETED"
      artifacts.replaceAll([{ artifactId: "message", parts: event.message.parts }])
      return Effect.as(flush(), false)
    }
    const consume = (events: Stream.Stream<Wire.StreamResponse, RemoteAgentFailed>) =>
      Effect.flatMap(Stream.runForEachWhile(events, apply), () =>
        settled(task.state)
          ? Effect.void
          : Effect.fail(failedWith(url, "stream_lost", `the stream of task ${task.taskId ?? "(none)"} ended before the task did`)))
    const resumable = (error: RemoteAgentFailed) => task.taskId !== undefined && (error.reason === "transport" || error.reason === "stream_lost")
    /** The task once more from its snapshot: `SubscribeToTask`, or `GetTask` when it ended meanwhile (subscribing to an ended task is `-32004`). */
    const resume = Effect.suspend(() =>
      Effect.catchIf(
        consume(Client.stream(http, resolved, "SubscribeToTask", { id: task.taskId })),
        (error) => error.reason === "json_rpc" && error.code === Wire.ErrorCode.unsupportedOperation,
        () => Effect.flatMap(Client.call(http, resolved, "GetTask", { id: task.taskId }, Wire.Task), (snapshot) => Effect.asVoid(apply({ task: snapshot })))
      ))
    const message = request.messages?.at(-1)
    const content: Model.Content = message !== undefined && message.role === "user" ? message.content : ""
    const followUp = task.state === "TASK_STATE_INPUT_REQUIRED" && task.taskId !== undefined
    const sent: Wire.Message = {
      messageId: crypto.randomUUID(),
      role: "ROLE_USER",
      parts: partsOf(content),
      ...(followUp ? { taskId: task.taskId } : {}),
      ...(task.contextId !== undefined ? { contextId: task.contextId } : {})
    }
    // Cleared before sending: the state read after the call is the answer to this message.
    if (followUp) task.state = "TASK_STATE_WORKING"
    const streamed = consume(Client.stream(http, resolved, "SendStreamingMessage", { message: sent })).pipe(
      Effect.catchIf(resumable, () => Effect.retry(resume, { schedule: resubscribe, while: resumable }))
    )
    // A card without streaming: `SendMessage` (which waits for the task to settle, unless the server answers at once),
    // then `GetTask` every `poll` until it has.
    const poll = (): Effect.Effect<void, RemoteAgentFailed> =>
      settled(task.state) ? Effect.void : Effect.sleep(pollEvery).pipe(
        Effect.andThen(Client.call(http, resolved, "GetTask", { id: task.taskId }, Wire.Task)),
        Effect.flatMap((snapshot) => apply({ task: snapshot })),
        Effect.andThen(Effect.suspend(poll))
      )
    const whole = Client.call(http, resolved, "SendMessage", { message: sent }, Wire.SendMessageResponse).pipe(
      Effect.flatMap(apply),
      Effect.andThen(Effect.suspend(poll))
    )
    return (resolved.card.capabilities.streaming === false ? whole : streamed).pipe(
      Effect.map((): Model.Response => ({
        id: task.taskId ?? sent.messageId,
        model: resolved.card.name,
        choices: [{ index: 0, text: artifacts.text(), toolCalls: [], finishReason: "stop" }],
        usage: Model.emptyUsage
      })),
      Effect.mapError((error) => {
        task.failure = error
        return new ModelError.InvalidRequest({ status: error.code, message: error.message })
      })
    )
  }
  const noChunks = () => Effect.void
  return Model.make({
    generate: (request) => exchange(request, noChunks),
    streamInto: exchange,
    stream: (request) => Stream.flatMap(Stream.fromEffect(exchange(request, noChunks)), (response) => Stream.fromIterable(Model.toChunks(response)))
  })
}

/** Cancels the remote task, at most `timeout` long, its failure only logged: the run ends either way. */
const cancelRemote = (http: HttpClient.HttpClient, resolved: Client.Resolved, taskId: string, timeout: Duration.Input) =>
  Client.call(http, resolved, "CancelTask", { id: taskId }, Wire.Task).pipe(
    Effect.timeout(timeout),
    Effect.tapError((error) => Effect.logWarning(`A2A: could not cancel task ${taskId} at ${resolved.endpoint}: ${error.message}`)),
    Effect.ignore,
    Effect.uninterruptible
  )

/** The architecture of the remote agent `options.url`, over the `HttpClient` in context. */
export const make = (options: Options): Architecture.Architecture<HttpClient.HttpClient> =>
  Architecture.make({ name: "a2a", program: program(options), remote: true })

/**
 * `fetch` that follows no redirect: a 3xx comes back as it is (a `RemoteAgentFailed` `http`), so the headers never
 * go to another host through a redirect, and a redirected card is not read as the agent's own.
 */
export const withFetch = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, HttpClient.HttpClient>> =>
  effect.pipe(Effect.provide(FetchHttpClient.layer), Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" }))

/** The architecture of the remote agent `options.url`, over `fetch` (nothing to provide; no redirect followed). */
export const makeFetch = (options: Options): Architecture.Architecture<never> => {
  const run = program(options)
  return Architecture.make({ name: "a2a", program: (input) => withFetch(run(input)), remote: true })
}

/** The root of a run: the run a supervisor's delegations, a debate's rounds… all belong to. */
const rootOf = (run: Architecture.RunContext): Architecture.RunContext => (run.parent === undefined ? run : rootOf(run.parent))

const program = (options: Options) => {
  const resubscribe = options.resubscribe ?? defaultResubscribe
  const cancelTimeout = options.cancelTimeout ?? "5 seconds"
  // The card is read once per root run: a supervisor delegating to the agent five times reads it once, and a card
  // that changed is read again by the next root run. Weak: a finished run's entry goes with it.
  const cards = new WeakMap<Architecture.RunContext, Client.Resolved>()
  return (input: Architecture.Input) =>
      Effect.gen(function*() {
        const http = yield* HttpClient.HttpClient
        const run = yield* Architecture.CurrentRun
        const root = rootOf(run)
        const cached = cards.get(root)
        // `timeout` bounds the card read too: a remote that accepts and never answers fails the run within it.
        const read = options.timeout === undefined ? Client.card(http, options) : Effect.timeoutOrElse(Client.card(http, options), {
          duration: options.timeout,
          orElse: () => Effect.fail(failedWith(options.url, "timeout", `the agent card was not read within ${Duration.format(Duration.fromInputUnsafe(options.timeout!))}`))
        })
        const resolved = cached ?? (yield* read)
        if (cached === undefined) cards.set(root, resolved)
        const task: TaskState = { taskId: undefined, contextId: undefined, state: undefined, statusText: "", failure: undefined, cancelled: false }
        const model = exchangeModel(http, resolved, task, run, resubscribe, options.poll ?? "1 second", options.maxOutputChars ?? defaultMaxOutputChars)
        const url = resolved.endpoint
        /** Cancels the remote task when there is one still live that was not told to stop yet. */
        const cancelOnce = (): Effect.Effect<void> => {
          if (task.taskId === undefined || task.cancelled || (task.state !== undefined && Wire.terminalStates.has(task.state))) return Effect.void
          task.cancelled = true
          return cancelRemote(http, resolved, task.taskId, cancelTimeout)
        }
        const program = Effect.gen(function*() {
          let request: Model.Request = { messages: [Model.user(input.promptParts ?? input.prompt)] }
          for (let exchange = 1;; exchange++) {
            const sent = Architecture.generate(request, { step: `a2a.exchange_${exchange}` }).pipe(
              Effect.provideService(Model.Model, model),
              Effect.catchIf(ModelError.isModelError, (error) => Effect.fail(task.failure ?? error))
            )
            const response = yield* (options.timeout === undefined ? sent : Effect.timeoutOrElse(sent, {
              duration: options.timeout,
              // The task goes on without a reader unless it is told to stop.
              orElse: () =>
                Effect.andThen(
                  cancelOnce(),
                  Effect.fail(failedWith(url, "timeout", `task ${task.taskId ?? "(not started)"} did not settle within ${Duration.format(Duration.fromInputUnsafe(options.timeout!))}; it was cancelled`))
                )
            }))
            const output = Model.text(response)
            yield* Architecture.setOutput(output)
            const state = task.state
            const ids = { taskId: task.taskId, contextId: task.contextId }
            switch (state) {
              case "TASK_STATE_COMPLETED":
                return { output, metadata: { a2a: { ...ids, exchanges: exchange } } }
              case "TASK_STATE_INPUT_REQUIRED": {
                const answer = yield* Architecture.ask(task.statusText !== "" ? task.statusText : "The remote agent asks for input.", Schema.String).pipe(
                  Effect.tapError((_: Unanswered) => cancelOnce())
                )
                request = { messages: [Model.user(answer)] }
                continue
              }
              case "TASK_STATE_FAILED":
                return yield* Effect.fail(failedWith(url, "task_failed", `task ${task.taskId} failed: ${task.statusText || "(no message)"}`))
              case "TASK_STATE_REJECTED":
                return yield* Effect.fail(failedWith(url, "task_rejected", `task ${task.taskId} was rejected: ${task.statusText || "(no message)"}`))
              case "TASK_STATE_CANCELED":
                return yield* Effect.fail(failedWith(url, "task_canceled", `task ${task.taskId} was canceled by the remote agent`))
              default:
                return yield* Effect.fail(failedWith(url, "task_failed", `task ${task.taskId} stopped in ${state ?? "no state"}${task.statusText !== "" ? `: ${task.statusText}` : ""}`))
            }
          }
        })
        // Any end but success leaves no reader for the remote task: an interrupt, and a failure too (a malformed
        // event, a stream lost for good, a JSON-RPC error mid-stream, a task stopped in AUTH_REQUIRED).
        // A task the server says it no longer knows (-32001) has nothing left to cancel.
        const gone = (cause: Cause.Cause<unknown>) => {
          const error = Cause.findError(cause)
          return Result.isSuccess(error) && error.success instanceof RemoteAgentFailed && error.success.reason === "json_rpc" &&
            error.success.code === Wire.ErrorCode.taskNotFound
        }
        return yield* Effect.onExit(program, (exit) => (Exit.isFailure(exit) && !gone(exit.cause) ? cancelOnce() : Effect.void))
      })
}
