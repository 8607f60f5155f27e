/**
 * `valet` commands (and the support programs of the tests) as real processes, for the tests and benchmarks that kill
 * them: started as `node --import tsx src/cli/bin.ts …` (one process, so SIGKILL kills the command itself, not a
 * launcher in front of it), their output kept line by line.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { createInterface } from "node:readline"

const root = join(import.meta.dirname, "..", "..")

/** A running `valet` process. */
export interface ValetProcess {
  readonly child: ChildProcess
  /** Every line it has written, stdout and stderr. */
  readonly lines: Array<string>
  /** Resolves with the first line matching `pattern` (already written or to come); rejects if the process exits first. */
  readonly waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<string>
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>
  readonly kill: (signal?: NodeJS.Signals) => void
}

/** Starts `valet <args>` with `env` added to this process's environment. */
export const startValet = (args: ReadonlyArray<string>, env: Record<string, string> = {}): ValetProcess =>
  startScript(join(root, "src", "cli", "bin.ts"), args, env)

/**
 * Starts the TypeScript program `script` with `args` the same way (one process, output kept line by line): the
 * support programs that play a part in a test (`durableRunnerChild.ts`…).
 */
export const startScript = (script: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): ValetProcess => {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const name = script.endsWith(join("cli", "bin.ts")) ? `valet ${args[0]}` : `${script.split("/").at(-1)} ${args.join(" ")}`
  const lines: Array<string> = []
  const waiters = new Set<() => void>()
  let code: number | null | undefined
  const exited = new Promise<number | null>((resolve) => child.on("exit", (exitCode) => {
    code = exitCode
    resolve(exitCode)
    for (const wake of waiters) wake()
  }))
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      lines.push(line)
      for (const wake of waiters) wake()
    })
  }
  const waitFor = (pattern: RegExp, timeoutMs = 60_000): Promise<string> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const found = lines.find((line) => pattern.test(line))
        if (found !== undefined) return done(() => resolve(found))
        if (code !== undefined) return done(() => reject(new Error(`${name} exited (${code}) before ${pattern}: ${lines.join("\n")}`)))
      }
      const timer = setTimeout(() => done(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms: ${lines.join("\n")}`))), timeoutMs)
      const done = (then: () => void) => {
        clearTimeout(timer)
        waiters.delete(check)
        then()
      }
      waiters.add(check)
      check()
    })
  return { child, lines, waitFor, exited, kill: (signal = "SIGTERM") => void child.kill(signal) }
}

/** A free loopback port. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
