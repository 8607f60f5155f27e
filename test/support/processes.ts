import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

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

/** Whether bubblewrap works on this machine (installed and allowed to make namespaces). */
export const bwrapWorks = (() => {
  try {
    execFileSync("bwrap", ["--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "true"], {
      stdio: "ignore",
      timeout: 5_000
    })
    return true
  } catch {
    // CI installs bubblewrap and sets VALET_REQUIRE_BWRAP=1: there its absence is a failure, not a skip.
    if (process.env.VALET_REQUIRE_BWRAP === "1") throw new Error("VALET_REQUIRE_BWRAP=1 but bwrap does not work here")
    return false
  }
})()

/**
 * The isolation tests of other modules run their real sandbox with: bubblewrap where it works, else plain
 * processes (opted into explicitly, as the sandbox fails closed).
 */
export const testIsolation: "bwrap" | "process" = bwrapWorks ? "bwrap" : "process"
