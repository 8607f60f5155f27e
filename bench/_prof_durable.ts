import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ScriptedModel, SelfRefine } from "valet"
import * as Durable from "valet/Durable"
import * as ScriptedServer from "../test/support/scriptedModelServer.js"
const dir = mkdtempSync(join(tmpdir(), "prof-"))
const which = process.argv[2]
const solver = Agent.make({ name: "solver", instructions: "", architecture: Effect.runSync(SelfRefine.make({ maxRounds: 2 })) })
const scripted = () => ScriptedModel.layer((request) => ScriptedServer.answerOf((request.messages ?? []).map((m) => ({ role: m.role, content: typeof m.content === "string" ? m.content : "" }))))
writeFileSync(join(dir, "p.jsonl"), ScriptedServer.dataset(600))
for (let round = 0; round < 4; round++) {
  const t = performance.now()
  const engine = which === "memory" ? WorkflowEngine.layerMemory : Durable.layerSqlite(join(dir, `o-${round}.db`))
  await Effect.runPromise(Durable.evaluate(join(dir, "p.jsonl"), { concurrency: 12, agent: solver, evaluation: `s-${round}` }).pipe(
    Effect.provide(Layer.merge(Durable.layer([solver]).pipe(Layer.provideMerge(engine), Layer.provide(scripted())), NodeFileSystem.layer))))
  console.log(which, round, (performance.now() - t).toFixed(0))
}
