/**
 * A run as an A2A task (taskId = runId): its events mapped to `StreamResponse`s, and those folded into a `Task`.
 * One mapping serves every method: a stream sends the responses, `SendMessage` and `GetTask` fold them, and
 * `SubscribeToTask` folds the log up to where it joins and sends the rest, so the snapshot and the live part split
 * one ordered log (no gap, no duplicate).
 *
 * | valet | A2A |
 * | --- | --- |
 * | running | `TASK_STATE_WORKING` |
 * | a tool call waits for approval, a question for an answer | `TASK_STATE_INPUT_REQUIRED`, the request as a data part |
 * | completed | `TASK_STATE_COMPLETED`, the artifact `output` holding the whole answer |
 * | completed, interrupted `cancelled` | `TASK_STATE_CANCELED` |
 * | completed, interrupted otherwise (a budget…) | `TASK_STATE_COMPLETED`, `metadata.valet.interrupted` |
 * | failed | `TASK_STATE_FAILED`, the error's line as the status message, `metadata.valet.error` |
 * | failed after an input guardrail tripped | `TASK_STATE_REJECTED` |
 * | the root's text as it comes | artifact updates (`append: false` at each model call's first delta) |
 * | `ToolCalled`, `SubRunStarted`, `Progress` | a WORKING status update naming it |
 */
import { createHash } from "node:crypto"
import type * as AgentEvent from "../../../core/AgentEvent.js"
import type * as Wire from "../../../providers/internal/a2a/wire.js"
import type * as Runs from "../../Runs.js"
import type * as History from "./history.js"
import * as Parts from "./parts.js"

/** What names a task: its id (the run's), its context (the thread's id, else the run's session), its root session. */
export interface TaskRef {
  readonly id: string
  readonly contextId: string
  readonly rootSession: string
}

const ownerPrefix = (owner: string): string => `a2a.${createHash("sha256").update(owner).digest("hex").slice(0, 16)}.`

/**
 * The thread of a context the client named, for one owner. Thread ids are global, so a client-chosen contextId is
 * not made a thread of that id (another owner could squat it, or learn from a refusal that it exists): it is the
 * owner's own thread `a2a.<hash of owner>.<contextId>`, which no other owner can reach, and the client keeps seeing
 * its contextId (`contextOf`).
 */
export const contextThreadId = (owner: string, contextId: string): string => `${ownerPrefix(owner)}${contextId}`

/** The longest contextId a client may choose (a thread id is at most 128 characters, the owner's prefix included). */
export const maxContextIdLength = 128 - ownerPrefix("").length

/** The contextId a client sees for a thread of `owner`: the id it chose (`contextThreadId`), else the thread's own id. */
export const contextOf = (owner: string, threadId: string): string => {
  const prefix = ownerPrefix(owner)
  return threadId.startsWith(prefix) ? threadId.slice(prefix.length) : threadId
}

