/**
 * Where the commands write: whole lines, and on a terminal a status line rewritten in place; the progress line.
 */
import { Effect } from "effect"
import type * as Evaluate from "../../rollouts/Evaluate.js"


/** Where a command writes: whole lines, and a status line that a terminal overwrites in place. */
export interface Output {
  readonly tty: boolean
  readonly line: (text: string) => Effect.Effect<void>
  /** On a terminal: replaces the status line. Otherwise: printed as a line. */
  readonly status: (text: string) => Effect.Effect<void>
}

/** A stream of the process (stdout, stderr): a live status line on a terminal, plain lines otherwise. */
export const streamOutput = (stream: NodeJS.WriteStream): Output => {
  const tty = stream.isTTY === true
  let statusShown = false
  return {
    tty,
    line: (text) =>
      Effect.sync(() => {
        stream.write(`${statusShown ? "\r\x1b[K" : ""}${text}\n`)
        statusShown = false
      }),
    status: (text) =>
      Effect.sync(() => {
        if (tty) {
          stream.write(`\r\x1b[K${text}`)
          statusShown = true
        } else stream.write(`${text}\n`)
      })
  }
}

/** The process's stdout: a live status line on a terminal, plain lines otherwise. */
export const stdoutOutput = (): Output => streamOutput(process.stdout)

/** The process's stderr (progress that leaves stdout to the data): a live status line on a terminal. */
export const stderrOutput = (): Output => streamOutput(process.stderr)

/** An output that keeps what is written (for tests). */
export const memoryOutput = (tty = false): Output & { readonly lines: Array<string> } => {
  const lines: Array<string> = []
  return {
    tty,
    lines,
    line: (text) => Effect.sync(() => void lines.push(text)),
    status: (text) => Effect.sync(() => void lines.push(tty ? `\r${text}` : text))
  }
}

/** A duration for people: `1.2 s`, `42 s`. */
export const seconds = (ms: number): string => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`)

/** `12/30 done · 57 calls · 1.90 problems/s · ETA 9 s · 11 correct · 0 failed` */
export const progressLine = (progress: Evaluate.Progress): string => {
  const ran = progress.done - progress.resumed
  const rate = progress.elapsedMs > 0 ? (ran * 1000) / progress.elapsedMs : 0
  const left = progress.total - progress.done
  const eta = left === 0 ? "0 s" : rate > 0 ? seconds((left / rate) * 1000) : "?"
  return `${progress.done}/${progress.total} done · ${progress.calls} calls · ${rate.toFixed(2)} problems/s · ETA ${eta} · ` +
    `${progress.correct} correct · ${progress.failures} failed`
}

/** How a problem ended, in a word or two. */
export const verdict = (result: Evaluate.ProblemResult): string =>
  result.error !== undefined
    ? `FAILED (${result.error})`
    : result.isCorrect === null
    ? "unscored"
    : result.isCorrect
    ? "correct"
    : "wrong"

/** A text on one line, cut to `max` characters. */
export const oneLine = (text: string, max = 60): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}
