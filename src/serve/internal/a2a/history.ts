/**
 * The messages clients sent to each task, as received, for its `history` (spec: "If there are multiple turns for a
 * task, these are stored in history"; the SDK's own server keeps the incoming message as it came). The run keeps
 * its input, not the message it came in, nor the answers a person gave to what it asked; this keeps them, bounded:
 * `maxTasks` tasks (the oldest forgotten first: a task forgotten here shows its input under a derived messageId) and
 * `maxPerTask` messages a task (its first and its latest).
 */
import type * as Wire from "../../../providers/internal/a2a/wire.js"

/** A message a task received: `at` is how many of the run's events there were then (where it goes in the history). */
export interface Received {
  readonly message: Wire.Message
  readonly at: number
}

/** The first message of a task without its parts (the run keeps its input: `Tasks.inputMessage` rebuilds them). */
export type FirstMessage = Omit<Wire.Message, "parts">

/** Per task: its first message (no parts) and the later ones (continuations), in the order received. */
export class Messages {
  private readonly tasks = new Map<string, { first: FirstMessage | undefined; readonly later: Array<Received> }>()
  constructor(readonly maxTasks = 1000, readonly maxPerTask = 100) {}

  private entry(taskId: string) {
    let entry = this.tasks.get(taskId)
    if (entry === undefined) {
      entry = { first: undefined, later: [] }
      this.tasks.set(taskId, entry)
      if (this.tasks.size > this.maxTasks) this.tasks.delete(this.tasks.keys().next().value!)
    }
    return entry
  }

  /** The task started with `message` (kept without its parts). */
  started(taskId: string, message: Wire.Message): void {
    const { parts: _, ...rest } = message
    this.entry(taskId).first = rest
  }

  /** Keeps a continuation, unless the task already has a message of that id (a retry): false then. */
  add(taskId: string, message: Wire.Message, at: number): boolean {
    if (this.has(taskId, message.messageId)) return false
    const entry = this.entry(taskId)
    entry.later.push({ message, at })
    if (entry.later.length > this.maxPerTask - 1) entry.later.shift()
    return true
  }

  /** Forgets a continuation that was not taken (its answer was refused). */
  remove(taskId: string, messageId: string): void {
    const later = this.tasks.get(taskId)?.later
    const at = later?.findIndex((received) => received.message.messageId === messageId) ?? -1
    if (at !== -1) later!.splice(at, 1)
  }

  /** Whether the task has a message of that id. */
  has(taskId: string, messageId: string): boolean {
    const entry = this.tasks.get(taskId)
    return entry !== undefined && (entry.first?.messageId === messageId || entry.later.some((received) => received.message.messageId === messageId))
  }

  /** The task's first message (without parts), if kept. */
  first(taskId: string): FirstMessage | undefined {
    return this.tasks.get(taskId)?.first
  }

  /** The task's continuations, in the order received. */
  later(taskId: string): ReadonlyArray<Received> {
    return this.tasks.get(taskId)?.later ?? []
  }
}
