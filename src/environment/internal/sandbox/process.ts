/**
 * Runs one process in its own process group and guarantees that the whole group is gone when `run` returns,
 * also on timeout and on interruption: SIGTERM to the group, SIGKILL after a grace period.
 *
 * The run ends when the main process exits, not when its output pipes close: whatever it left behind (in its group,
 * or outside it through `setsid` or a double fork, found by `reap`) is killed then, and a pipe still held open after
 * that is closed on our side. So a command that leaves a detached child answers at once, with its own exit code,
 * instead of waiting out its timeout.
 *
 * Why `node:child_process` and not `effect/process` (4.1), whose `forceKillAfter` now does group SIGTERM → SIGKILL:
 * its stdout is a `PassThrough` copy, so stopping at the output cap leaves the child blocked on a full pipe (checked)
 * instead of getting EPIPE as with `| head`; and a signal death is a `PlatformError` naming the signal only in text.
 * The handle below is wrapped in `Effect.acquireUseRelease`, so the same kill sequence runs however the run ends.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readdir, readFile } from "node:fs/promises"
import { constants } from "node:os"
import { Effect } from "effect"

/** What to run and within which limits. */
export interface Spec {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** Time between SIGTERM and SIGKILL. */
  readonly graceMs: number
  /** Per stream; past it our end of the pipe is closed (the writer gets EPIPE / SIGPIPE, as with `| head`). */
  readonly maxOutputBytes: number
  /**
   * Kills what escaped the process group (under the run's uid, or marked by the run's environment). Runs when the
   * main process exits and again when the run is released.
   */
  readonly reap?: () => Promise<void>
  /**
   * SIGTERM the main process's descendants instead of its group: for a wrapper such as bwrap, which the signal
   * would end at once (and the namespace with it), while the command — in a session of its own — never sees it.
   * SIGKILL still goes to the group.
   */
  readonly terminateDescendants?: boolean
  /** How long, after the main process exited and `reap` ran, the output pipes may stay open before we close them (default 250 ms). */
  readonly lingerMs?: number
  /**
   * A process started ahead of time (`prestart`) and waiting for its command on stdin: it is sent `input` and run
   * as if spawned now (`file` and `args` then only name it). The timeout counts from here.
   */
  readonly started?: Prestarted | undefined
  /** What `started` is sent on its stdin, which is then closed. */
  readonly input?: string | undefined
}

/**
 * A process spawned ahead of time in its own process group, with its three pipes, waiting for its command on
 * stdin (a pre-made workspace's launcher): its exec and isolation set-up are paid before a run needs it.
 */
export interface Prestarted {
  readonly child: ChildProcess
  /** Resolves when it has exited (and its pipes closed). */
  readonly gone: Promise<void>
}

/** Spawns `file args` now, in a process group of its own, its stdin a pipe for its command. */
export const prestart = (file: string, args: ReadonlyArray<string>, cwd: string, env: Readonly<Record<string, string>>): Prestarted => {
  const child = spawn(file, [...args], { cwd, env, detached: true, stdio: ["pipe", "pipe", "pipe"] })
  const gone = new Promise<void>((resolve) => {
    child.once("close", () => resolve())
    // Never spawned (no pid): there is nothing to wait for.
    child.once("error", () => child.pid === undefined && resolve())
  })
  // A launcher killed before it read its command closes the pipe on us: an EPIPE that nobody needs to hear.
  child.stdin!.on("error", () => undefined)
  return { child, gone }
}

/** Whether a prestarted process is still waiting (not exited, not failed to spawn). */
export const waiting = (started: Prestarted): boolean =>
  started.child.pid !== undefined && started.child.exitCode === null && started.child.signalCode === null

/** Kills a prestarted process that was never used (its whole group) and waits until it is gone. */
export const discard = async (started: Prestarted): Promise<void> => {
  const pid = started.child.pid
  // Only while it has not been reaped: a pid seen exited may already number someone else's group.
  if (pid !== undefined && waiting(started)) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // ESRCH: gone already.
    }
  }
  await Promise.race([started.gone, sleep(2_000)])
}

