/**
 * The paced scheduler: Effect's `MixedScheduler` with one change, how its turns are started. The default scheduler
 * starts each fiber's batch of work on its own `setImmediate`, and every batch queued before the event loop's check
 * phase runs in that phase, however long they take together. With hundreds of episodes on one event loop, that is
 * the whole wave of answers that came in at once: tens of milliseconds in which no socket is read, no timer fires
 * and (undici writes a request on a reused connection only at the next check phase) no request is written.
 *
 * Here the batches wait in one queue, first in first out, and one `setImmediate` runs them until a slice of time
 * (`sliceMs`, 1 ms by default) is spent, then leaves the rest for the next turn of the loop: answers are read and
 * requests written between slices, so each episode's next request goes out about a slice after its step ran.
 * Nothing is reordered or dropped; a batch is never cut (a fiber's own work between its yields runs whole).
 */
import { Scheduler } from "effect"

/** Options of `make`. */
export interface Options {
  /** How long one turn of the event loop runs queued work before it lets I/O in, in milliseconds (default 1). */
  readonly sliceMs?: number | undefined
  /** The clock the slice is measured on (default `performance.now`); tests give a counter. */
  readonly now?: (() => number) | undefined
}

/** The default slice: a step of an episode is about half a millisecond of CPU; a slice holds one or two. */
const defaultSliceMs = 1

interface Entry {
  run: (() => void) | undefined
}

// Where `setImmediate` is missing (a browser, a worker runtime), a zero timeout: the same turn of the loop later.
const nextTurn: (f: () => void) => void = typeof globalThis.setImmediate === "function"
  ? (f) => {
    globalThis.setImmediate(f)
  }
  : (f) => {
    setTimeout(f, 0)
  }

/** The queue and its pump: what `MixedScheduler` calls instead of `setImmediate`. Returns the cancel it expects. */
export const makeQueue = (options: Options = {}): (f: () => void) => () => void => {
  const sliceMs = options.sliceMs ?? defaultSliceMs
  const now = options.now ?? (() => performance.now())
  // Entries already taken are cleared (`undefined`) so that what they hold is not kept until the next compaction.
  let queue: Array<Entry | undefined> = []
  let head = 0
  let pumping = false
  // `pumping` stays true while a pump runs: work queued by the tasks of this slice waits for the one next pump
  // scheduled below, not a second pump of its own (two pumps a turn would run two slices back to back, and with
  // a backlog their number would double every turn).
  const pump = (): void => {
    const until = now() + sliceMs
    try {
      while (head < queue.length) {
        const entry = queue[head]
        queue[head++] = undefined
        const run = entry?.run
        if (entry === undefined || run === undefined) continue
        entry.run = undefined
        run()
        if (now() >= until) break
      }
    } finally {
      if (head >= queue.length) {
        queue = []
        head = 0
      } else if (head >= 1024) {
        queue = queue.slice(head)
        head = 0
      }
      if (head < queue.length) nextTurn(pump)
      else pumping = false
    }
  }
  return (f) => {
    const entry: Entry = { run: f }
    queue.push(entry)
    if (!pumping) {
      pumping = true
      nextTurn(pump)
    }
    // `MixedScheduler` cancels a pending turn when it runs the fiber's work itself (`flush`, as `runSync` does).
    return () => {
      entry.run = undefined
    }
  }
}

/** A scheduler whose turns are paced (see the module comment). One queue per scheduler. */
export const make = (options: Options = {}): Scheduler.Scheduler => new Scheduler.MixedScheduler("async", makeQueue(options))
