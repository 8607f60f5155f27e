/**
 * A process with durable agent runs whose calls wait for a person, for the kill tests of durable approvals:
 * `durableApprovalChild.ts <store> start <count>` starts runs `run-0` … `run-<count-1>` (each run's first model
 * call asks for tool `act` with `n` = its number, a call that needs approval), prints `waiting <count>` once every
 * call waits, and stays up until killed; `durableApprovalChild.ts <store> decide <count>` (a new process on the
 * same store) decides them — even runs approved, odd ones rejected with reason "no" — and prints `result <runId>
 * <output>` as each run ends. `<store>` is a SQLite file, or a postgres:// URL (then the process is a runner of the
 * cluster). The model prints `call <runId> <step>` for each call it receives, the tool
 * `tool <n>`; the model's answer after the tool is what it read (`read <tool result>`, printed as `<runId> read …`).
 * `start-ask` starts runs `ask-0` … instead, whose first call asks a person (`ask_human`: "Which city?").
 */
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [store, mode, countText] = process.argv.slice(2)
const count = Number(countText ?? "1")
const act = Tool.make({
  name: "act",
  description: "",
  parameters: Schema.Struct({ n: Schema.Number }),
  handler: ({ n }) => Effect.sync(() => (console.log(`tool ${n}`), `did ${n}`)),
  needsApproval: true
})
const agent = Agent.make({ name: "worker", instructions: "", tools: [act, HumanLoop.askTool()] })
const model = ScriptedModel.layer((request) =>
  Effect.flatMap(Effect.service(Model.currentCallContext), (call): Effect.Effect<ScriptedModel.Turn> => {
    const step = call?.step ?? "?"
    const runId = call?.rootSessionId ?? "?"
    console.log(`call ${runId} ${step}`)
    if (step === "react.turn_1" && runId.startsWith("ask-")) {
      return Effect.succeed({ toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "Which city?" } }] })
    }
    if (step === "react.turn_1") {
      const n = Number(runId.replace("run-", ""))
      return Effect.succeed({ toolCalls: [{ id: `k${n}`, name: "act", arguments: { n } }] })
    }
    const read = `read ${String(request.messages?.at(-1)?.content)}`
    console.log(`${runId} ${read}`)
    return Effect.succeed(read)
  })
)
// `start-ask`: the runs ask (`ask-0` …: their first call is `ask_human`), and wait for answers.
const asking = mode === "start-ask"
const runIds = Array.from({ length: count }, (_, i) => asking ? `ask-${i}` : `run-${i}`)
const payloadOf = (runId: string) => ({ agent: "worker", prompt: "go", runId })

const program = Effect.gen(function*() {
  if (mode === "start" || asking) {
    for (const runId of runIds) yield* Durable.AgentRun.execute(payloadOf(runId), { discard: true })
    const waiting = Effect.map(
      Effect.forEach(runIds, (runId) => asking
        ? Effect.map(Durable.questions(runId), (waits) => waits.length)
        : Effect.map(Durable.pending(runId), (waits) => waits.length)),
      (all) => all.filter((n) => n > 0).length
    )
    while ((yield* waiting) < count) yield* Effect.sleep("20 millis")
    console.log(`waiting ${yield* waiting}`)
    return yield* Effect.never
  }
  yield* Effect.forEach(runIds, (runId, i) =>
    Durable.decide(runId, `k${i}`, i % 2 === 0 ? { approved: true } : { approved: false, reason: "no" }))
  yield* Effect.forEach(runIds, (runId) =>
    Effect.map(Durable.AgentRun.execute(payloadOf(runId)), (result) => console.log(`result ${runId} ${result.output}`)), { concurrency: "unbounded" })
})

const postgres = store!.startsWith("postgres://") || store!.startsWith("postgresql://")
const engine = postgres ? Durable.layerPostgresRunner({ url: store! }) : Durable.layerSqlite(store!)

program.pipe(
  Effect.provide(Durable.layer([agent]).pipe(Layer.provideMerge(engine), Layer.provide(model))),
  Effect.runPromise
).then(
  () => process.exit(0),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)
