/** Runs a benchmark worker in a fresh Node process and reads the one JSON line it prints last. */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

export const runWorker = <A>(script: string, args: ReadonlyArray<string>, nodeFlags: ReadonlyArray<string> = []): A => {
  const out = execFileSync(process.execPath, [...nodeFlags, "--import", "tsx", script, "--worker", ...args], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 16 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"]
  })
  const lines = out.trim().split("\n")
  return JSON.parse(lines.at(-1)!) as A
}
