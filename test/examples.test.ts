import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as ActorCritic from "../examples/actor-critic.js"
import * as ActorLoop from "../examples/actor-loop.js"
import * as BlackboardExample from "../examples/blackboard.js"
import * as Debate from "../examples/debate.js"
import * as DeepAgentExample from "../examples/deep-agent.js"
import * as Evaluation from "../examples/evaluation.js"
import * as McpServerExample from "../examples/mcp-server.js"
import * as McpTools from "../examples/mcp-tools.js"
import * as PlanAndExecute from "../examples/plan-and-execute.js"
import * as ReactCalculator from "../examples/react-calculator.js"
import * as RecordReplay from "../examples/record-replay.js"
import * as Reflexion from "../examples/reflexion.js"
import * as ReWOOExample from "../examples/rewoo.js"
import * as RouterExample from "../examples/router.js"
import * as CustomArchitecture from "../examples/custom-architecture.js"
import * as SelfRefine from "../examples/self-refine.js"
import * as SubAgents from "../examples/sub-agents.js"
import * as Supervisor from "../examples/supervisor.js"
import * as SwarmExample from "../examples/swarm.js"
import * as TreeOfThoughtsExample from "../examples/tree-of-thoughts.js"
import { bwrapWorks, testIsolation } from "./support/processes.js"

/** Runs an example's program and collects what it prints. */
const printed = <E, R>(program: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const original = console.log
    console.log = (...args: Array<unknown>) => void lines.push(args.map(String).join(" "))
    yield* program.pipe(Effect.ensuring(Effect.sync(() => { console.log = original })))
    return lines
  })

