/**
 * A process of `bench/rollout.ts --processes n`: what `valet rollout --shard k/n --progress json` runs, on the bench's
 * layers — the real `Vllm` client, SQLite state and JSONL trajectories, and `Sandbox.layerTest` instead of the
 * process sandbox (the bench measures valet's loop, not process spawning). Started by `runProcesses` with the
  * arguments it gives every process: `rollout <tasks> --config <file> --state-db <file> --trajectories <dir> --group g
 * --max-steps m --shard k/n --concurrency c --progress json`. It imports the compiled modules (dist/, as `valet rollout`
 * runs) and runs on Node's own type stripping, so that a process starts in a fraction of a second instead of compiling
 * TypeScript (which would be counted in the CPU per step): `npm run build` first.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Layer, Option } from "effect"
import { stdoutOutput } from "../../dist/cli/internal/output.js"
import { runRollout } from "../../dist/cli/internal/rollout.js"
import { parseShard } from "../../dist/cli/internal/shard.js"
import * as Sandbox from "../../dist/environment/Sandbox.js"
import * as StateStore from "../../dist/environment/StateStore.js"
import * as TrajectoryStore from "../../dist/environment/TrajectoryStore.js"
import * as Vllm from "../../dist/providers/Vllm.js"

const args = process.argv.slice(2)
const flag = (name: string): string => {
  const at = args.lastIndexOf(name)
  if (at < 0) throw new Error(`rolloutProcess: ${name} missing`)
  return args[at + 1]!
}
const shard = Option.getOrThrow(parseShard(flag("--shard")))
const layer = Layer.mergeAll(
  Vllm.layerNode({ configPath: flag("--config") }),
  Sandbox.layerTest(() => ({ stdout: "1\n" })),
  StateStore.layerSqlite({ filename: flag("--state-db") }),
  TrajectoryStore.layerFile({ root: flag("--trajectories") }).pipe(Layer.provide(NodeFileSystem.layer))
)
Effect.runPromise(
  runRollout(
    args[1]!,
    {
      concurrency: Number(flag("--concurrency")),
      group: Number(flag("--group")),
      maxSteps: Number(flag("--max-steps")),
      shard,
      progress: "json"
    },
    layer,
    stdoutOutput()
  ).pipe(Effect.provide(NodeServices.layer))
).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
