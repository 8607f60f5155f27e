/**
 * `valet rollout --processes n`: one tasks file over n processes. Node runs one event loop per process, and a rollout
 * spends its CPU in that loop (the HTTP client, the Effect runtime, the stores: about 0.8 ms a step), so one process
 * tops out near 1,200 steps a second — below what 256 episodes against a fast server ask for. Here the command runs
 * itself n times, each with `--shard k/n` (the tasks whose id hashes to k: each task in one process, with its
 * trajectory file and its state) and `--progress json`, and reads their reports: one progress line and one summary
 * for the whole run, as if one process had done it. Each process gets its part of `--concurrency`.
 *
 * The processes share the state database (SQLite in WAL mode takes several writers; each task's rows are one process's)
 * and the trajectories directory (a file per task). Interrupted, the processes are stopped with SIGTERM (their
 * episodes interrupted, their workspaces removed) and killed if they are not gone within 10 seconds. A process that
 * ends without its summary (it could not start: its one-line reason is on stderr) fails the run once the others end.
 * The processes' stderr is passed on line by line (to its end, also when interrupted), except that a warning a process
 * says once for its run ("… Said once.": a vLLM server that sends no token ids for `--tokens`) is said once for the
 * whole run when other processes say the same words (one naming its own task is said by each process that has one).
 */
import { Clock, Duration, Effect, Fiber, Option, Schedule, Schema, Stream } from "effect"
import { ChildProcess } from "effect/process"
import { prepareTasks, type Settings } from "./actorLoop.js"
import { CommandFailed } from "./failure.js"
import type { Output } from "./output.js"
import { type Progress, type ProgressFormat, progressShown, reportOf, type Summary } from "./rolloutReport.js"

/** The largest `--processes`: beyond a machine's cores more processes only add start-up and memory. */
export const maxProcesses = 64

const Counts = {
  total: Schema.Number,
  done: Schema.Number,
  failed: Schema.Number,
  steps: Schema.Number,
  outputTokens: Schema.Number,
  rewardSum: Schema.Number,
  rewarded: Schema.Number,
  elapsedMs: Schema.Number
}

/** A line a process writes with `--progress json` (see `reportOf`). */
const ProcessMessage = Schema.Union([
  Schema.Struct({ type: Schema.Literal("line"), text: Schema.String }),
  Schema.Struct({ type: Schema.Literal("progress"), ...Counts }),
  Schema.Struct({ type: Schema.Literal("summary"), ...Counts, tasks: Schema.Number, skippedLines: Schema.Number })
])
const decodeMessage = Schema.decodeUnknownOption(Schema.fromJsonString(ProcessMessage))

/**
 * The process's command line: the parent's arguments without `--processes` (and any `--progress` / `--concurrency`),
 * then its shard, its share of the concurrency and JSON progress.
 */
export const processArguments = (
  args: ReadonlyArray<string>,
  shard: { readonly index: number; readonly count: number },
  concurrency: number
): Array<string> => {
  const dropped = new Set(["--processes", "--progress", "--concurrency"])
  const kept: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const name = arg.split("=", 1)[0]!
    if (dropped.has(name)) {
      // `--flag value` takes the next argument too; `--flag=value` is one.
      if (!arg.includes("=")) i++
      continue
    }
    kept.push(arg)
  }
  return [...kept, "--shard", `${shard.index}/${shard.count}`, "--concurrency", String(concurrency), "--progress", "json"]
}