describe("examples", () => {
  it.live("blackboard: the lead picks the researcher, then the writer, then ends; the editor answers", () =>
    Effect.gen(function*() {
      const lines = yield* printed(BlackboardExample.main)
      expect(lines[0]).toMatch(/^# Blackboard — .*using ScriptedModel/)
      expect(lines.filter((line) => line.includes("blackboard.contribution")).map((line) => /"agent":"(\w+)"/.exec(line)![1])).toEqual(["researcher", "writer"])
      expect(lines.at(-1)).toMatch(/run completed after 6 model calls.*decide on its own\.$/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("swarm hands the customer from triage to billing", () =>
    Effect.gen(function*() {
      const lines = yield* printed(SwarmExample.main)
      expect(lines[0]).toMatch(/^# Swarm — .*using ScriptedModel/)
      expect(lines.some((line) => line.includes('swarm.handoff {"from":"triage","to":"billing"'))).toBe(true)
      expect(lines.at(-1)).toMatch(/run completed after 2 model calls.*refunded the duplicate March charge/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("rewoo plans two tools in one call and answers in the next", () =>
    Effect.gen(function*() {
      const lines = yield* printed(ReWOOExample.main)
      expect(lines[0]).toMatch(/^# ReWOO — .*using ScriptedModel/)
      expect(lines.some((line) => line.includes('tool metres_to_feet({"metres":"330"})'))).toBe(true)
      expect(lines.at(-1)).toMatch(/run completed after 2 model calls.*1083 feet tall/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("tree-of-thoughts solves the game of 24 at depth 2", () =>
    Effect.gen(function*() {
      const lines = yield* printed(TreeOfThoughtsExample.main)
      expect(lines[0]).toMatch(/^# Tree of Thoughts — .*using ScriptedModel/)
      expect(lines.some((line) => line.includes('tree_of_thoughts.solved {"depth":2,"score":1}'))).toBe(true)
      expect(lines.at(-1)).toMatch(/run completed after \d+ model calls.*\(7 − 8 ÷ 8\) × 4 = 24$/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("debate: three debaters agree in round 1, no judge", () =>
    Effect.gen(function*() {
      const lines = yield* printed(Debate.main)
      expect(lines[0]).toMatch(/^# Multi-agent debate — .*using ScriptedModel/)
      expect(lines.some((line) => line.includes('multi_agent_debate.converged {"round":1,"debater":1,"votes":3}'))).toBe(true)
      expect(lines.at(-1)).toMatch(/run completed after 6 model calls.*cooks treat it as a vegetable\.$/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("router sends each request to its specialist", () =>
    Effect.gen(function*() {
      const lines = yield* printed(RouterExample.main)
      expect(lines[0]).toMatch(/^# Router — .*using ScriptedModel/)
      expect(lines.filter((line) => line.includes("router.dispatched")).map((line) => /"route":"([^"]+)"/.exec(line)![1])).toEqual(["billing", "tech-support"])
      expect(lines.at(-1)).toMatch(/run completed after 2 model calls.*update its firmware\.$/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("mcp-server: an MCP SDK client starts it, lists the agents and calls the writer", () =>
    Effect.gen(function*() {
      const root = join(import.meta.dirname, "..")
      const transport = new StdioClientTransport({
        command: join(root, "node_modules", ".bin", "tsx"),
        args: [join(root, "examples", "mcp-server.ts")],
        env: { PATH: process.env.PATH ?? "" },
        stderr: "pipe"
      })
      const client = new Client({ name: "valet-example-test", version: "1.0.0" })
      yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((tool) => tool.name)).toEqual(["assistant", "writer"])
      const result = yield* Effect.promise(() => client.callTool({ name: "writer", arguments: { input: "Capital of France?" } }))
      expect(result.content).toEqual([{ type: "text", text: McpServerExample.scripts.writer[2] }])
    }).pipe(Effect.scoped), 30_000)

  it.live("mcp-tools answers with two tools of a real MCP server", () =>
    Effect.gen(function*() {
      const lines = yield* printed(McpTools.main)
      expect(lines[0]).toMatch(/^# MCP tools — .*; \d+ tools from server-everything$/)
      expect(lines.some((line) => line.includes("The sum of 19 and 23 is 42."))).toBe(true)
      expect(lines.some((line) => line.includes("Echo: 42"))).toBe(true)
      expect(lines.at(-1)).toContain("19 + 23 = 42")
    }), 30_000)

  it.live("react-calculator streams a ReAct run to its answer", () =>
    Effect.gen(function*() {
      const lines = yield* printed(ReactCalculator.main)
      expect(lines[0]).toMatch(/^# ReAct calculator — .*using ScriptedModel/)
      expect(lines.at(-1)).toMatch(/run completed after 2 model calls.*both are 42\.$/)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("sub-agents prints the session tree", () =>
    Effect.gen(function*() {
      const lines = yield* printed(SubAgents.main)
      const tree = lines.at(-1)!.split("\n")
      expect(tree[0]).toBe("session tree:")
      expect(tree[2]).toMatch(/__researcher: 4 events$/)
      expect(tree[3]).toMatch(/__writer: 4 events$/)
    }))

  it.live("record-replay replays without a model and reports a miss", () =>
    Effect.gen(function*() {
      const lines = yield* printed(RecordReplay.main)
      expect(lines).toContain("identical output and usage: true")
      expect(lines.at(-1)).toMatch(/^a prompt that was never recorded: ReplayMiss: /)
    }))

  it.live("custom-architecture: a 13th architecture from public names only picks the verified draft", () =>
    Effect.gen(function*() {
      const lines = yield* printed(CustomArchitecture.main)
      expect(lines[0]).toMatch(/^# A custom architecture \(Best-of-N\) — .*using ScriptedModel/)
      expect(lines).toContainEqual(expect.stringMatching(/best_of_n\.scored \{"round":1,"scores":\[0,1,0\]\}$/))
      expect(lines.at(-1)).toMatch(/run completed after 6 model calls.*: 23$/)
      // Its declaration checks options and reads its deprecated name like the built-in ones.
      expect((yield* Effect.flip(CustomArchitecture.BestOfN.make({ n: 0 }))).message).toBe("BestOfN: n must be an integer >= 1, got 0")
      const renamed = yield* CustomArchitecture.BestOfN.normalize({ drafts: 5 })
      expect(renamed).toEqual({ n: 5 })
    }))

  it.live("self-refine converges after one rewrite", () =>
    Effect.gen(function*() {
      const lines = yield* printed(SelfRefine.main)
      expect(lines[0]).toMatch(/^# Self-Refine — .*using ScriptedModel/)
      expect(lines).toContainEqual(expect.stringMatching(/self_refine\.converged \{"round":2\}$/))
      expect(lines.at(-1)).toMatch(/run completed after 4 model calls.*Sunlight is a mix of all colours\./)
    }))

  it.live("actor-critic revises once and is approved", () =>
    Effect.gen(function*() {
      const lines = yield* printed(ActorCritic.main)
      expect(lines[0]).toMatch(/^# Actor-Critic — /)
      expect(lines).toContainEqual(expect.stringMatching(/actor_critic\.approved \{"round":2,"score":0\.93\}$/))
      expect(lines.at(-1)).toMatch(/run completed after 4 model calls.*first snow on the step/)
    }))

  it.live("plan-and-execute runs the two forecasts side by side, then the comparison", () =>
    Effect.gen(function*() {
      const lines = yield* printed(PlanAndExecute.main)
      expect(lines[0]).toMatch(/^# Plan-and-Execute — /)
      // Both independent steps start before either completes.
      const started = lines.filter((line) => line.includes("plan_and_execute.step_started")).map((line) => lines.indexOf(line))
      const firstCompleted = lines.findIndex((line) => line.includes("plan_and_execute.step_completed"))
      // The three steps are there (an event renamed would leave nothing to compare).
      expect(started).toHaveLength(3)
      expect(started.slice(0, 2).every((index) => index < firstCompleted)).toBe(true)
      expect(lines.at(-1)).toMatch(/run completed after 7 model calls.*Go to Lisbon.*\nsteps: \["lisbon","porto","compare"\]$/)
    }))

  it.live("reflexion learns a lesson and succeeds on the second attempt", () =>
    Effect.gen(function*() {
      const lines = yield* printed(Reflexion.main)
      expect(lines[0]).toMatch(/^# Reflexion — /)
      expect(lines).toContainEqual(expect.stringMatching(/reflexion\.threshold_met \{"attempt":2,"score":0\.95\}$/))
      expect(lines.at(-1)).toBe(
        'lessons stored for this task: ["read riddle words in their other meanings before answering literally."]'
      )
    }))

  it.live("supervisor delegates, then forwards the writer's piece verbatim", () =>
    Effect.gen(function*() {
      const lines = yield* printed(Supervisor.main)
      expect(lines[0]).toMatch(/^# Supervisor — /)
      expect(lines).toContainEqual(expect.stringMatching(/supervisor\.forwarded \{"worker":"writer"\}$/))
      expect(lines.at(-1)).toBe("forwarded verbatim: true")
    }))

  it.live("actor-loop runs every task in the sandbox: ast-grep diffs, a failed check, the saved state", () =>
    Effect.gen(function*() {
      const lines = yield* printed(ActorLoop.main)
      expect(lines[0]).toMatch(/^# Actor loop — /)
      // Without bubblewrap the sandbox refuses to build; the demo says so, then opts into plain processes.
      const fellBack = bwrapWorks ? 0 : 1
      if (!bwrapWorks) expect(lines[1]).toMatch(/^sandbox: Sandbox: no isolation available .*; this demo opts into plain processes/)
      expect(lines[1 + fellBack]).toMatch(new RegExp(`^sandbox: ${testIsolation} isolation, limits by `))
      expect(lines).toContain("log-calls step 1: exit 0 · changed app.py · parse ok · sandbox_failed false")
      expect(lines).toContain("  +    logger.info(\"hello\", name)")
      expect(lines).toContain("  +let items = [1, 2, 3]")
      expect(lines).toContain("check-add step 1: exit 1 · parse ok · sandbox_failed true")
      expect(lines).toContain("  +++ b/summary.txt")
      expect(lines).toContain("state of check-add:\nHypotheses:\n- add subtracts instead of adding\n\nOpen issues:\n- add(2, 3) is wrong")
      expect(lines.at(-1)).toBe("trajectory lines of summarize-csv: 1")
    }))

  it.live("deep-agent plans 4 steps, runs the failing test, asks a sub-agent, fixes calc.py, passes; the project untouched, the diff printed", () =>
    Effect.gen(function*() {
      const project = readFileSync(join(DeepAgentExample.projectPath, "calc.py"), "utf8")
      const lines = yield* printed(DeepAgentExample.main)
      expect(lines[0]).toMatch(/^# DeepAgent — .*using ScriptedModel/)
      const fellBack = bwrapWorks ? 0 : 1
      expect(lines[1 + fellBack]).toBe(`sandbox: ${testIsolation} isolation, a copy of examples/deep-agent/project`)
      expect(lines.filter((line) => / plan: /.test(line)).map((line) => line.replace(/^\[\w+\] /, ""))).toEqual([
        "plan: 0 of 4 done, now: Run the test",
        "plan: 1 of 4 done, now: Find out why it fails",
        "plan: 2 of 4 done, now: Fix calc.py",
        "plan: 3 of 4 done, now: Run the test again",
        "plan: 4 of 4 done"
      ])
      const executed = lines.filter((line) => line.includes("tool execute returned"))
      expect(executed[0]).toMatch(/: exit code 1 --- stderr --- Traceback/)
      expect(executed[1]).toMatch(/exit code 0 --- stdout --- test_calc: passed$/)
      // The sub-agent's events under its own session; only its answer comes back to the agent.
      expect(lines).toContainEqual(expect.stringMatching(/^\[sess_\w+__task_1\] tool read_file\(\{"path":"calc.py"\}\)$/))
      expect(lines).toContainEqual(expect.stringMatching(/tool task returned in \d+ ms: add returns a - b: it subtracts\. It should return a \+ b\.$/))
      expect(lines.at(-1)).toBe("changed: calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b")
      expect(lines.at(-2)).toMatch(/run completed after 12 model calls, .*: test_calc\.py passes: add subtracted \(a - b, found by the sub-agent\); it now returns a \+ b\.$/)
      expect(readFileSync(join(DeepAgentExample.projectPath, "calc.py"), "utf8")).toBe(project)
    }).pipe(Effect.provide(Logger.layer([]))))

  it.live("evaluation runs the Ensemble over the arithmetic set, prints the summary, then resumes", () =>
    Effect.gen(function*() {
      const lines = yield* printed(Evaluation.main)
      expect(lines[0]).toMatch(/^# Evaluation of the Ensemble on examples\/eval\/arithmetic\.jsonl — /)
      expect(lines[1]).toMatch(/^problems +30 of 30 done\naccuracy +96\.7 % \(29 of 30 with a reference\)\naccepted +30\nmodel calls +158 \(5\.27 per problem\)\n/)
      expect(lines).toContain("wrong: arith-23: answered 62, reference 62.5 (accepted: true)")
      expect(lines).toContain("4 problems had two distinct answers (3 solvers + 2 critics + 2 judges = 7 calls)")
      expect(lines.at(-1)).toBe("resumed: 30 of 30 problems skipped, accuracy 0.9667")
    }))
})
