/**
 * `valet run` and the tool calls that wait for a person (a valet.yaml agent's `approvals:`): the terminal prompt's
 * logic on a fake terminal; then real `valet` processes on the loopback model server — `--approve all`, `--approve
 * none`, neither without a terminal, and a pseudo-terminal (util-linux `script`) answering the prompt.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Terminal } from "effect"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { ask, deciderOf, noAnswerReason, type Prompter, withDecider } from "../../../src/cli/internal/approvals.js"
import * as Agent from "../../../src/core/Agent.js"
import * as HumanLoop from "../../../src/core/HumanLoop.js"
import * as ScriptedModel from "../../../src/core/ScriptedModel.js"
import * as Server from "../../support/openAiServer.js"

/** A terminal that answers `lines` in order, then ends (Ctrl+D); what was written to it is kept. */
const fakeTerminal = (lines: ReadonlyArray<string>): Prompter & { written: string } => {
  const left = [...lines]
  const prompter = {
    written: "",
    write: (text: string) => Effect.sync(() => void (prompter.written += text)),
    readLine: Effect.suspend(() => {
      const line = left.shift()
      return line === undefined ? Effect.fail(new Terminal.QuitError({})) : Effect.succeed(line)
    })
  }
  return prompter
}

const request: HumanLoop.ApprovalRequest = {
  sessionId: "sess_1",
  toolCallId: "c1",
  name: "refund",
  arguments: `{ "order": "7", "amount": 250 }`,
  requestedAt: 0
}

describe("valet run: the terminal prompt", () => {
  it.effect("shows the tool and its arguments; y approves; n asks a reason; other answers ask again; input that ends rejects", () =>
    Effect.gen(function*() {
      const yes = fakeTerminal(["y"])
      expect(yield* ask(request, yes)).toEqual({ approved: true })
      expect(yes.written).toBe(`The tool refund wants to run with {"order":"7","amount":250}\nApprove? [y/n] `)
      const no = fakeTerminal(["maybe", " NO ", "too much"])
      expect(yield* ask(request, no)).toEqual({ approved: false, reason: "too much" })
      expect(no.written.split("\n").slice(1)).toEqual(["Approve? [y/n] Please answer y or n.", "Approve? [y/n] Reason (optional): "])
      expect(yield* ask(request, fakeTerminal(["n", ""]))).toEqual({ approved: false, reason: "rejected on the terminal" })
      expect(yield* ask(request, fakeTerminal([]))).toEqual({ approved: false, reason: "no answer on the terminal (its input ended)" })
    }))

  it("--approve wins over the terminal; without it, the terminal when stdin is one, else nobody", () => {
    const prompter = fakeTerminal([])
    const note = () => Effect.void
    expect(deciderOf("all", true, prompter, note)._tag).toBe("All")
    expect(deciderOf("none", false, prompter, note)._tag).toBe("None")
    expect(deciderOf(undefined, true, prompter, note)._tag).toBe("Ask")
    expect(deciderOf(undefined, false, prompter, note)._tag).toBe("Nobody")
  })
})

