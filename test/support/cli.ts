/**
 * `valet` run in the test's own process, as `bin.ts` runs it: `main(args)` with Node's services, its stdout kept
 * (the commands print there directly) and its stderr lines collected.
 */
import { NodeServices } from "@effect/platform-node"
import { ConfigProvider, Effect } from "effect"
import { main } from "../../src/cli/internal/main.js"

const writeStdout = process.stdout.write.bind(process.stdout)

/** What a `valet` invocation did. */
export interface Invocation {
  readonly code: number
  /** What it printed on stdout. */
  readonly out: string
  /** Its lines on stderr (the one failure line, and `--verbose`'s cause). */
  readonly errors: ReadonlyArray<string>
}

/**
 * Runs `valet args` here. With `env`, the configuration is exactly those variables (none of this process's).
 * Commands that print progress or notes straight to stderr (serve, mcp, runner) print them to the real stderr.
 */
export const valet = (args: ReadonlyArray<string>, env?: Record<string, string>): Effect.Effect<Invocation> =>
  Effect.gen(function*() {
    const errors: Array<string> = []
    let out = ""
    const run = main(args, { line: (text) => Effect.sync(() => void errors.push(...text.split("\n"))) }).pipe(
      Effect.provide(NodeServices.layer),
      (effect) => env === undefined ? effect : Effect.provideService(effect, ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
    )
    const code = yield* Effect.acquireUseRelease(
      Effect.sync(() => {
        process.stdout.write = ((chunk: string | Uint8Array) => {
          out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8")
          return true
        }) as typeof process.stdout.write
      }),
      () => run,
      () => Effect.sync(() => void (process.stdout.write = writeStdout))
    )
    return { code, out, errors }
  })