/** The task of a run as its owner sees it. */
export const refOf = (view: Runs.RunView, owner: string): TaskRef => ({
  id: view.runId,
  contextId: view.threadId !== undefined ? contextOf(owner, view.threadId) : view.sessionId,
  rootSession: view.sessionId
})

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * The user message a task started with: as received (`first`, its parts rebuilt from the run's input), else with
 * an id derived from the task's.
 */
export const inputMessage = (ref: TaskRef, view: Runs.RunView, first?: History.FirstMessage): Wire.Message => ({
  ...first,
  role: "ROLE_USER",
  messageId: first?.messageId ?? `${ref.id}-input`,
  taskId: ref.id,
  contextId: ref.contextId,
  parts: Parts.partsOfInput(view.input, view.inputParts)
})

/** A task just started: WORKING, its history the user message. */
export const started = (ref: TaskRef, view: Runs.RunView, first?: History.FirstMessage): Wire.Task => ({
  id: ref.id,
  contextId: ref.contextId,
  status: { state: "TASK_STATE_WORKING", timestamp: iso(view.createdAt) },
  history: [inputMessage(ref, view, first)]
})

/** The task with `message` last in its history (a message already there, by id, is not added twice). */
export const withMessage = (task: Wire.Task, message: Wire.Message): Wire.Task =>
  task.history?.some((found) => found.messageId === message.messageId) === true
    ? task
    : { ...task, history: [...(task.history ?? []), message] }

/**
 * The states a run's task can be in, from its summary alone (no fold of its log): one for an ended or waiting run,
 * but a failed run is FAILED or, after an input guardrail tripped, REJECTED (that takes its events).
 */
export const statesOf = (summary: Runs.RunSummary): ReadonlyArray<Wire.TaskState> => {
  switch (summary.status) {
    case "running":
      // Between a person's answer and the run's next step, the log's last status may still be a question.
      return ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
    case "waiting":
      return ["TASK_STATE_INPUT_REQUIRED"]
    case "completed":
      return [summary.interrupted === true && summary.interruptionReason === "cancelled" ? "TASK_STATE_CANCELED" : "TASK_STATE_COMPLETED"]
    case "failed":
      return ["TASK_STATE_FAILED", "TASK_STATE_REJECTED"]
  }
}

/** A request of the run to a person: an approval of a tool call, or an answer to a question. */
export type InputRequest =
  | { readonly kind: "approval"; readonly sessionId: string; readonly toolCallId: string; readonly name: string; readonly arguments: string }
  | { readonly kind: "question"; readonly sessionId: string; readonly questionId: string; readonly question: string; readonly schema: unknown }

/** The requests waiting on a run, from its view (`pending`, `questions`). */
export const requestsOf = (view: Runs.RunView): ReadonlyArray<InputRequest> => [
  ...(view.pending ?? []).map((call): InputRequest => ({ kind: "approval", sessionId: call.sessionId, toolCallId: call.toolCallId, name: call.name, arguments: call.arguments })),
  ...(view.questions ?? []).map((question): InputRequest => ({ kind: "question", sessionId: question.sessionId, questionId: question.questionId, question: question.question, schema: question.schema }))
]

const agentMessage = (ref: TaskRef, messageId: string, parts: ReadonlyArray<Wire.Part>, metadata?: Record<string, unknown>): Wire.Message => ({
  role: "ROLE_AGENT",
  messageId,
  taskId: ref.id,
  contextId: ref.contextId,
  parts,
  ...(metadata !== undefined ? { metadata } : {})
})

/** The status of a task waiting for a person: the request in words, and as a data part the answer refers to. */
export const inputRequired = (ref: TaskRef, request: InputRequest, messageId: string, timestamp: string): Wire.TaskStatus => ({
  state: "TASK_STATE_INPUT_REQUIRED",
  timestamp,
  message: agentMessage(ref, messageId, request.kind === "approval"
    ? [
      {
        text: `The tool call ${request.name} (${request.toolCallId}) waits for approval: answer with a data part {"approved": true|false, "reason"?, "arguments"?, "toolCallId"?}.`
      },
      { data: { kind: "approval", toolCallId: request.toolCallId, sessionId: request.sessionId, name: request.name, arguments: request.arguments }, mediaType: "application/json" }
    ]
    : [
      { text: `${request.question}\n(answer with text, or a data part {"answer": …, "questionId"?})` },
      { data: { kind: "question", questionId: request.questionId, sessionId: request.sessionId, question: request.question, schema: request.schema }, mediaType: "application/json" }
    ])
})

const keyOf = (request: InputRequest): string =>
  `${request.sessionId}/${request.kind === "approval" ? request.toolCallId : request.questionId}`

/** A mapped event: what to send, and whether a live stream ends after it (a terminal or input-required state). */
export interface Mapped {
  readonly responses: ReadonlyArray<Wire.StreamResponse>
  readonly end: boolean
}

const nothing: Mapped = { responses: [], end: false }

/** Maps a run's events, in order, to A2A stream responses; it keeps what the mapping needs (stateful: one per log). */
export class Mapper {
  /** The next root text delta adds to the artifact (else it starts the latest turn's text over). */
  private append = false
  private readonly pending = new Map<string, InputRequest>()
  private inputTripped = false
  constructor(readonly ref: TaskRef) {}

  private status(status: Wire.TaskStatus, metadata?: Record<string, unknown>): Wire.StreamResponse {
    return { statusUpdate: { taskId: this.ref.id, contextId: this.ref.contextId, status, ...(metadata !== undefined ? { metadata } : {}) } }
  }

  private working(seq: number, timestamp: number, line: string, event: Record<string, unknown>): Mapped {
    return {
      responses: [this.status({
        state: "TASK_STATE_WORKING",
        timestamp: iso(timestamp),
        message: agentMessage(this.ref, `${this.ref.id}-${seq}`, [{ text: line }], { valet: { event } })
      })],
      end: false
    }
  }

  /** The status after a request was answered: input-required while another still waits, else working. */
  private afterAnswer(seq: number, timestamp: number): Mapped {
    const next = this.pending.values().next()
    return next.done === true
      ? { responses: [this.status({ state: "TASK_STATE_WORKING", timestamp: iso(timestamp) })], end: false }
      : { responses: [this.status(inputRequired(this.ref, next.value, `${this.ref.id}-${seq}`, iso(timestamp)))], end: true }
  }

  private asked(request: InputRequest, seq: number, timestamp: number): Mapped {
    this.pending.set(keyOf(request), request)
    return { responses: [this.status(inputRequired(this.ref, request, `${this.ref.id}-${seq}`, iso(timestamp)))], end: true }
  }

  /** The responses of the `seq`-th event. */
  map(seq: number, event: AgentEvent.AgentEvent): Mapped {
    const root = event.sessionId === this.ref.rootSession
    switch (event._tag) {
      case "ModelCalled":
        if (root) this.append = false
        return nothing
      case "TextDelta": {
        if (!root || event.index !== 0 || event.text === "") return nothing
        const append = this.append
        this.append = true
        return {
          responses: [{
            artifactUpdate: {
              taskId: this.ref.id,
              contextId: this.ref.contextId,
              artifact: { artifactId: "output", name: "output", parts: [{ text: event.text }] },
              append,
              lastChunk: false
            }
          }],
          end: false
        }
      }
      case "ToolCalled":
        return this.working(seq, event.timestamp, `calling ${event.name}`, { _tag: event._tag, sessionId: event.sessionId, toolCallId: event.toolCallId, name: event.name })
      case "SubRunStarted":
        return this.working(seq, event.timestamp, `${event.role}: ${event.agent} started`, { _tag: event._tag, sessionId: event.sessionId, childSessionId: event.childSessionId, role: event.role, agent: event.agent })
      case "Progress":
        return this.working(seq, event.timestamp, event.name, { _tag: event._tag, sessionId: event.sessionId, name: event.name })
      case "ApprovalRequested":
        return this.asked({ kind: "approval", sessionId: event.sessionId, toolCallId: event.toolCallId, name: event.name, arguments: event.arguments }, seq, event.timestamp)
      case "QuestionAsked":
        return this.asked({ kind: "question", sessionId: event.sessionId, questionId: event.questionId, question: event.question, schema: event.schema }, seq, event.timestamp)
      case "ApprovalDecided":
        this.pending.delete(`${event.sessionId}/${event.toolCallId}`)
        return this.afterAnswer(seq, event.timestamp)
      case "QuestionAnswered":
        this.pending.delete(`${event.sessionId}/${event.questionId}`)
        return this.afterAnswer(seq, event.timestamp)
      case "GuardrailTripped":
        if (root && event.kind === "input") this.inputTripped = true
        return nothing
      case "RunCompleted":
        return root ? this.completed(event.result, event.timestamp) : nothing
      default:
        return nothing
    }
  }

  private completed(result: AgentEvent.RunResult, timestamp: number): Mapped {
    const cancelled = result.interrupted && result.interruptionReason === "cancelled"
    const parts: Array<Wire.Part> = [{ text: result.output }]
    if (result.value !== undefined) parts.push({ data: result.value, mediaType: "application/json" })
    const metadata = result.interrupted && !cancelled
      ? { valet: { interrupted: true, ...(result.interruptionReason !== undefined ? { interruptionReason: result.interruptionReason } : {}) } }
      : undefined
    return {
      responses: [
        {
          artifactUpdate: {
            taskId: this.ref.id,
            contextId: this.ref.contextId,
            artifact: { artifactId: "output", name: "output", parts },
            append: false,
            lastChunk: true
          }
        },
        this.status({ state: cancelled ? "TASK_STATE_CANCELED" : "TASK_STATE_COMPLETED", timestamp: iso(timestamp) }, metadata)
      ],
      end: true
    }
  }

  /** The responses of the run's failure (its event stream failed with it). */
  failed(failure: Runs.RunFailed, timestamp: number): Mapped {
    return {
      responses: [this.status(
        {
          state: this.inputTripped ? "TASK_STATE_REJECTED" : "TASK_STATE_FAILED",
          timestamp: iso(timestamp),
          message: agentMessage(this.ref, `${this.ref.id}-error`, [{ text: failure.message }])
        },
        { valet: { error: failure.error } }
      )],
      end: true
    }
  }
}

/** A task with a response applied: a task replaces it, a status update sets its status (its message joins the history), an artifact update adds to or replaces an artifact. */
export const apply = (task: Wire.Task, response: Wire.StreamResponse): Wire.Task => {
  if ("task" in response) return response.task
  if ("statusUpdate" in response) {
    const { metadata, status } = response.statusUpdate
    // The agent's status messages are turns of the task too: its history keeps them, as the SDK's server does.
    const withStatus = status.message !== undefined ? withMessage(task, status.message) : task
    return { ...withStatus, status, ...(metadata !== undefined ? { metadata } : {}) }
  }
  if ("artifactUpdate" in response) {
    const { artifact, append } = response.artifactUpdate
    const artifacts = [...(task.artifacts ?? [])]
    const at = artifacts.findIndex((found) => found.artifactId === artifact.artifactId)
    if (at === -1) {
      artifacts.push(artifact)
    } else if (append === true) {
      // Text added to text joins it: a snapshot holds the text so far as one part, not a part per delta.
      const parts = [...artifacts[at]!.parts]
      for (const part of artifact.parts) {
        const last = parts[parts.length - 1]
        if (last !== undefined && last.text !== undefined && part.text !== undefined && Object.keys(last).length === 1 && Object.keys(part).length === 1) {
          parts[parts.length - 1] = { text: last.text + part.text }
        } else {
          parts.push(part)
        }
      }
      artifacts[at] = { ...artifacts[at]!, parts }
    } else {
      artifacts[at] = artifact
    }
    return { ...task, artifacts }
  }
  return task
}

/** The task with at most the last `historyLength` messages of its history (0: none; unset: all). */
export const withHistoryLength = (task: Wire.Task, historyLength: number | undefined): Wire.Task => {
  if (historyLength === undefined || task.history === undefined) return task
  if (historyLength <= 0) {
    const { history: _, ...rest } = task
    return rest
  }
  return { ...task, history: task.history.slice(-historyLength) }
}

/** The task without its artifacts (ListTasks without `includeArtifacts`). */
export const withoutArtifacts = (task: Wire.Task): Wire.Task => {
  const { artifacts: _, ...rest } = task
  return rest
}
