/**
 * The `valet` command with every subcommand: `bin.ts` runs it on the process's arguments, tests run it on theirs.
 */
import { Command } from "effect/cli"
import { actorLoopCommand } from "./actorLoop.js"
import { rolloutCommand } from "./rollout.js"
import { evalCommand } from "./eval.js"
import { healthCommand } from "./health.js"
import { journal } from "./journal.js"
import { mcpCommand } from "./mcp.js"
import { serveCommand } from "./serve.js"
import { replayCommand, runCommand } from "./run.js"
import { runnerCommand } from "./runner.js"
import { runsCommand } from "./runs.js"
import { solveCommand } from "./solve.js"
import { stateCommand } from "./state.js"
import { trajectoriesCommand } from "./trajectories.js"

export { version } from "./version.js"

/** `valet` and its subcommands. */
export const valet = Command.make("valet").pipe(
  Command.withDescription("Effect-native agent framework: run, record and inspect agent architectures."),
  Command.withSubcommands([journal, solveCommand, evalCommand, actorLoopCommand, rolloutCommand, stateCommand, trajectoriesCommand, runCommand, replayCommand, healthCommand, mcpCommand, serveCommand, runnerCommand, runsCommand])
)