/** How the process ended. */
export interface Outcome {
  /** The exit code; 128 + the signal number when a signal ended it; 124 on timeout; 126 / 127 when it never started. */
  readonly exitCode: number
  readonly signal: string | undefined
  readonly stdout: string
  readonly stderr: string
  readonly stdoutTruncated: boolean
  readonly stderrTruncated: boolean
  readonly timedOut: boolean
  /** Why the process could not be started. */
  readonly spawnError: string | undefined
  readonly durationMs: number
}

class Capture {
  readonly chunks: Array<Buffer> = []
  size = 0
  truncated = false
  constructor(readonly max: number) {}

  /** Keeps the chunk up to the cap; answers false once the cap is reached. */
  add(chunk: Buffer): boolean {
    if (this.truncated) return false
    const room = this.max - this.size
    if (chunk.length <= room) {
      this.chunks.push(chunk)
      this.size += chunk.length
      return true
    }
    if (room > 0) this.chunks.push(chunk.subarray(0, room))
    this.size = this.max
    this.truncated = true
    return false
  }

  text(name: string): string {
    const text = Buffer.concat(this.chunks).toString("utf8")
    return this.truncated ? `${text}\n[valet: ${name} truncated at ${this.max} bytes]\n` : text
  }
}

/**
 * The live descendants of `root`, from the parent pids in /proc. They need not be in its process group: bwrap's
 * command has a session of its own (`--new-session`).
 */
const descendants = async (root: number): Promise<Array<number>> => {
  const children = new Map<number, Array<number>>()
  const entries = await readdir("/proc").catch(() => [] as Array<string>)
  await Promise.all(entries.map(async (entry) => {
    if (!/^\d+$/.test(entry)) return
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => undefined)
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so parse after the last ')'.
    const ppid = stat !== undefined ? Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) : NaN
    if (Number.isInteger(ppid)) children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
  }))
  const found: Array<number> = []
  for (let queue = [root]; queue.length > 0;) {
    const next = children.get(queue.pop()!) ?? []
    found.push(...next)
    queue.push(...next)
  }
  return found
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref())

interface Handle {
  readonly settled: Promise<Outcome>
  /** Kills the group (SIGTERM, then SIGKILL after the grace period) and waits until it is gone; idempotent. */
  readonly terminate: () => Promise<void>
}

