#!/usr/bin/env node
/**
 * The `valet` command line.
 *
 * @since 0.1.0
 */
// Subpaths, not the package index: the index loads every platform module (cluster, redis, workers…), ~350 ms.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect } from "effect"
import { mainProcess } from "./internal/main.js"

// `main` prints its own one-line errors; the runner only turns the exit code into the process's.
mainProcess(process.argv.slice(2)).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain({ disableErrorReporting: true }))
