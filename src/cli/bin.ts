#!/usr/bin/env node
/**
 * The `valet` command line.
 *
 * @since 0.1.0
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { actorLoopCommand } from "./internal/actorLoop.js"
import { evalCommand } from "./internal/eval.js"
import { healthCommand } from "./internal/health.js"
import { journal } from "./internal/journal.js"
import { replayCommand, runCommand } from "./internal/run.js"
import { solveCommand } from "./internal/solve.js"
import { stateCommand } from "./internal/state.js"

const valet = Command.make("valet").pipe(
  Command.withDescription("Effect-native agent framework: run, record and inspect agent architectures."),
  Command.withSubcommands([journal, solveCommand, evalCommand, actorLoopCommand, stateCommand, runCommand, replayCommand, healthCommand])
)

const cli = Command.run(valet, { name: "valet", version: "0.1.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
