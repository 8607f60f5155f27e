#!/usr/bin/env node
/**
 * The `valet` command line.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { actorLoopCommand } from "./internal/cli/actorLoop.js"
import { evalCommand } from "./internal/cli/eval.js"
import { healthCommand } from "./internal/cli/health.js"
import { journal } from "./internal/cli/journal.js"
import { replayCommand, runCommand } from "./internal/cli/run.js"
import { solveCommand } from "./internal/cli/solve.js"
import { stateCommand } from "./internal/cli/state.js"

const valet = Command.make("valet").pipe(
  Command.withDescription("Effect-native agent framework: run, record and inspect agent architectures."),
  Command.withSubcommands([journal, solveCommand, evalCommand, actorLoopCommand, stateCommand, runCommand, replayCommand, healthCommand])
)

const cli = Command.run(valet, { name: "valet", version: "0.1.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
