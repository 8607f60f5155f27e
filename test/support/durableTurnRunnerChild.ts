/**
 * A runner of a durable cluster over PostgreSQL serving thread turns, for the kill test of durable thread turns:
 * `durableTurnRunnerChild.ts <url> <name> <model base url> <marker file>`. It serves `AgentRun` workflows of one
 * agent, "assistant" (ReAct, no tools), on the loopback model server (its API key `runner-<name>`, so the server knows
 * the sender), with its threads in the cluster's database (`Threads.layerSql` on the runner's `SqlClient`).
 *
 * The kill point: the first append of a turn's messages, on whichever runner makes it, creates the marker file,
 * prints `appending <thread id>` and never returns — the turn's model replies are stored by then (its last model call
 * was an activity that finished), and its messages are not written. The test kills that runner there; the others
 * append as usual. Prints `listening` once it serves.
 */
import { Effect, Layer } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import * as Agent from "../../src/core/Agent.js"
import * as Threads from "../../src/core/Threads.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [url, name, baseUrl, marker] = process.argv.slice(2)

const assistant = Agent.make({ name: "assistant", instructions: "Answer briefly." })

const holdFirstAppend = Layer.effect(
  Threads.Threads,
  Effect.map(Effect.service(Threads.Threads), (inner): Threads.Service => ({
    ...inner,
    append: (threadId, messages, options) =>
      Effect.suspend(() => {
        if (existsSync(marker!)) return inner.append(threadId, messages, options)
        writeFileSync(marker!, threadId)
        console.log(`appending ${threadId}`)
        return Effect.never
      })
  }))
).pipe(Layer.provide(Threads.layerSql))

const runner = Durable.layerPostgresRunner({ url: url! })

Layer.launch(
  Layer.mergeAll(
    Durable.layer([assistant]).pipe(
      Layer.provide(Layer.merge(
        OpenAiCompatible.layerNode({ baseUrl: baseUrl!, model: "scripted", apiKey: `runner-${name}` }),
        holdFirstAppend
      ))
    ),
    Layer.effectDiscard(Effect.sync(() => console.log("listening")))
  ).pipe(Layer.provideMerge(runner))
).pipe(Effect.runPromise).then(
  () => process.exit(0),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)
