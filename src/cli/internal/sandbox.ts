/**
 * The sandbox of the commands: configured from the environment (`VALET_SANDBOX_ISOLATION=process` is how a user
 * opts into plain processes), and one line on stderr when commands will run unisolated, so nobody runs a model's
 * code without isolation unknowingly.
 */
import { Context, Effect, Layer } from "effect"
import * as Sandbox from "../../environment/Sandbox.js"

/** The line printed when the sandbox runs plain processes. */
export const processModeWarning =
  "valet: sandbox isolation is \"process\" (VALET_SANDBOX_ISOLATION): commands run as plain processes, not isolated " +
  "— they can read your files and reach the network"

/** `Sandbox.layerProcessConfig(options)`, saying so on `warn` when it runs plain processes. */
export const commandSandbox = (
  options: Sandbox.Options = {},
  warn: (line: string) => Effect.Effect<void> = (line) => Effect.sync(() => void process.stderr.write(`${line}\n`))
) =>
  Sandbox.layerProcessConfig(options).pipe(
    Layer.tap((context) =>
      Context.get(context, Sandbox.Sandbox).info.isolation === "process" ? warn(processModeWarning) : Effect.void
    )
  )
