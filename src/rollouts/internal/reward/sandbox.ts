/**
 * The sandbox built-ins of `Reward`: a command's exit code, the share of tests passing, an `ast-grep` rule. They
 * run their commands in the step's workspace through `Step.run`. Public names and their documentation are in
 * `Reward.ts`.
 */
import { Effect, Result, Schema } from "effect"
import { preview } from "../../../core/internal/parse.js"
import { type CommandOptions, type FailureReason, make, type Reward, RewardFailed, type Step } from "./core.js"

/** Runs the reward's command; a command the sandbox could not run at all is the reward's failure. */
const runCommand = (name: string, step: Step, command: ReadonlyArray<string>, options: CommandOptions) =>
  step.run(command, options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}).pipe(
    Effect.mapError((error) => new RewardFailed({ reward: name, reason: "sandbox_error", message: `${error.reason}: ${error.message}` })),
    Effect.flatMap((result) =>
      // Refused, not a command, could not start: the reward is misconfigured, not the model wrong.
      result.error !== undefined && result.error !== "timeout"
        ? Effect.fail(new RewardFailed({
          reward: name,
          reason: "sandbox_error",
          // The sandbox's stderr already names the kind (`not_allowed: bash resolves to …`).
          message: result.stderr.startsWith(`${result.error}:`)
            ? result.stderr.trim()
            : `${result.error}: ${result.stderr.trim() || `exit ${result.exitCode}`}`
        }))
        : Effect.succeed(result)
    )
  )

/** `Reward.exitCode`: documented there. */
export const exitCode = (
  command: ReadonlyArray<string>,
  options: CommandOptions & { readonly expect?: number | undefined } = {}
): Reward => {
  const name = options.name ?? `exit_code(${command.join(" ")})`
  return make(name, (step) =>
    Effect.map(runCommand(name, step, command, options), (result) =>
      !result.timedOut && result.exitCode === (options.expect ?? 0) ? 1 : 0))
}

// `3 passed`, `1 failed`, `2 errors` (pytest), `Tests: 1 failed, 3 passed` (jest / vitest), `FAILED (failures=1, errors=2)` + `Ran 4 tests` (unittest).
const countOf = (text: string, word: RegExp): number => {
  let total = 0
  for (const match of text.matchAll(word)) total += Number(match[1])
  return total
}

