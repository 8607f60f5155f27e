/**
 * How a rollout reports: the progress line (`rollout: 37/256 episodes · 0 failed · 142 steps · 1830 tokens/s · reward
 * mean 0.420 · ETA 12 s`) and the summary line for people, or the same counts as JSON lines for a program (`--progress
 * json`; `--processes` reads its processes' reports this way).
 */
import { Effect } from "effect"
import { type Output, seconds } from "./output.js"

/** How far a rollout got: what the progress line and the summary show. */
export interface Progress {
  /** Episodes in the run: tasks × group. */
  readonly total: number
  /** Episodes ended (recorded or failed). */
  readonly done: number
  readonly failed: number
  /** Steps appended so far (of ended and running episodes). */
  readonly steps: number
  /** Completion tokens of the steps appended so far. */
  readonly outputTokens: number
  /** The sum and count of the episode rewards of the recorded episodes that were scored. */
  readonly rewardSum: number
  readonly rewarded: number
  readonly elapsedMs: number
}

const rate = (count: number, elapsedMs: number): number => (elapsedMs > 0 ? (count * 1000) / elapsedMs : 0)

const rewardMean = (progress: Progress): string =>
  progress.rewarded === 0 ? "reward mean –" : `reward mean ${(progress.rewardSum / progress.rewarded).toFixed(3)}`

/**
 * The progress line: `rollout: 37/256 episodes · 1 failed · 142 steps · 1830 tokens/s · reward mean 0.420 · ETA 12 s`.
 * The ETA is the episodes left at the rate episodes ended so far (`?` before the first ends).
 */
export const progressLine = (progress: Progress): string => {
  const episodesPerSecond = rate(progress.done, progress.elapsedMs)
  const left = progress.total - progress.done
  const eta = left === 0 ? "0 s" : episodesPerSecond > 0 ? seconds((left / episodesPerSecond) * 1000) : "?"
  return `rollout: ${progress.done}/${progress.total} episodes · ${progress.failed} failed · ${progress.steps} steps · ` +
    `${Math.round(rate(progress.outputTokens, progress.elapsedMs))} tokens/s · ${rewardMean(progress)} · ETA ${eta}`
}

/** What a rollout did. */
export interface Summary extends Progress {
  readonly tasks: number
  readonly skippedLines: number
}

/**
 * The summary line: `rollout: 256 episodes of 32 tasks · 255 recorded · 1 failed · 1536 steps · 12288 tokens
 * (2083 tokens/s) · 43.4 episodes/s · reward mean 0.420 · 0 malformed lines skipped · 5.9 s`.
 */
export const summaryLine = (summary: Summary): string =>
  `rollout: ${summary.total} episodes of ${summary.tasks} tasks · ${summary.done - summary.failed} recorded · ` +
  `${summary.failed} failed · ${summary.steps} steps · ${summary.outputTokens} tokens ` +
  `(${Math.round(rate(summary.outputTokens, summary.elapsedMs))} tokens/s) · ` +
  `${rate(summary.done, summary.elapsedMs).toFixed(2)} episodes/s · ${rewardMean(summary)} · ` +
  `${summary.skippedLines} malformed line${summary.skippedLines === 1 ? "" : "s"} skipped · ${seconds(summary.elapsedMs)}`


/** How `valet rollout` reports its progress: lines for people, or JSON lines for a program. */
export type ProgressFormat = "line" | "json"

/** Where a rollout reports: the header and skipped lines, failed episodes, progress, the summary. */
export interface Report {
  /** The header and the skipped task lines (a process's parent reports those itself). */
  readonly announce: Output
  readonly line: (text: string) => Effect.Effect<void>
  readonly progress: (progress: Progress) => Effect.Effect<void>
  readonly summary: (summary: Summary) => Effect.Effect<void>
}

const silent: Output = { tty: false, line: () => Effect.void, status: () => Effect.void }

/** The report of `format` on `output`: the progress line and the summary line, or JSON lines. */
export const reportOf = (format: ProgressFormat, output: Output): Report =>
  format === "json"
    ? {
      announce: silent,
      line: (text) => output.line(JSON.stringify({ type: "line", text })),
      progress: (progress) => output.line(JSON.stringify({ type: "progress", ...progress })),
      summary: (summary) => output.line(JSON.stringify({ type: "summary", ...summary }))
    }
    : {
      announce: output,
      line: output.line,
      progress: (progress) => output.status(progressLine(progress)),
      summary: (summary) => output.line(summaryLine(summary))
    }


/**
 * The progress shown through `report` when it moved since last shown (episodes done or steps): a plain-lines log gets
 * no repeats while a long step runs. `last` shows it whatever, once, for the end.
 */
export const progressShown = (progress: Effect.Effect<Progress>, report: Report) => {
  let shown = ""
  const show = Effect.flatMap(progress, (now) => {
    const moved = `${now.done}/${now.steps}`
    if (moved === shown) return Effect.void
    shown = moved
    return report.progress(now)
  })
  return {
    show,
    last: Effect.suspend(() => {
      shown = ""
      return show
    })
  }
}