const start = (spec: Spec): Handle => {
  const startedAt = performance.now()
  const stdout = new Capture(spec.maxOutputBytes)
  const stderr = new Capture(spec.maxOutputBytes)
  let timedOut = false
  let spawnError: string | undefined
  let exitCode: number | null = null
  let signal: NodeJS.Signals | null = null
  let exited = false
  let closed = false
  let resolveClosed!: () => void
  const closedPromise = new Promise<void>((resolve) => (resolveClosed = resolve))
  let child: ChildProcess | undefined

  const killGroup = (sig: NodeJS.Signals) => {
    const pid = child?.pid
    if (pid === undefined) return
    try {
      process.kill(-pid, sig)
    } catch {
      // ESRCH: the group is already empty.
      if (!exited) child?.kill(sig)
    }
  }

  const outcome = (): Outcome => {
    const durationMs = Math.round((performance.now() - startedAt) * 10) / 10
    const base = {
      stdout: stdout.text("stdout"),
      stderr: stderr.text("stderr"),
      stdoutTruncated: stdout.truncated,
      stderrTruncated: stderr.truncated,
      durationMs
    }
    if (spawnError !== undefined) {
      return { ...base, exitCode: /EACCES|EPERM/.test(spawnError) ? 126 : 127, signal: undefined, timedOut: false, spawnError }
    }
    if (timedOut) return { ...base, exitCode: 124, signal: signal ?? undefined, timedOut: true, spawnError: undefined }
    const code = exitCode ?? (signal !== null ? 128 + (constants.signals[signal] ?? 0) : 1)
    return { ...base, exitCode: code, signal: signal ?? undefined, timedOut: false, spawnError: undefined }
  }

  let resolveSettled!: (outcome: Outcome) => void
  const settled = new Promise<Outcome>((resolve) => (resolveSettled = resolve))
  const markClosed = () => {
    if (closed) return
    closed = true
    clearTimeout(timer)
    resolveClosed()
    resolveSettled(outcome())
  }

  try {
    child = spec.started?.child ?? spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      // Its own process group (and session), so the group can be signalled as a whole.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
  } catch (error) {
    // Invalid arguments (a NUL byte) are thrown synchronously.
    spawnError = error instanceof Error ? error.message : String(error)
  }
  const timer = setTimeout(() => {
    timedOut = true
    void terminate()
  }, spec.timeoutMs)
  if (child === undefined) {
    markClosed()
  } else {
    const onData = (capture: Capture, stream: NodeJS.ReadableStream & { destroy(): void }) => (chunk: Buffer) => {
      if (!capture.add(chunk)) stream.destroy()
    }
    child.stdout!.on("data", onData(stdout, child.stdout!))
    child.stderr!.on("data", onData(stderr, child.stderr!))
    child.on("error", (error) => {
      if (child!.pid === undefined) {
        spawnError = error.message
        markClosed()
      }
    })
    child.on("exit", (code, sig) => {
      exited = true
      exitCode = code
      signal = sig
      // Whatever the command left running in its group (a background job holding our pipes) goes with it.
      killGroup("SIGKILL")
      void afterExit()
    })
    child.on("close", markClosed)
    // Listened to first, then told what to run: nothing it says or does can come before the listeners.
    if (spec.started !== undefined) child.stdin!.end(spec.input ?? "")
  }

  const reap = () => (spec.reap !== undefined ? spec.reap().catch(() => undefined) : Promise.resolve())
  const stopReading = () => {
    child?.stdout?.destroy()
    child?.stderr?.destroy()
  }

  // The command is done: its exit code is the answer, whatever it left behind. The timeout no longer applies (the
  // steps below are bounded), so a run that exited in time never reports 124.
  let reapedAtExit: Promise<void> | undefined
  const afterExit = async () => {
    clearTimeout(timer)
    await (reapedAtExit = reap())
    await Promise.race([closedPromise, sleep(spec.lingerMs ?? 250)])
    if (!closed) {
      // Something we could not find or kill still holds a pipe: what the command wrote is read already.
      stopReading()
      markClosed()
    }
  }

  let terminating: Promise<void> | undefined
  const terminate = (): Promise<void> => {
    terminating ??= (async () => {
      if (!closed) {
        if (spec.terminateDescendants === true && child?.pid !== undefined) {
          for (const pid of await descendants(child.pid)) {
            try {
              process.kill(pid, "SIGTERM")
            } catch {
              // Gone meanwhile, or not ours to signal.
            }
          }
        } else {
          killGroup("SIGTERM")
        }
        await Promise.race([closedPromise, sleep(spec.graceMs)])
        if (!closed) {
          killGroup("SIGKILL")
          await reap()
          await Promise.race([closedPromise, sleep(2_000)])
        }
        if (!closed) {
          // Something outside the group holds our pipes: stop reading rather than wait for it.
          stopReading()
          await Promise.race([closedPromise, sleep(1_000)])
          markClosed()
        }
      }
      // Also when the run ended normally: a detached child that closed its output was not waited for. Once is
      // enough when the main process exited (nothing is left to start another).
      await (reapedAtExit ?? reap())
    })()
    return terminating
  }

  return { settled, terminate }
}

/**
 * Runs the process to its end (or its timeout) and answers how it ended. Never fails: a process that cannot be
 * started is an outcome with `spawnError`. Interrupting the fiber kills the group before the interruption
 * completes.
 */
export const run = (spec: Spec): Effect.Effect<Outcome> =>
  Effect.acquireUseRelease(
    Effect.sync(() => start(spec)),
    (handle) => Effect.promise(() => handle.settled),
    (handle) => Effect.promise(() => handle.terminate())
  )
