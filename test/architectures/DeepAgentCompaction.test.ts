/**
 * DeepAgent in long runs (issue 30): a run long enough to fill a small context window several times compacts; the
 * plan, shown in the system message, is on every call as it stands (compaction keeps the head); a plan update after a
 * summary keeps that compaction rather than undoing it; a large tool result stays in its file, out of every request,
 * summaries' included.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { Agent, type AgentEvent, Budget, Compaction, Model, ScriptedModel, Tool } from "../../src/index.js"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Workspace from "../../src/environment/Workspace.js"

const window = 6_000
const isSummary = (request: Model.Request) => request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions
const systemText = (request: Model.Request): string => {
  const first = request.messages?.[0]
  return first?.role === "system" ? Model.textOf(first.content) : ""
}

/** A tool of the agent's own whose result (24,000 characters) is far over the window's share. */
const big = Array.from({ length: 2_000 }, (_, i) => `BIGROW-${i}`).join("\n")
const dump = Tool.make({ name: "dump", description: "Dumps the table", parameters: Schema.Struct({}), handler: () => Effect.succeed(big) })
const agent = Agent.make({
  name: "worker",
  instructions: "Work through the files.",
  tools: [dump],
  architecture: DeepAgent.makeUnsafe({ maxTurns: 80, largeResultChars: 2_000, headChars: 200 })
})

/** Five files of about 1,450 characters: each read adds some 400 tokens to the conversation. */
const files = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`f${i}.txt`, `file ${i}: ${"lorem ipsum ".repeat(120)}`]))
const steps = ["Survey", "Read", "Compare", "Report"]
const plan = (done: number) => ({
  todos: steps.map((content, i) => ({ content, status: i < done ? "done" as const : i === done ? "in_progress" as const : "pending" as const }))
})
const planTurn = (done: number): ScriptedModel.Turn => ({ toolCalls: [{ name: "write_todos", arguments: plan(done) }] })
const readTurn = (i: number): ScriptedModel.Turn => ({ toolCalls: [{ name: "read_file", arguments: { path: `f${i % 5}.txt` } }] })
const rendered = (done: number) => plan(done).todos.map((todo, i) => `${i + 1}. [${todo.status}] ${todo.content}`).join("\n")

/** The scripted model over a small window: `next` says the main run's turn; a summary request answers a summary. */
const model = (next: (requests: ReadonlyArray<Model.Request>) => ScriptedModel.Turn, requests: Array<Model.Request>) =>
  Layer.effect(Model.Model, Effect.map(Effect.service(Model.Model), (service) => ({ ...service, contextWindow: window }))).pipe(
    Layer.provide(ScriptedModel.layer((request) => {
      requests.push(request)
      return isSummary(request) ? `Summary ${requests.filter(isSummary).length}: files were read.` : next(requests)
    }))
  )

