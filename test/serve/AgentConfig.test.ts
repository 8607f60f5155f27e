/**
 * `valet.yaml`: a good file builds agents that run (scripted models, references between agents, MCP tools from
 * server-everything); each kind of bad file is one error naming the file, the line and the key.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Logger, Result, Stream } from "effect"
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import * as Agent from "../../src/core/Agent.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as Threads from "../../src/core/Threads.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Server from "../support/openAiServer.js"

const services = Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)

const everything = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
  "dist",
  "index.js"
)

const parse = (text: string) => AgentConfig.parse(text, "valet.yaml")

/** The error message of a file that must be refused. */
const refusal = (text: string): string => {
  const parsed = parse(text)
  if (Result.isSuccess(parsed)) throw new Error("the file was accepted")
  return parsed.failure.message
}

const scripted = (replies: ReadonlyArray<string>) =>
  `{ provider: scripted, replies: [${replies.map((reply) => JSON.stringify(reply)).join(", ")}] }`

describe("AgentConfig", () => {
  it.effect("a file of agents builds a catalog whose agents run on their own models, fresh scripts per run", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
model: ${scripted(["Paris."])}
agents:
  assistant:
    description: Answers in one sentence.
    instructions: Be brief.
    budget: { maxCalls: 3 }
  writer:
    architecture: self-refine
    instructions: Write well.
    options: { maxRounds: 1, critic: reviewer }
    model: ${scripted(["draft", "better: add a full stop", "draft."])}
  reviewer:
    instructions: Review strictly.
    model: ${scripted(["REVIEWER SAYS: no issues"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect(agents.list.map((entry) => [entry.name, entry.architecture, entry.description])).toEqual([
        ["assistant", "react", "Answers in one sentence."],
        ["writer", "self_refine", "writer (self_refine)"],
        ["reviewer", "react", "reviewer (react)"]
      ])
      expect(agents.get("assistant")!.budget).toEqual({ maxCalls: 3 })
      // Two runs: each starts the script from its first reply.
      for (let i = 0; i < 2; i++) {
        const result = yield* Agent.run(agents.get("assistant")!.agent, "Capital of France?")
        expect(result.output).toBe("Paris.")
      }
      // The critic is the reviewer agent, on the reviewer's own model: its "no issues" ends the rounds.
      const written = yield* Agent.run(agents.get("writer")!.agent, "Write it.")
      expect(written.output).toBe("draft")
      expect(written.modelCalls).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a supervisor's workers are agents of the file, by name", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
agents:
  boss:
    architecture: supervisor
    instructions: Delegate.
    options: { workers: [adder] }
    model:
      provider: scripted
      replies:
        - toolCalls: [{ name: delegate, arguments: { worker: adder, instructions: "2+3" } }]
        - "The adder says 5."
  adder:
    description: Adds numbers.
    instructions: Add.
    model: ${scripted(["5"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const events = yield* Stream.runCollect(Agent.stream(agents.get("boss")!.agent, "What is 2+3?"))
      const delegated = events.find((event) => event._tag === "ToolReturned" && event.name === "delegate")
      // The worker answered from its own script.
      expect(delegated).toMatchObject({ content: expect.stringContaining("5"), isError: false })
      expect(events.filter((event) => event._tag === "RunStarted").map((event) => event.agent)).toEqual(["boss", "adder"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "The adder says 5." } })
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a router's routes name agents of the file", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
agents:
  desk:
    architecture: router
    instructions: Route requests.
    options: { routes: [{ name: billing, agent: biller, description: invoices }], fallback: billing }
    model: ${scripted(["route: Billing"])}
  biller:
    instructions: Handle invoices.
    model: ${scripted(["Refund issued."])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const result = yield* Agent.run(agents.get("desk")!.agent, "Charged twice.")
      expect(result).toMatchObject({ output: "Refund issued.", metadata: { route: "billing" } })
      expect(refusal(`model: ${scripted(["x"])}\nagents:\n  d:\n    architecture: router\n    instructions: x\n    options: { routes: [{ name: b, agent: nobody }] }\n`)).toBe(
        'valet.yaml:6:43: agents.d.options.routes[0].agent names the agent "nobody", which agents does not define'
      )
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.live("an agent's tools come from the MCP servers it names (server-everything over stdio)", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
mcpServers:
  everything: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(everything)}, stdio] }
agents:
  tooled:
    instructions: Use tools.
    tools: [everything]
    model:
      provider: scripted
      replies:
        - toolCalls: [{ name: get-sum, arguments: { a: 2, b: 3 } }]
        - "The sum is 5."
  plain:
    instructions: No tools.
    model: ${scripted(["ok"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect(agents.get("tooled")!.agent.tools.map((tool) => tool.name)).toContain("get-sum")
      expect(agents.get("plain")!.agent.tools).toEqual([])
      const result = yield* Agent.run(agents.get("tooled")!.agent, "2+3?")
      expect(result.output).toBe("The sum is 5.")
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.live("approvals: the policy holds the agent's MCP tools by name and argument predicate; an unknown tool is an error on its line", () =>
    Effect.gen(function*() {
      const file = (approvals: string) => `
mcpServers:
  everything: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(everything)}, stdio] }
agents:
  tooled:
    instructions: Use tools.
    tools: [everything]
    approvals:
${approvals}
    approvalTimeout: 10 minutes
    model: ${scripted(["ok"])}
`
      const loaded = yield* Result.match(parse(file(`      get-sum: { when: [{ argument: a, above: 100 }, { argument: b, equals: 7 }] }
      echo: true`)), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const tools = agents.get("tooled")!.agent.tools
      const sum = tools.find((tool) => tool.name === "get-sum")!
      const needed = (tool: typeof sum, args: string) => tool.approval!.needed(args) as Effect.Effect<boolean>
      expect([
        yield* needed(sum, `{"a":250,"b":1}`),
        yield* needed(sum, `{"a":2,"b":7}`),
        yield* needed(sum, `{"a":2,"b":3}`),
        // When in doubt a person decides: a string where a number is compared, arguments that are not an object.
        yield* needed(sum, `{"a":"lots","b":3}`),
        yield* needed(sum, `not json`)
      ]).toEqual([true, true, false, true, true])
      expect(Duration.toMillis(sum.approval!.timeout!)).toBe(600_000)
      expect(yield* needed(tools.find((tool) => tool.name === "echo")!, `{"message":"hi"}`)).toBe(true)
      // Tools the policy does not name are untouched.
      expect(tools.filter((tool) => tool.approval !== undefined).map((tool) => tool.name).sort()).toEqual(["echo", "get-sum"])
      const unknown = yield* Effect.flip(
        Effect.flatMap(Result.match(parse(file(`      get-summ: true`)), { onFailure: Effect.fail, onSuccess: Effect.succeed }), (bad) => AgentConfig.build(bad))
      )
      expect(unknown.message).toMatch(/^valet\.yaml:9:17: agents\.tooled\.approvals\.get-summ names the tool "get-summ", which the agent does not have \(its tools: .*get-sum.*\)$/)
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.effect("approvals: a deep_agent's policy may name the tools its architecture adds; their calls wait, the others run", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
agents:
  coder:
    architecture: deep_agent
    instructions: Code.
    approvals:
      execute: true
      write_file: { when: { argument: path, matches: "^deploy/" } }
    approvalTimeout: 10 minutes
    model:
      provider: scripted
      replies:
        - toolCalls: [{ name: write_file, arguments: { path: notes.md, content: "n" } }, { name: execute, arguments: { command: [ls] } }]
        - "Done."
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const run = yield* Effect.forkChild(Stream.runCollect(Agent.stream(agents.get("coder")!.agent, "Work.")))
      const waiting = yield* HumanLoop.awaitPending(1)
      expect(waiting.map((request) => request.name)).toEqual(["execute"])
      yield* HumanLoop.decide(waiting[0]!.toolCallId, { approved: false, reason: "no" })
      const events = yield* Fiber.join(run)
      const returned = events.filter((event) => event._tag === "ToolReturned").map((event) => event._tag === "ToolReturned" && [event.name, event.content])
      expect(returned).toEqual([["write_file", "Wrote 1 bytes to notes.md (a new file)."], ["execute", "ERROR: rejected: no"]])
      expect(events.filter((event) => event._tag === "ApprovalRequested").map((event) => event._tag === "ApprovalRequested" && event.name)).toEqual(["execute"])
    }).pipe(Effect.scoped, Effect.provide(HumanLoop.layer), Effect.provide(services)))

  it("approvals: a deep_agent's rule given twice (the agent's approvals and options.approvals), or for a tool it has not, is refused on its line", () => {
    const file = (lines: string) => `model: ${scripted(["x"])}\nagents:\n  a:\n    architecture: deep_agent\n    instructions: x\n${lines}`
    expect(refusal(file("    options: { approvals: { execute: true } }\n    approvals: { execute: true }\n"))).toMatch(
      /^valet\.yaml:7:\d+: agents\.a\.approvals\.execute is also in options\.approvals: give the tool's rule once$/
    )
    expect(refusal(file("    approvals: { execute: true, shell: true }\n"))).toMatch(
      /^valet\.yaml:6:\d+: agents\.a\.approvals\.shell names the tool "shell", and the agent has no tools/
    )
  })

  it("approvals: bad predicates, a timeout without approvals and approvals without tools are refused on their line", () => {
    const agent = (lines: string) => `model: ${scripted(["x"])}\nagents:\n  a:\n    instructions: x\n${lines}`
    expect(refusal(agent("    approvals: { refund: { when: { argument: amount, matches: \"(\" } } }\n"))).toMatch(
      /^valet\.yaml:5:63: agents\.a\.approvals\.refund\.when\.matches must be a regular expression: Invalid regular expression/
    )
    expect(refusal(agent("    approvals: { refund: { when: { argument: amount, above: 1, equals: 2 } } }\n"))).toMatch(
      /^valet\.yaml:5:\d+: agents\.a\.approvals\.refund\.when needs exactly one of above, below, equals, matches \(it has above, equals\)/
    )
    expect(refusal(agent("    approvals: { refund: false }\n"))).toMatch(/^valet\.yaml:5:\d+: agents\.a\.approvals\.refund /)
    expect(refusal(agent("    approvalTimeout: 1 minute\n"))).toBe(
      "valet.yaml:5:22: agents.a.approvalTimeout is how long the calls of approvals wait, and the agent has no approvals"
    )
    expect(refusal(agent("    approvals: { refund: true }\n"))).toBe(
      `valet.yaml:5:26: agents.a.approvals.refund names the tool "refund", and the agent has no tools (tools: names the MCP servers they come from)`
    )
  })

  it.effect("guardrails: the built-ins by name build the agent's guardrails (a redactor on the output, a judge on the agent's model)", () =>
    Effect.gen(function*() {
      const guardrails = `
    guardrails:
      input:
        - maxLength: { maxChars: 20 }
      output:
        - redact: { pii: [email], patterns: { ticket: "TCK-\\\\d+" } }
        - judge: { criteria: "No medical advice.", name: no_medical }
      onOutputTrip: fail`
      const loaded = yield* Result.match(parse(`
agents:
  support:
    instructions: Help.
    model: ${scripted(["Mail jane@example.com about TCK-12.", '{"pass": true, "reason": "fine"}'])}${guardrails}
  medic:
    instructions: Help.
    model: ${scripted(["Take 2 aspirin.", '{"pass": false, "reason": "medical advice"}'])}${guardrails}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect((yield* Agent.run(agents.get("support")!.agent, "Who do I write to?")).output).toBe("Mail [redacted email] about [redacted ticket].")
      expect(yield* Effect.flip(Agent.run(agents.get("medic")!.agent, "My head hurts.")).pipe(Effect.map((e) => [e._tag, (e as { guardrail?: string }).guardrail])))
        .toEqual(["GuardrailTripped", "no_medical"])
      expect(yield* Effect.flip(Agent.run(agents.get("support")!.agent, "x".repeat(21))).pipe(Effect.map((e) => e.message)))
        .toContain("max_length (input) tripped")
    }).pipe(Effect.scoped, Effect.provide(services)))

  it("guardrails: an unknown or doubled built-in, bad options, a bad pattern and a bad trip mode are refused on their line", () => {
    const agent = (lines: string) => `model: ${scripted(["x"])}\nagents:\n  a:\n    instructions: x\n    guardrails:\n${lines}`
    expect(refusal(agent("      input:\n        - pii: {}\n"))).toMatch(
      /^valet\.yaml:7:16: agents\.a\.guardrails\.input\[0\]\.pii is not a known key/
    )
    expect(refusal(agent("      output:\n        - { redact: {}, judge: { criteria: x } }\n"))).toMatch(
      /^valet\.yaml:7:\d+: agents\.a\.guardrails\.output\[0\] needs exactly one of maxLength, redact, judge \(it has redact, judge\)/
    )
    expect(refusal(agent("      input:\n        - maxLength: { maxChars: 0 }\n"))).toMatch(
      /^valet\.yaml:7:\d+: agents\.a\.guardrails\.input\[0\]\.maxLength\.maxChars .*integer >= 1/
    )
    expect(refusal(agent("      tool:\n        - redact: { patterns: { bad: \"(\" } }\n"))).toMatch(
      /^valet\.yaml:7:\d+: agents\.a\.guardrails\.tool\[0\]\.redact\.patterns\.bad must be a regular expression/
    )
    expect(refusal(agent("      onToolTrip: explode\n"))).toMatch(/^valet\.yaml:6:\d+: agents\.a\.guardrails\.onToolTrip /)
  })

  it.effect("guardrails: a judge on another model (one of models: by name, or written out) and guardrails by name", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
models:
  strict: ${scripted(['{"pass": false, "reason": "too curt"}'])}
guardrails:
  polite: { judge: { criteria: "Be polite.", model: strict } }
  no_pii: { redact: { mode: trip } }
model: ${scripted(["Answer."])}
agents:
  named:
    instructions: Help.
    guardrails: { output: [polite] }
  inline:
    instructions: Help.
    guardrails:
      input: [no_pii]
      output:
        - judge: { criteria: "Be polite.", name: kind, model: ${scripted(['{"pass": true, "reason": "fine"}'])} }
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      // The judge's verdict comes from its own model: the agent's answers "Answer." and would be no verdict.
      const error = yield* Effect.flip(Agent.run(agents.get("named")!.agent, "Hi"))
      expect(error).toMatchObject({ _tag: "GuardrailTripped", guardrail: "polite", kind: "output", reason: "too curt" })
      const result = yield* Agent.run(agents.get("inline")!.agent, "Hi")
      expect(result).toMatchObject({ output: "Answer.", modelCalls: 2 })
      expect(yield* Effect.flip(Agent.run(agents.get("inline")!.agent, "mail ada@example.com"))).toMatchObject({
        _tag: "GuardrailTripped",
        guardrail: "no_pii",
        kind: "input"
      })
    }).pipe(Effect.scoped, Effect.provide(services)))

  it("guardrails and models by name: a name not defined, a judge's bad model, are refused on their line", () => {
    const file = (lines: string) => `model: ${scripted(["x"])}\n${lines}`
    expect(refusal(file("agents:\n  a:\n    instructions: x\n    guardrails: { output: [polite] }\n"))).toBe(
      `valet.yaml:5:28: agents.a.guardrails.output[0] names the guardrail "polite", which guardrails does not define`
    )
    expect(refusal(file("guardrails:\n  polite: { judge: { criteria: x, model: strict } }\nagents:\n  a: { instructions: x }\n"))).toBe(
      `valet.yaml:3:42: guardrails.polite.judge.model names the model "strict", which models does not define`
    )
    expect(refusal(file(`models:\n  big: ${scripted(["x"])}\nagents:\n  a:\n    instructions: x\n    model: small\n`))).toBe(
      `valet.yaml:7:12: agents.a.model names the model "small", which models does not define (it defines big)`
    )
    expect(refusal(file("agents:\n  a:\n    instructions: x\n    guardrails:\n      output:\n        - judge: { criteria: x, model: { provider: nope } }\n"))).toMatch(
      /^valet\.yaml:7:52: agents\.a\.guardrails\.output\[0\]\.judge\.model\.provider /
    )
  })

  it("a fallback chain's settings: when (error tags) and breaker (failures, window, coolDown), refused on their line", () => {
    const chain = (settings: string) =>
      `model:\n  fallback:\n    - ${scripted(["a"])}\n    - ${scripted(["b"])}\n${settings}agents:\n  a: { instructions: x }\n`
    expect(Result.isSuccess(parse(chain("  when: [RateLimited, ServerError]\n  breaker: { failures: 2, window: 1 minute, coolDown: 10 seconds }\n")))).toBe(true)
    expect(Result.isSuccess(parse(chain("  breaker: false\n")))).toBe(true)
    expect(refusal(chain("  when: [RateLimitted]\n"))).toMatch(/^valet\.yaml:5:10: model\.when\[0\] must be .*"RateLimited".*got "RateLimitted"/)
    expect(refusal(chain("  breaker: { failures: 0 }\n"))).toMatch(/^valet\.yaml:5:24: model\.breaker\.failures .*integer >= 1/)
    expect(refusal(chain("  breaker: { coolDown: soon }\n"))).toMatch(/^valet\.yaml:5:\d+: model\.breaker\.coolDown /)
    expect(refusal(chain("  breaker: { probe: 1 }\n"))).toMatch(/^valet\.yaml:5:\d+: model\.breaker\.probe is not a known key/)
    expect(refusal(`model: { fallback: [] }\nagents:\n  a: { instructions: x }\n`)).toMatch(
      /^valet\.yaml:1:20: model\.fallback must be a list of at least one model/
    )
  })

  it.effect("load refuses a file larger than maxFileBytes before reading it: a large file, a sparse 200 MB one, a device", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-config-"))
      try {
        const large = join(dir, "large.yaml")
        // Valid YAML of 2 MiB: on aa650ea it was read and parsed whole.
        writeFileSync(large, `model: ${scripted(["hi"])}\nagents:\n  a: { instructions: x }\n# ${"x".repeat(2 * 1024 * 1024)}\n`)
        expect((yield* Effect.flip(AgentConfig.load(large))).message).toBe(
          `${large}: is ${statSync(large).size} bytes, more than the 1 MiB (1048576 bytes) a valet.yaml may hold`
        )
        // 200 MB that take no disk (a sparse file): refused from its size alone, never read.
        const huge = join(dir, "huge.yaml")
        writeFileSync(huge, "")
        truncateSync(huge, 200_000_000)
        expect((yield* Effect.flip(AgentConfig.load(huge))).message).toBe(
          `${huge}: is 200000000 bytes, more than the 1 MiB (1048576 bytes) a valet.yaml may hold`
        )
        // A device says size 0 and never ends: at most maxFileBytes + 1 bytes of it are read.
        expect((yield* Effect.flip(AgentConfig.load("/dev/zero"))).message).toBe(
          "/dev/zero: is more than 1048576 bytes, more than the 1 MiB (1048576 bytes) a valet.yaml may hold"
        )
        expect((yield* Effect.flip(AgentConfig.load(dir))).message).toBe(`${dir}: is a directory, not a file`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("an MCP server that cannot start: one line with the file and line, the server's name, its command or URL, and why", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-config-"))
      try {
        const path = join(dir, "valet.yaml")
        writeFileSync(path, `model: ${scripted(["hi"])}
mcpServers:
  files:
    command: /no/such/binary
    args: [--root, "my files"]
  web:
    url: http://user:secret@127.0.0.1:1/mcp?token=secret
  dies:
    command: ${process.execPath}
    args: [-e, "console.error('config.json: no such file'); process.exit(3)"]
agents:
  a: { instructions: x, tools: [files] }
  b: { instructions: x, tools: [web] }
  c: { instructions: x, tools: [dies] }
`)
        const loaded = yield* AgentConfig.load(path)
        const failure = (agent: string) => {
          const only = { ...loaded, config: { ...loaded.config, agents: { [agent]: loaded.config.agents[agent]! } } }
          return Effect.flip(Effect.scoped(AgentConfig.build(only)))
        }
        const files = yield* failure("a")
        expect(files).toMatchObject({ _tag: "McpError", server: "files" })
        expect(files.message).toBe(
          `${path}:4:5: MCP server "files" (/no/such/binary --root "my files") cannot start: Cannot spawn MCP server: spawn /no/such/binary ENOENT`
        )
        const web = yield* failure("b")
        // The URL without its credentials or query.
        expect(web.message).toBe(
          `${path}:7:5: MCP server "web" (http://127.0.0.1:1/mcp) cannot start: MCP HTTP request failed: connect ECONNREFUSED 127.0.0.1:1`
        )
        const dies = yield* failure("c")
        expect(dies.message).toMatch(new RegExp(`^${path}:9:5: MCP server "dies" \\(\\S+ -e ".*"\\) cannot start: .*it exited with code 3; its stderr: config\\.json: no such file$`))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(services)), 30_000)

  it.effect("load reads the file; a missing file is one line", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-config-"))
      try {
        writeFileSync(join(dir, "valet.yaml"), `model: ${scripted(["hi"])}\nagents:\n  a: { instructions: x }\n`)
        const loaded = yield* AgentConfig.load(join(dir, "valet.yaml"))
        expect(Object.keys(loaded.config.agents)).toEqual(["a"])
        expect(loaded.config.server).toMatchObject({ host: "127.0.0.1", port: 8787, maxConcurrentRuns: 16, maxEventStreams: 256 })
        const missing = yield* Effect.flip(AgentConfig.load(join(dir, "nope.yaml")))
        expect(missing.message).toBe(`${join(dir, "nope.yaml")}: no such file`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))

  describe("a bad file is one line naming the file, the line and the key", () => {
    const model = `model: ${scripted(["x"])}\n`
    it("an unknown architecture", () => {
      expect(refusal(`${model}agents:\n  a:\n    instructions: x\n    architecture: reactt\n`)).toBe(
        `valet.yaml:5:19: agents.a.architecture must be an architecture's name: actor_critic, blackboard, deep_agent, ensemble, multi_agent_debate, plan_and_execute, react, reflexion, rewoo, router, self_refine, supervisor, swarm, tree_of_thoughts, got "reactt"`
      )
    })
    it("a misspelt key", () => {
      expect(refusal(`${model}agents:\n  a:\n    instruction: x\n`)).toMatch(/^valet\.yaml:\d+:\d+: agents\.a\.(instructions is required|instruction is not a known key)$/)
    })
    it("a bad agent name", () => {
      expect(refusal(`${model}agents:\n  "two words": { instructions: x }\n`)).toBe("valet.yaml:3:16: agents.two words is not a usable name: letters and digits joined by single - or _, at most 48 characters, got \"two words\"")
    })
    it("no agents, and not YAML", () => {
      expect(refusal(`${model}agents: {}\n`)).toBe("valet.yaml:2:9: agents needs at least one agent")
      expect(refusal(`agents: [\n`)).toMatch(/^valet\.yaml:\d+:\d+: not valid YAML/)
    })
    it("a model list that is empty, or holds a bad model: the line of the list or of the model", () => {
      expect(refusal(`model: []\nagents:\n  a: { instructions: x }\n`)).toBe(
        "valet.yaml:1:8: model must be a list of at least one model (tried in order), got []"
      )
      expect(refusal(`agents:\n  a:\n    instructions: x\n    model:\n      - { provider: scripted, replies: [a] }\n      - { provider: nope }\n`)).toMatch(
        /^valet\.yaml:6:9: agents\.a\.model\[1\] must be .*got \{"provider":"nope"\}$/
      )
    })
    it("an agent with no model", () => {
      expect(refusal(`agents:\n  a: { instructions: x }\n`)).toBe(
        "valet.yaml:2:6: agents.a has no model: give it a model, or the file a top-level model"
      )
    })
    it("a reference to an agent or an MCP server that is not defined", () => {
      expect(refusal(`${model}agents:\n  a:\n    instructions: x\n    architecture: self-refine\n    options: { critic: nobody }\n`)).toBe(
        `valet.yaml:6:24: agents.a.options.critic names the agent "nobody", which agents does not define`
      )
      expect(refusal(`${model}mcpServers:\n  fs: { command: x }\nagents:\n  a:\n    instructions: x\n    tools: [fss]\n`)).toBe(
        `valet.yaml:7:13: agents.a.tools[0] names the MCP server "fss", which mcpServers does not define (it defines fs)`
      )
    })
    it("server settings out of range: the port, sizes past what a number holds exactly, an empty host", () => {
      // On aa650ea port 99999 was accepted (the server then listened elsewhere), and maxBodyBytes 1e20 made every
      // request a 500 (effect's ByteSize throws beyond 2^53 - 1).
      const server = (settings: string) => refusal(`${model}agents:\n  a: { instructions: x }\nserver: ${settings}\n`)
      expect(server("{ port: 99999 }")).toBe("valet.yaml:4:17: server.port must be an integer 0-65535, got 99999")
      expect(server("{ port: -1 }")).toBe("valet.yaml:4:17: server.port must be an integer 0-65535, got -1")
      expect(server("{ port: 80.5 }")).toBe("valet.yaml:4:17: server.port must be an integer 0-65535, got 80.5")
      expect(server("{ maxBodyBytes: 1e20 }")).toBe(
        "valet.yaml:4:25: server.maxBodyBytes must be at most 9007199254740991, got 100000000000000000000"
      )
      expect(server("{ maxConcurrentRuns: 0 }")).toBe("valet.yaml:4:30: server.maxConcurrentRuns must be an integer >= 1, got 0")
      expect(server("{ keepFinishedMs: .inf }")).toBe("valet.yaml:4:27: server.keepFinishedMs must be an integer >= 0, got Infinity")
      expect(server("{ keepFinishedRuns: 1e300 }")).toMatch(/^valet\.yaml:4:29: server\.keepFinishedRuns must be at most 9007199254740991, got 1e\+300$/)
      expect(server(`{ host: "" }`)).toBe(`valet.yaml:4:17: server.host must be a host name or IP address, got ""`)
      expect(refusal(`${model}mcp: { callTimeoutMs: 1e20 }\nagents:\n  a: { instructions: x }\n`)).toBe(
        "valet.yaml:2:23: mcp.callTimeoutMs must be at most 9007199254740991, got 100000000000000000000"
      )
      // Durations are `"1 hour"` or milliseconds; the …Ms names are deprecated and still read.
      expect(server(`{ keepFinished: "soon" }`)).toBe(`valet.yaml:4:25: server.keepFinished must be a duration such as "30 seconds", got "soon"`)
      const durations = parse(`${model}mcp: { callTimeout: "5 seconds", connectTimeoutMs: 2000 }\nagents:\n  a: { instructions: x }\nserver: { keepFinished: "10 minutes", keepFinishedMs: 5 }\n`)
      expect(Result.isSuccess(durations) && durations.success.config.server).toMatchObject({ keepFinished: "10 minutes", keepFinishedMs: 5 })
      expect(Result.isSuccess(durations) && durations.success.config.mcp).toEqual({ callTimeout: "5 seconds", connectTimeoutMs: 2000 })
      const edges = parse(`${model}agents:\n  a: { instructions: x }\nserver: { port: 65535, keepFinishedRuns: 0 }\n`)
      expect(Result.isSuccess(edges) && edges.success.config.server).toMatchObject({ port: 65535, keepFinishedRuns: 0 })
    })
    it("a \"billion laughs\" file is refused as a problem of the file, not an exception", () => {
      const laughs = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
      for (const [i, name] of ["b", "c", "d", "e", "f", "g", "h", "i"].entries()) {
        const previous = String.fromCharCode("a".charCodeAt(0) + i)
        laughs.push(`${name}: &${name} [${Array.from({ length: 9 }, () => `*${previous}`).join(", ")}]`)
      }
      expect(refusal(`${laughs.join("\n")}\n${model}agents:\n  x: { instructions: *i }\n`)).toBe(
        `valet.yaml: refused: its aliases (*name) expand more than 100 times in all (a "billion laughs" file expands them billions of times)`
      )
      // One anchor used by many agents is ordinary reuse: 99 aliases of it pass, the 100th is refused.
      const reused = (uses: number) =>
        parse(`model: &m ${scripted(["x"])}\nagents:\n${Array.from({ length: uses }, (_, i) => `  a${i}: { instructions: x, model: *m }`).join("\n")}\n`)
      const many = reused(99)
      expect(Result.isSuccess(many) && Object.keys(many.success.config.agents).length).toBe(99)
      expect(Result.isFailure(reused(100))).toBe(true)
    })
    it("threads: a store valet has, its path only for sqlite, its urlEnv required for postgres and only there", () => {
      const threads = (settings: string) => refusal(`${model}agents:\n  a: { instructions: x }\nthreads: ${settings}\n`)
      expect(threads("{ store: redis }")).toBe(`valet.yaml:4:19: threads.store must be "memory" or "sqlite" or "postgres", got "redis"`)
      expect(threads("{ store: memory, path: t.db }")).toBe("valet.yaml:4:33: threads.path is the file of a sqlite store, not of a memory one")
      expect(threads("{ store: sqlite, urlEnv: DB }")).toBe("valet.yaml:4:35: threads.urlEnv names the URL of a postgres store, not of a sqlite one")
      expect(threads("{ store: postgres }")).toBe("valet.yaml:4:10: threads needs urlEnv with store: postgres (the environment variable holding its URL)")
      expect(threads(`{ store: postgres, urlEnv: "postgres://u:p@h/db" }`)).toMatch(/^valet\.yaml:4:37: threads\.urlEnv must be an environment variable name, got "postgres:\/\/u:p@h\/db"$/)
      expect(threads(`{ store: sqlite, path: " " }`)).toBe(`valet.yaml:4:33: threads.path must be a file path, got " "`)
      expect(threads("{ store: sqlite, file: t.db }")).toMatch(/^valet\.yaml:4:\d+: threads\.file is not a known key$/)
      expect(threads("{ store: memory, historyLimit: 0 }")).toMatch(/^valet\.yaml:4:\d+: threads\.historyLimit must be an integer 1-1000, got 0$/)
      expect(threads("{ store: memory, onBusy: queue }")).toMatch(/^valet\.yaml:4:\d+: threads\.onBusy must be "fail" or "wait", got "queue"$/)
      expect(threads("{ store: memory, workingMemory: { scope: user } }")).toMatch(/^valet\.yaml:4:\d+: threads\.workingMemory\.scope must be "thread" or "owner", got "user"$/)
      expect(threads("{ store: memory, recall: { topK: 3 } }")).toMatch(/^valet\.yaml:4:\d+: threads\.recall\.embedding is required$/)
      expect(threads("{ store: memory, recall: { embedding: { baseUrl: x, model: m } } }")).toMatch(/^valet\.yaml:4:\d+: threads\.recall\.embedding\.baseUrl /)
      expect(threads("{ store: memory, recall: { embedding: { baseUrl: http://127.0.0.1:1/v1, model: m }, minScore: 2 } }")).toMatch(/^valet\.yaml:4:\d+: threads\.recall\.minScore must be a number from -1 to 1, got 2$/)
      const good = parse(`${model}agents:\n  a: { instructions: x }\nthreads: { store: sqlite, path: data/t.sqlite3 }\n`)
      expect(Result.isSuccess(good) && good.success.config.threads).toEqual({ store: "sqlite", path: "data/t.sqlite3" })
      const none = parse(`${model}agents:\n  a: { instructions: x }\n`)
      expect(Result.isSuccess(none) && AgentConfig.threadsLayer(none.success)).toBeUndefined()
    })
    it("agents that name each other in a circle", () => {
      expect(refusal(`${model}agents:
  a: { instructions: x, architecture: supervisor, options: { workers: [b] } }
  b: { instructions: x, architecture: self-refine, options: { critic: a } }
`)).toBe("valet.yaml:4:61: agents.b.options agents name each other in a circle: a → b → a")
    })
  })

  it.effect("options the architecture refuses, an unset apiKeyEnv: errors of build, on the option's line", () =>
    Effect.gen(function*() {
      const build = (text: string) =>
        Effect.flip(Effect.flatMap(Result.match(parse(text), { onFailure: Effect.fail, onSuccess: Effect.succeed }), AgentConfig.build))
      const options = yield* build(`model: ${scripted(["x"])}\nagents:\n  a:\n    instructions: x\n    architecture: self-refine\n    options: { maxRounds: 0 }\n`)
      expect(options.message).toBe("valet.yaml:6:14: agents.a.options SelfRefine: maxRounds must be an integer >= 1, got 0")
      const key = yield* build(`model: { provider: openai-compatible, baseUrl: "http://127.0.0.1:1/v1", model: m, apiKeyEnv: VALET_TEST_UNSET_KEY }\nagents:\n  a: { instructions: x }\n`)
      expect(key.message).toBe("valet.yaml:1:94: model.apiKeyEnv names VALET_TEST_UNSET_KEY, which is not set in the environment")
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("threads: each turn's options — history, busy, a text working memory, recall on the file's /v1/embeddings server", () =>
    Effect.gen(function*() {
      const tuned = parse(`model: ${scripted(["x"])}\nagents:\n  a: { instructions: x }\nthreads:\n  store: memory\n  historyLimit: 20\n  onBusy: wait\n  workingMemory: { scope: owner, template: "Name:" }\n  recall: { embedding: { baseUrl: "http://127.0.0.1:9/v1", model: bge-small, dimensions: 384 }, topK: 3, scope: thread }\n`)
      if (!Result.isSuccess(tuned)) throw new Error(String(tuned.failure))
      const defaults = yield* AgentConfig.turnDefaults(tuned.success)
      expect(defaults).toMatchObject({ historyLimit: 20, onBusy: "wait", workingMemory: { scope: "owner" }, recall: { topK: 3, scope: "thread" } })
      expect([defaults.recall?.embedding?.model, defaults.recall?.embedding?.dimensions]).toEqual(["bge-small", 384])
      const keyed = parse(`model: ${scripted(["x"])}\nagents:\n  a: { instructions: x }\nthreads: { store: memory, recall: { embedding: { baseUrl: "http://127.0.0.1:9/v1", model: m, apiKeyEnv: VALET_TEST_UNSET_KEY } } }\n`)
      if (!Result.isSuccess(keyed)) throw new Error(String(keyed.failure))
      const unset = yield* Effect.flip(AgentConfig.turnDefaults(keyed.success))
      expect(unset.message).toMatch(/^valet\.yaml:4:\d+: threads\.recall\.embedding\.apiKeyEnv names VALET_TEST_UNSET_KEY, which is not set in the environment$/)
      const plain = parse(`model: ${scripted(["x"])}\nagents:\n  a: { instructions: x }\n`)
      if (!Result.isSuccess(plain)) throw new Error(String(plain.failure))
      expect(yield* AgentConfig.turnDefaults(plain.success)).toEqual({})
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("threads: a sqlite store is a file beside valet.yaml (its folder made) that outlives the layer; an unset urlEnv is an error on its line", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-threads-config-"))
      try {
        const loaded = parse(`model: ${scripted(["x"])}\nagents:\n  a: { instructions: x }\nthreads: { store: sqlite, path: data/t.sqlite3 }\n`)
        if (Result.isFailure(loaded)) throw loaded.failure
        const inDir = { ...loaded.success, path: join(dir, "valet.yaml") }
        const store = AgentConfig.threadsLayer(inDir)!
        yield* Threads.create({ id: "kept", owner: "ada" }).pipe(Effect.provide(store))
        expect(statSync(join(dir, "data", "t.sqlite3")).isFile()).toBe(true)
        // A new layer on the same file: the thread is there.
        expect(yield* Threads.get("kept").pipe(Effect.provide(store))).toMatchObject({ id: "kept", owner: "ada" })
        const pg = parse(`model: ${scripted(["x"])}\nagents:\n  a: { instructions: x }\nthreads: { store: postgres, urlEnv: VALET_TEST_UNSET_URL }\n`)
        if (Result.isFailure(pg)) throw pg.failure
        const unset = yield* Effect.flip(Layer.build(AgentConfig.threadsLayer(pg.success)!))
        expect(unset.message).toBe("valet.yaml:4:37: threads.urlEnv names VALET_TEST_UNSET_URL, which is not set in the environment")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)))

  it.effect("the names of valet 0.x in a file are read, and each said once per process: an architecture, a key, a budget limit", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") lines.push((Array.isArray(message) ? message : [message]).join(" "))
      })
      const text = `model: { provider: scripted, replies: [hi] }
mcp: { callTimeoutMs: 5000 }
agents:
  a:
    architecture: tree-of-thoughts
    instructions: x
    budget: { maxDurationMs: 1000 }
server: { keepFinishedMs: 60000 }
`
      for (let i = 0; i < 2; i++) {
        const loaded = yield* Result.match(AgentConfig.parse(text, "old.yaml"), { onFailure: Effect.fail, onSuccess: Effect.succeed })
        const agents = yield* AgentConfig.build(loaded).pipe(Effect.provide(Logger.layer([logger])))
        expect(agents.list[0]!.architecture).toBe("tree_of_thoughts")
      }
      expect(lines.sort()).toEqual([
        "old.yaml: agents.a.budget.maxDurationMs is deprecated, use maxDuration (valet 0.x reads both)",
        "old.yaml: mcp.callTimeoutMs is deprecated, use mcp.callTimeout (valet 0.x reads both)",
        "old.yaml: server.keepFinishedMs is deprecated, use server.keepFinished (valet 0.x reads both)",
        "old.yaml: the architecture name tree-of-thoughts is deprecated, use tree_of_thoughts (valet 0.x reads both)"
      ])
    }).pipe(Effect.scoped, Effect.provide(services)))

  it("a run's budget is the lower of the agent's caps and the caller's", () => {
    const entry = { name: "a", description: "", architecture: "react", agent: Agent.make({ name: "a", instructions: "" }) as Agent.Agent<never> }
    expect(Agents.budgetOf(entry, undefined)).toBeUndefined()
    expect(Agents.budgetOf(entry, { maxCalls: 4 })).toEqual({ maxCalls: 4 })
    const capped = { ...entry, budget: { maxCalls: 10, maxTotalTokens: 1000, warnAt: 0.5 } }
    expect(Agents.budgetOf(capped, undefined)).toEqual(capped.budget)
    expect(Agents.budgetOf(capped, { maxCalls: 20, maxTotalTokens: 500, maxDuration: "1 minute" })).toEqual({
      maxCalls: 10,
      maxTotalTokens: 500,
      maxDuration: 60_000,
      warnAt: 0.5
    })
    // The wall clock compared in milliseconds whatever each side wrote, the deprecated maxDurationMs included.
    const clocked = { ...entry, budget: { maxDuration: "30 seconds" as const } }
    expect(Agents.budgetOf(clocked, { maxDurationMs: 60_000 })).toEqual({ maxDuration: 30_000 })
    expect(Agents.budgetOf(clocked, { maxDuration: 10_000 })).toEqual({ maxDuration: 10_000 })
  })

  it("the README's valet.yaml is a valid config", () => {
    const readme = readFileSync(join(import.meta.dirname, "..", "..", "README.md"), "utf8")
    const section = readme.slice(readme.indexOf("### Agents as MCP tools"))
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!
    const parsed = parse(yaml)
    expect(Result.isSuccess(parsed) ? Object.keys(parsed.success.config.agents) : parsed.failure.message).toEqual(["assistant", "writer"])
  })

  it.effect("a model list is a fallback chain: the first server is rate-limited, the second answers", () =>
    Effect.gen(function*() {
      const primary = yield* Server.make({ model: "qwen" })
      const backup = yield* Server.make({ model: "qwen" })
      // A Retry-After past what the client waits out: RateLimited at once (no retry, no sleep).
      primary.enqueue("/v1/chat/completions", Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "120" } }))
      const loaded = yield* Result.match(parse(`
model:
  - { provider: openai-compatible, baseUrl: ${primary.url}, model: qwen }
  - { provider: openai-compatible, baseUrl: ${backup.url}, model: qwen }
agents:
  assistant: { instructions: Be brief. }
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const events = yield* Stream.runCollect(Agent.stream(agents.get("assistant")!.agent, "Hi"))
      expect(events.flatMap((event) => event._tag === "ModelFellBack" ? [`${event.from} → ${event.to}: ${event.reason}`] : [])).toEqual([
        `qwen (${primary.url}) → qwen (${backup.url}): RateLimited: slow down (the server asks to retry after 2m, more than maxRetryAfter 1m: not retried)`
      ])
      const done = events.at(-1)
      expect(done?._tag === "RunCompleted" && done.result.output).toMatch(/^Word0/)
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a chain's when and breaker: an error not in when fails the call; after failures the open circuit is skipped", () =>
    Effect.gen(function*() {
      const primary = yield* Server.make({ model: "qwen" })
      const backup = yield* Server.make({ model: "qwen" })
      const limited = () => Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "120" } })
      primary.enqueue("/v1/chat/completions", limited())
      const loaded = yield* Result.match(parse(`
models:
  main:
    fallback:
      - { provider: openai-compatible, baseUrl: ${primary.url}, model: qwen }
      - { provider: openai-compatible, baseUrl: ${backup.url}, model: qwen }
    when: [InvalidRequest]
    breaker: { failures: 1, coolDown: 1 hour }
model: main
agents:
  assistant: { instructions: Be brief. }
  other: { instructions: Be brief., model: main }
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const chatCalls = (server: typeof primary) => server.requests.filter((r) => r.path === "/v1/chat/completions").length
      // RateLimited is not in when: no fallback (the default would have moved on), the run fails with it…
      expect(yield* Effect.flip(Agent.run(agents.get("assistant")!.agent, "Hi"))).toMatchObject({ _tag: "RateLimited" })
      expect(chatCalls(backup)).toBe(0)
      // …and it opened the primary's circuit (failures: 1; the default is 5): the next call, by another agent naming
      // the same chain (one chain, one breaker), does not ask the primary at all.
      const events = yield* Stream.runCollect(Agent.stream(agents.get("other")!.agent, "Hi"))
      expect(events.flatMap((event) => event._tag === "ModelFellBack" ? [event.reason] : [])).toEqual([expect.stringContaining("circuit open")])
      const done = events.at(-1)
      expect(done?._tag === "RunCompleted" && done.result.output).toMatch(/^Word0/)
      expect([chatCalls(primary), chatCalls(backup)]).toEqual([1, 1])
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("examples/serve/valet.yaml runs as written, with no model server", () =>
    Effect.gen(function*() {
      const loaded = yield* AgentConfig.load(join(import.meta.dirname, "..", "..", "examples", "serve", "valet.yaml"))
      const agents = yield* AgentConfig.build(loaded)
      for (const entry of agents.list) {
        const result = yield* Agent.run(entry.agent, "What is the capital of France?")
        expect(result.output).toBe("Paris is the capital of France.")
      }
    }).pipe(Effect.scoped, Effect.provide(services)))
})

