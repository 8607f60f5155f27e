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
import { Command } from "effect/cli"
import { valet, version } from "./internal/root.js"

Command.run(valet, { version }).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