// Colours (`ESC[31m`) and other CSI sequences: runners colour their summaries on a terminal or when forced to.
// eslint-disable-next-line no-control-regex
const ansi = /\u001b\[[0-9;?]*[ -/]*[@-~]/g

/** `Reward.testCounts`: documented there. */
export const testCounts = (output: string): { readonly passed: number; readonly total: number } | undefined => {
  // Line by line, linear in the output (the sandbox caps it anyway).
  const lines = output.replace(ansi, "").split("\n")
  let ranAt = -1
  for (let i = lines.length - 1; i >= 0 && ranAt === -1; i--) if (/^\s*Ran \d+ tests?\b/.test(lines[i]!)) ranAt = i
  if (ranAt !== -1) {
    const total = Number(/Ran (\d+)/.exec(lines[ranAt]!)![1])
    // unittest's verdict is the first `OK…` / `FAILED (…)` after its `Ran` line.
    const verdict = lines.slice(ranAt + 1).find((line) => /^\s*(?:OK|FAILED)\b/.test(line)) ?? ""
    const failed = countOf(verdict, /(?<!expected )\b(?:failures|errors)=(\d+)/g)
    return { passed: Math.max(0, total - failed), total }
  }
  let summary: string | undefined
  for (let i = lines.length - 1; i >= 0 && summary === undefined; i--) {
    if (/\b\d+ passed\b|\b\d+ failed\b/.test(lines[i]!)) summary = lines[i]
  }
  if (summary === undefined) return undefined
  const passed = countOf(summary, /\b(\d+) passed\b/g)
  const failed = countOf(summary, /\b(\d+) (?:failed|errors?)\b/g)
  return passed + failed === 0 ? undefined : { passed, total: passed + failed }
}

/** `Reward.testsPass`: documented there. */
export const testsPass = (command: ReadonlyArray<string>, options: CommandOptions = {}): Reward => {
  const name = options.name ?? `tests_pass(${command.join(" ")})`
  return make(name, (step) =>
    Effect.flatMap(runCommand(name, step, command, options), (result) => {
      if (result.timedOut) return Effect.succeed(0)
      // Separately: a summary on stdout is not lost behind a long stderr (or the other way round).
      const counts = testCounts(result.stdout) ?? testCounts(result.stderr)
      if (counts === undefined) {
        if (result.stdoutTruncated === true || result.stderrTruncated === true) {
          return Effect.fail(new RewardFailed({
            reward: name,
            reason: "truncated_output",
            message: `the output was cut off by the sandbox (${
              result.stdoutTruncated === true ? "stdout" : "stderr"
            }) and no test summary was found in what is left; exit ${result.exitCode}`
          }))
        }
        return Effect.succeed(result.exitCode === 0 ? 1 : 0)
      }
      // Exit 0 with failures counted would be a runner that ignores them: trust the counts.
      return Effect.succeed(counts.total === 0 ? 0 : counts.passed / counts.total)
    }))
}

/** `Reward.AstGrepOptions`: documented there. */
export type AstGrepOptions = CommandOptions & {
  readonly language: string
  readonly paths?: ReadonlyArray<string> | undefined
  /** `any` (default): 1 when the rule matches somewhere; `none`: 1 when it matches nowhere. */
  readonly matches?: "any" | "none" | undefined
} & (
  | { readonly pattern: string; readonly rule?: undefined }
  | { readonly rule: Readonly<Record<string, unknown>>; readonly pattern?: undefined }
)

// One line of `--json=stream`: a match, which names its file.
const AstGrepMatch = Schema.fromJsonString(Schema.Struct({ file: Schema.String }))

// Every file of the paths is searched: none is skipped as hidden or ignored by `.gitignore` / `.ignore` files
// the model could have written.
const noIgnore = ["hidden", "dot", "vcs", "parent", "exclude", "global"].flatMap((kind) => ["--no-ignore", kind])

/** `Reward.astGrep`: documented there. */
export const astGrep = (options: AstGrepOptions): Reward => {
  const name = options.name ?? `ast_grep(${options.pattern ?? JSON.stringify(options.rule)})`
  const paths = options.paths ?? ["."]
  const command = options.pattern !== undefined
    ? ["ast-grep", "run", "-c", "/dev/null", "-p", options.pattern, "-l", options.language, "--json=stream", ...noIgnore, ...paths]
    : [
      "ast-grep",
      "scan",
      "-c",
      "/dev/null",
      // JSON is YAML: the rule goes inline, as one argument, with no file in the workspace.
      "--inline-rules",
      JSON.stringify({ id: "reward", language: options.language, rule: options.rule }),
      "--json=stream",
      ...noIgnore,
      ...paths
    ]
  return make(name, (step) =>
    Effect.flatMap(runCommand(name, step, command, options), (result) => {
      if (result.timedOut) return Effect.succeed(0)
      const fail = (reason: FailureReason, message: string) => Effect.fail(new RewardFailed({ reward: name, reason, message }))
      const truncated = result.stdoutTruncated === true
      // `ast-grep run` exits 1 when nothing matched; `scan` exits 0 either way.
      if (result.exitCode !== 0 && !(options.pattern !== undefined && result.exitCode === 1 && result.stdout.trim() === "")) {
        return fail("invalid_output", `ast-grep exited ${result.exitCode}: ${preview(result.stderr)}`)
      }
      // Complete lines only: a cut output's last line is a partial match followed by the sandbox's marker.
      const lines = result.stdout.split("\n")
      const complete = truncated ? lines.slice(0, -1) : lines
      let count = 0
      for (const line of complete) {
        if (line.trim() === "") continue
        const decoded = Schema.decodeUnknownResult(AstGrepMatch)(line)
        if (Result.isSuccess(decoded)) count++
        else if (!truncated) return fail("invalid_output", `ast-grep's output is not a JSON match per line: ${preview(line)}`)
      }
      if (count === 0 && truncated) return fail("truncated_output", "ast-grep's output was cut off by the sandbox before its first match")
      return Effect.succeed((count > 0) === ((options.matches ?? "any") === "any") ? 1 : 0)
    }))
}
