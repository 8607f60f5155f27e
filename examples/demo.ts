/**
 * `npm run demo`: runs every example end to end and prints its events.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import * as ActorCritic from "./actor-critic.js"
import * as ActorLoop from "./actor-loop.js"
import * as BlackboardExample from "./blackboard.js"
import * as CustomArchitecture from "./custom-architecture.js"
import * as Debate from "./debate.js"
import * as DeepAgentExample from "./deep-agent.js"
import * as Evaluation from "./evaluation.js"
import * as McpTools from "./mcp-tools.js"
import * as PlanAndExecute from "./plan-and-execute.js"
import * as ReactCalculator from "./react-calculator.js"
import * as RecordReplay from "./record-replay.js"
import * as Reflexion from "./reflexion.js"
import * as ReWOOExample from "./rewoo.js"
import * as RouterExample from "./router.js"
import * as SelfRefine from "./self-refine.js"
import * as SubAgents from "./sub-agents.js"
import * as Supervisor from "./supervisor.js"
import * as SwarmExample from "./swarm.js"
import * as TreeOfThoughtsExample from "./tree-of-thoughts.js"
import { demoModel } from "./support/model.js"

const main = Effect.gen(function*() {
  const { note } = yield* demoModel([])
  yield* Console.log(`valet demo — ${note}\n`)
  for (const example of [
    ReactCalculator.main,
    SubAgents.main,
    RecordReplay.main,
    SelfRefine.main,
    ActorCritic.main,
    PlanAndExecute.main,
    Reflexion.main,
    Evaluation.main,
    Supervisor.main,
    RouterExample.main,
    Debate.main,
    TreeOfThoughtsExample.main,
    ReWOOExample.main,
    SwarmExample.main,
    BlackboardExample.main,
    CustomArchitecture.main,
    DeepAgentExample.main,
    McpTools.main,
    ActorLoop.main
  ]) {
    yield* example
    yield* Console.log("")
  }
})

NodeRuntime.runMain(main)