describe("DeepAgent in long runs: compaction", () => {
  it.effect("a run filling the window again and again: the plan as it stands on every call, each summary from the last, the large result in its file only", () => {
    // 48 turns: a plan update every 6th, the dump once, reads otherwise; then the answer.
    const turns: Array<ScriptedModel.Turn> = [planTurn(0)]
    const planAt: Array<number> = []
    for (let i = 0; i < 48; i++) turns.push(i % 6 === 5 ? planTurn(Math.min(4, Math.floor(i / 6) + 1)) : i === 3 ? { toolCalls: [{ name: "dump", arguments: {} }] } : readTurn(i))
    // The plan in force at each main call: the last write_todos before it.
    let done = -1
    for (const turn of turns) {
      planAt.push(done)
      const call = typeof turn === "object" && "toolCalls" in turn ? turn.toolCalls?.[0] : undefined
      if (call?.name === "write_todos") done = Math.min(4, (call.arguments as ReturnType<typeof plan>).todos.filter((todo) => todo.status === "done").length)
    }
    planAt.push(done)
    const requests: Array<Model.Request> = []
    let main = 0
    return Effect.gen(function*() {
      const events = Array.from(yield* Stream.runCollect(Agent.stream(agent, "Work through f0 to f4")))
      const completed = events.at(-1) as AgentEvent.Of<"RunCompleted">
      expect(completed._tag).toBe("RunCompleted")
      expect(completed.result.output).toBe("Done.")

      const compacted = events.filter((event): event is AgentEvent.Of<"ContextCompacted"> => event._tag === "ContextCompacted")
      expect(compacted.length).toBeGreaterThanOrEqual(4)
      expect(compacted.every((event) => event.strategy === "summary")).toBe(true)
      expect(compacted.every((event) => event.contextWindow === window && event.tokensAfter < event.tokensBefore)).toBe(true)

      const mains = requests.filter((request) => !isSummary(request))
      expect(mains).toHaveLength(turns.length + 1)
      // The plan, shown in the system message, is there on every call after the first write_todos, as it stands — after
      // each compaction too — and once.
      mains.forEach((request, i) => {
        const text = systemText(request)
        expect(text.startsWith("Work through the files.")).toBe(true)
        if (planAt[i]! < 0) expect(text).not.toContain("Your plan")
        else expect(text.endsWith(rendered(planAt[i]!))).toBe(true)
        expect((request.messages ?? []).filter((message) => message.role === "system")).toHaveLength(1)
      })
      // After a summary the calls read the task, then the summary, not the messages it replaced.
      const summaries = requests.filter(isSummary)
      expect(summaries).toHaveLength(compacted.length)
      const afterFirst = requests[requests.indexOf(summaries[0]!) + 1]!
      expect(afterFirst.messages![1]).toEqual(Model.user("Work through f0 to f4"))
      expect(Model.textOf(afterFirst.messages![2]!.content)).toMatch(/^\[Summary of \d+ earlier messages\]\nSummary 1: files were read\.$/)
      // Each summary after the first starts from the one before it: the run's compaction held across the plan's updates
      // (they rewrite the system message), so no summary reads again what an earlier one summarised.
      summaries.slice(1).forEach((summary, i) => {
        const transcript = Model.textOf(summary.messages![1]!.content)
        expect(transcript.startsWith(`user: [Summary of `)).toBe(true)
        expect(transcript).toContain(`Summary ${i + 1}: files were read.`)
      })
      // Every request sent fits the window, summaries' included; the run's own, tool definitions and all, fit its threshold.
      for (const request of requests) expect(Budget.estimateInputTokens(request)).toBeLessThanOrEqual(window)
      for (const request of mains) expect(Budget.estimateInputTokens(request)).toBeLessThanOrEqual(Compaction.defaultPolicy.threshold * window)

      // The large result: in its file, whole; the model read its path and head; no request ever carried the rest.
      const dumped = mains.flatMap((request) => (request.messages ?? []).filter((message) => message.role === "tool" && message.name === "dump"))
      expect(Model.textOf(dumped[0]!.content)).toMatch(/^The result is too large for the context \(\d+ characters\): it was written to \.valet\/tool_results\/dump_1\.txt\./)
      expect(yield* Workspace.readText(".valet/tool_results/dump_1.txt")).toBe(big)
      for (const request of requests) expect(JSON.stringify(request.messages)).not.toContain("BIGROW-500")
    }).pipe(
      Effect.provide(Workspace.layerMemory(files)),
      Effect.provide(model(() => {
        const turn = main++
        return turn < turns.length ? turns[turn]! : "Done."
      }, requests))
    )
  })

  it.effect("a plan update right after a summary keeps the compaction (it resent the whole conversation: calls over the model's window, or ContextLengthExceeded)", () => {
    const requests: Array<Model.Request> = []
    let reads = 0
    let updated = false
    let after = 0
    return Effect.gen(function*() {
      const result = yield* Agent.run(agent, "Work through f0 to f4")
      expect(result.output).toBe("Done.")
      const summaries = requests.filter(isSummary)
      expect(summaries).toHaveLength(1)
      // The call after the update: the new plan in the system message, then the task, the summary and what followed.
      const at = requests.indexOf(summaries[0]!)
      const afterUpdate = requests[at + 2]!
      expect(systemText(afterUpdate).endsWith(rendered(2))).toBe(true)
      expect(afterUpdate.messages![1]).toEqual(Model.user("Work through f0 to f4"))
      expect(Model.textOf(afterUpdate.messages![2]!.content)).toMatch(/^\[Summary of \d+ earlier messages\]\nSummary 1: files were read\.$/)
      for (const request of requests) expect(Budget.estimateInputTokens(request)).toBeLessThanOrEqual(window)
    }).pipe(
      Effect.provide(Workspace.layerMemory(files)),
      Effect.provide(model((sent) => {
        if (sent.length === 1) return planTurn(1)
        // The first call after the summary updates the plan; then a few reads, and the answer.
        if (!updated && sent.length >= 2 && isSummary(sent.at(-2)!)) {
          updated = true
          return planTurn(2)
        }
        if (updated) return after++ < 2 ? readTurn(after) : "Done."
        return readTurn(reads++)
      }, requests))
    )
  })

  it.effect("on a small window the tool definitions (DeepAgent's: about 1,000 tokens) count: no request sent over the window", () => {
    const small = 4_000
    const requests: Array<Model.Request> = []
    let turn = 0
    // Files of 2,900 characters: over maxToolResultChars, so cutting old results is what compaction does first.
    const long = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`f${i}.txt`, `file ${i}: ${"lorem ipsum ".repeat(240)}`]))
    return Effect.gen(function*() {
      const events = Array.from(yield* Stream.runCollect(Agent.stream(agent, "Work through f0 to f4")))
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Done." } })
      expect(events.some((event) => event._tag === "ContextCompacted")).toBe(true)
      const tools = Budget.estimateInputTokens({ tools: requests[0]!.tools })
      expect(tools).toBeGreaterThan(800)
      for (const request of requests) expect(Budget.estimateInputTokens(request)).toBeLessThanOrEqual(small)
    }).pipe(
      Effect.provide(Workspace.layerMemory(long)),
      Effect.provide(
        Layer.effect(Model.Model, Effect.map(Effect.service(Model.Model), (service) => ({ ...service, contextWindow: small }))).pipe(
          Layer.provide(ScriptedModel.layer((request) => {
            requests.push(request)
            if (isSummary(request)) return "Summary: files were read."
            return turn++ < 12 ? readTurn(turn) : "Done."
          }))
        )
      )
    )
  })
})