// A log line's prefix (`[12:00:00.000] WARN (#38): `): the same warning from two processes differs only there.
const logPrefix = /^\[[^\]]*\] [A-Z]+ \(#\d+\): /

/**
 * A filter of the processes' stderr lines: false for a warning said once per process (it ends with "Said once.") that
 * another process already said.
 */
export const onceAcrossProcesses = (): ((line: string) => boolean) => {
  const said = new Set<string>()
  return (line) => {
    if (!line.trimEnd().endsWith("Said once.")) return true
    const body = line.replace(logPrefix, "")
    if (said.has(body)) return false
    said.add(body)
    return true
  }
}

const sum = (values: ReadonlyArray<Progress>, key: keyof Progress): number => values.reduce((total, value) => total + value[key], 0)

/**
 * Runs the tasks file at `path` in `processes` processes (`command` is how to start this CLI: the Node binary and its
 * arguments up to the subcommand; `args` the subcommand's arguments as given), reporting in `format` on `output`.
 * The skipped lines and the header are the parent's (the file is read here too, so a file without tasks fails before
 * any process starts); the rest comes from the processes.
 */
export const runProcesses = (
  path: string,
  settings: Settings & { readonly progressInterval?: Duration.Input | undefined },
  processes: number,
  command: { readonly executable: string; readonly args: ReadonlyArray<string> },
  args: ReadonlyArray<string>,
  output: Output,
  format: ProgressFormat = "line"
) =>
  Effect.gen(function*() {
    const { progressInterval, ...runSettings } = settings
    const report = reportOf(format, output)
    const { issues, tasks, total } = yield* prepareTasks(path, runSettings, report.announce)
    const share = Math.ceil(runSettings.concurrency / processes)
    yield* report.announce.line(
      `rollout: ${tasks.length} tasks from ${path}` +
        `${runSettings.group !== undefined ? `, ${runSettings.group} rollouts each` : ""}` +
        `${runSettings.maxSteps !== undefined ? `, up to ${runSettings.maxSteps} steps` : ""}, ` +
        `${processes} processes × ${share} episodes at a time`
    )
    const startedAt = yield* Clock.currentTimeMillis
    const latest: Array<Progress | undefined> = Array.from({ length: processes }, () => undefined)
    const summaries: Array<Summary | undefined> = Array.from({ length: processes }, () => undefined)
    const progress = Effect.map(Clock.currentTimeMillis, (now): Progress => {
      const known = latest.filter((value) => value !== undefined)
      return {
        total,
        done: sum(known, "done"),
        failed: sum(known, "failed"),
        steps: sum(known, "steps"),
        outputTokens: sum(known, "outputTokens"),
        rewardSum: sum(known, "rewardSum"),
        rewarded: sum(known, "rewarded"),
        elapsedMs: now - startedAt
      }
    })
    const { last: showLast, show } = progressShown(progress, report)
    const passOn = onceAcrossProcesses()
    // A process's stderr line: through the progress output when that is stderr (on a terminal it clears the status
    // line first), else (JSON progress on stdout) straight to stderr.
    const errorLine = (line: string): Effect.Effect<void> =>
      format === "line" ? output.line(line) : Effect.sync(() => void process.stderr.write(`${line}\n`))
    // How long a process's stderr is read after the process ended (or was stopped), for what a process it started
    // might still hold open.
    const drainAfterExit = Duration.seconds(2)
    const runShard = (index: number) =>
      Effect.gen(function*() {
        // The process's stderr is read to its end, also when the run is interrupted: this finalizer, added before the
        // process is, runs after the process was stopped (SIGTERM, then SIGKILL) and waits for the reader, so what a
        // process says while it stops (a workspace it could not remove) is passed on, not cut off.
        let reader: Fiber.Fiber<void> | undefined
        const drained = Effect.suspend(() =>
          reader === undefined
            ? Effect.void
            : Fiber.await(reader).pipe(Effect.timeout(drainAfterExit), Effect.ignore, Effect.andThen(Fiber.interrupt(reader)))
        )
        yield* Effect.addFinalizer(() => drained)
        const handle = yield* ChildProcess.make(
          command.executable,
          [...command.args, ...processArguments(args, { index, count: processes }, share)],
          // SIGTERM interrupts a process's episodes (their workspaces are removed); one that hangs is killed.
          { stdin: "ignore", stdout: "pipe", stderr: "pipe", forceKillAfter: Duration.seconds(10) }
        )
        // Its stderr passed on as it comes, a warning said once per process said once for the run. Not in this
        // scope: closing it would stop the reading before the process is stopped.
        reader = yield* Effect.forkDetach(handle.stderr.pipe(
          Stream.decodeText(),
          Stream.splitLines,
          Stream.runForEach((line) => passOn(line) ? errorLine(line) : Effect.void),
          Effect.ignore
        ))
        const reports = handle.stdout.pipe(
          Stream.decodeText(),
          Stream.splitLines,
          Stream.runForEach((line) => {
            const message = decodeMessage(line)
            if (Option.isNone(message)) {
              return line.trim() === "" ? Effect.void : report.line(`process ${index}: ${line}`)
            }
            const value = message.value
            if (value.type === "line") return report.line(value.text)
            const { type: _, ...counts } = value
            latest[index] = counts
            if (value.type === "summary") summaries[index] = { ...counts, tasks: value.tasks, skippedLines: value.skippedLines }
            return Effect.void
          })
        )
        yield* reports
        const code = yield* handle.exitCode
        yield* drained
        return code
      }).pipe(Effect.scoped)
    const codes = yield* Effect.scoped(Effect.gen(function*() {
      yield* Effect.forkScoped(Effect.repeat(show, Schedule.spaced(progressInterval ?? Duration.seconds(1))))
      return yield* Effect.forEach(Array.from({ length: processes }, (_, index) => index), runShard, { concurrency: "unbounded" })
    })).pipe(
      Effect.onInterrupt(() =>
        Effect.flatMap(progress, (now) =>
          report.line(`rollout: interrupted after ${now.done}/${now.total} episodes (${now.steps} steps); partial episodes have no episode_end line`)))
    )
    const last = yield* progress
    yield* showLast
    const unfinished = codes.flatMap((code, index) => summaries[index] === undefined ? [`${index}/${processes} (exit code ${code})`] : [])
    if (unfinished.length > 0) {
      return yield* new CommandFailed({
        message: `the process${unfinished.length === 1 ? "" : "es"} of shard ${unfinished.join(", ")} ended without finishing ` +
          `(the reason is on stderr above)` +
          `${unfinished.length < processes ? "; the other processes finished and their trajectories are written" : ""}`
      })
    }
    const summary: Summary = { ...last, tasks: tasks.length, skippedLines: issues.length }
    yield* report.summary(summary)
    return summary
  })
