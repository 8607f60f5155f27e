import { execFileSync, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { createInterface } from "node:readline"

/** Pids of the live processes whose command line contains `marker` (a zombie has an empty one). */
export const processesWith = (marker: string): Array<number> => {
  const pids: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(marker)) pids.push(Number(entry))
    } catch {
      // Gone meanwhile.
    }
  }
  return pids
}

/** A token to put in a command line, to find its processes later. */
export const marker = (): string => `valet-marker-${Math.random().toString(36).slice(2, 10)}`

/**
 * Why bubblewrap cannot isolate commands on this machine (not installed, or not allowed to make namespaces), or
 * undefined when it works. Found once per test file by running it.
 */
export const bwrapUnavailable: string | undefined = (() => {
  try {
    execFileSync("bwrap", ["--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "true"], {
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 5_000
    })
    return undefined
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "bwrap is not installed (apt-get install bubblewrap)"
    const stderr = String((error as { readonly stderr?: unknown }).stderr ?? "").trim().split("\n")[0]
    return `bwrap cannot make its namespaces here${stderr ? `: ${stderr}` : ""}`
  }
})()

/** Whether bubblewrap works on this machine (installed and allowed to make namespaces). */
export const bwrapWorks: boolean = bwrapUnavailable === undefined

// CI installs bubblewrap and sets VALET_REQUIRE_BWRAP=1: there its absence is a failure, not a skip.
if (bwrapUnavailable !== undefined && process.env.VALET_REQUIRE_BWRAP === "1") {
  throw new Error(`VALET_REQUIRE_BWRAP=1 but ${bwrapUnavailable}`)
}

/**
 * The suffix of the name of a test that needs bubblewrap: empty where it works, else why it is skipped (the
 * reporter shows names; `./toolsSetup.ts` also says it once for the whole run).
 */
export const skippedWithoutBwrap: string = bwrapUnavailable === undefined ? "" : ` (skipped: ${bwrapUnavailable})`

/**
 * The isolation the tests of other modules run their real sandbox with: bubblewrap where it works, else plain
 * processes, opted into explicitly (the sandbox fails closed: without bubblewrap, `auto` refuses to build).
 */
export const testIsolation: "bwrap" | "process" = bwrapWorks ? "bwrap" : "process"

/**
 * Runs `child` (a TypeScript file, through tsx) and answers the lines it printed until it exited: SIGKILLed at the
 * first line `killAt` accepts, or ended on its own.
 */
export const linesUntilKilled = (
  child: string,
  args: ReadonlyArray<string>,
  killAt: (line: string) => boolean
): Promise<Array<string>> =>
  new Promise((resolve) => {
    const lines: Array<string> = []
    const running = spawn(process.execPath, ["--import", "tsx", child, ...args], { stdio: ["ignore", "pipe", "ignore"] })
    createInterface({ input: running.stdout! }).on("line", (line) => {
      lines.push(line)
      if (killAt(line)) running.kill("SIGKILL")
    })
    running.on("exit", () => resolve(lines))
  })