describe("valet run --agents with approvals (real processes)", () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
  const node = join(root, "node_modules", ".bin", "node")
  const tsx = join(root, "node_modules", "tsx", "dist", "cli.mjs")
  const bin = join(root, "src", "cli", "bin.ts")
  const everything = join(
    dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
    "dist",
    "index.js"
  )
  type Outcome = { readonly code: number; readonly stdout: string; readonly stderr: string }
  const settle = (resolve: (outcome: Outcome) => void) => (error: { readonly code?: unknown } | null, stdout: string, stderr: string) =>
    resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
  /** `valet args` in a process of its own, stdin a pipe (not a terminal). */
  const valet = (args: ReadonlyArray<string>) =>
    Effect.promise(() =>
      new Promise<Outcome>((resolve) => void execFile(node, [tsx, bin, ...args], { cwd: root, encoding: "utf8", timeout: 60_000 }, settle(resolve)))
    )
  /** `valet args` on a pseudo-terminal (`script`), `typed` written to it. */
  const valetOnTerminal = (args: ReadonlyArray<string>, typed: string) =>
    Effect.promise(() =>
      new Promise<Outcome>((resolve) => {
        const command = [node, tsx, bin, ...args].map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(" ")
        const child = execFile("script", ["-qfec", command, "/dev/null"], { cwd: root, encoding: "utf8", timeout: 60_000 }, settle(resolve))
        // Typed ahead: the terminal keeps the lines until the prompt reads them.
        child.stdin!.end(typed)
      })
    )

  const withFile = Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-run-approvals-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

  /** The tool result the model read in its second call. */
  const toolResultOf = (server: Server.LoopbackServer) => {
    const calls = server.requests.filter((r) => r.path === "/v1/chat/completions")
    expect(calls).toHaveLength(2)
    return calls[1]!.body.messages.find((message: { role: string }) => message.role === "tool")?.content
  }

  it.live("--approve all runs the tool; --approve none and no terminal reject it with their reasons; a terminal asks", () =>
    Effect.gen(function*() {
      const dir = yield* withFile
      const server = yield* Server.make()
      const path = join(dir, "valet.yaml")
      writeFileSync(path, `model: { provider: openai-compatible, baseUrl: "${server.url}/v1", model: m }
mcpServers:
  everything: { command: ${JSON.stringify(node)}, args: [${JSON.stringify(everything)}, stdio] }
agents:
  adder:
    instructions: Add.
    tools: [everything]
    approvals:
      get-sum: { when: { argument: a, above: 1 } }
`)
      const sumCall = () =>
        server.enqueue("/v1/chat/completions", Server.json({
          choices: [{
            message: { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get-sum", arguments: `{"a":2,"b":3}` } }] },
            finish_reason: "tool_calls"
          }],
          usage: { prompt_tokens: 3, completion_tokens: 2 }
        }))
      const answer = "Word0 word1 word2 word3 word4 word5 word6 word7"
      const args = ["run", "--agents", path, "2+3?"]

      sumCall()
      const all = yield* valet([...args, "--approve", "all"])
      expect([all.code, all.stdout, all.stderr]).toEqual([0, `${answer}\n`, ""])
      expect(toolResultOf(server)).toBe("The sum of 2 and 3 is 5.")

      server.requests.length = 0
      sumCall()
      const none = yield* valet([...args, "--approve", "none"])
      expect([none.code, none.stderr]).toEqual([0, ""])
      expect(toolResultOf(server)).toBe("ERROR: rejected: rejected by --approve none")

      server.requests.length = 0
      sumCall()
      const nobody = yield* valet(args)
      expect([nobody.code, nobody.stderr]).toEqual([0, "valet run: rejected a call of get-sum: stdin is not a terminal; pass --approve all or --approve none\n"])
      expect(toolResultOf(server)).toBe(
        "ERROR: rejected: nobody could approve it: valet run had no terminal to ask on; pass --approve all or --approve none"
      )

      const bad = yield* valet([...args, "--approve", "some"])
      expect(bad.code).toBe(2)
      expect(bad.stderr.trim().split("\n")).toHaveLength(1)

      if (!existsSync("/usr/bin/script")) return
      server.requests.length = 0
      sumCall()
      const rejected = yield* valetOnTerminal(args, "n\nnot today\n")
      expect(rejected.code).toBe(0)
      expect(rejected.stdout).toContain(`The tool get-sum wants to run with {"a":2,"b":3}\r\nApprove? [y/n] `)
      expect(toolResultOf(server)).toBe("ERROR: rejected: not today")

      server.requests.length = 0
      sumCall()
      const approved = yield* valetOnTerminal(args, "yes\n")
      expect(approved.code).toBe(0)
      expect(approved.stdout).toContain(answer)
      expect(toolResultOf(server)).toBe("The sum of 2 and 3 is 5.")
    }).pipe(Effect.scoped), 120_000)
})

describe("valet run: questions (the ask_human tool) on the terminal, or dismissed", () => {
  const booker = Agent.make({ name: "booker", instructions: "", tools: [HumanLoop.askTool()] })
  const script = [{ toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "How many?" } }] }, "Booked."]
  const toolResult = Effect.map(ScriptedModel.calls, (calls) => calls[1]?.messages?.at(-1)?.content)

  it.effect("on a terminal: the question is shown and the typed line is the answer the model reads", () =>
    Effect.gen(function*() {
      const terminal = fakeTerminal(["Four."])
      yield* withDecider({ _tag: "Ask", prompter: terminal }, Agent.run(booker, "Book."))
      expect(terminal.written).toBe("Question: How many?\nAnswer: ")
      expect(yield* toolResult).toBe("Four.")
    }).pipe(Effect.provide(ScriptedModel.layer(script))))

  it.effect("without a terminal (or with --approve): dismissed, the model reads why, and stderr says so once", () =>
    Effect.gen(function*() {
      const notes: Array<string> = []
      yield* withDecider({ _tag: "Nobody", note: (text) => Effect.sync(() => void notes.push(text)) }, Agent.run(booker, "Book."))
      expect(yield* toolResult).toBe(`ERROR: tool "ask_human" failed: no answer: ${noAnswerReason}`)
      expect(notes).toEqual(["valet run: a question went unanswered: stdin is not a terminal"])
    }).pipe(Effect.provide(ScriptedModel.layer(script))))
})
