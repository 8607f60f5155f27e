import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Schema, Option } from "effect"
import { Agent, AgentError, Model, ReAct, ScriptedModel, Tool } from "../../src/index.js"
import { adjustWhenSleeping } from "../support/clock.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const toolMessages = (request: Model.Request) =>
  (request.messages ?? []).filter((message): message is Model.ToolMessage => message.role === "tool")

/**
 * Runs a ReAct agent with one tool whose model calls it with each of `args` in turn (then answers "done"), and
 * answers the run's result with the tool results the model was sent.
 */
const runCalling = (tool: Tool.Tool, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const agent = Agent.make({ name: "calling", instructions: "", tools: [tool] })
    const result = yield* Agent.run(agent, "go")
    const calls = yield* ScriptedModel.calls
    const toolResults = (calls.at(-1)?.messages ?? []).filter((message) => message.role === "tool").map((message) => message.content)
    return { ...result, toolResults }
  }).pipe(Effect.provide(ScriptedModel.layer([...args.map((text) => ({ toolCalls: [{ name: tool.name, arguments: text }] })), "done"])))

describe("ReAct", () => {
  it.effect("a tool call then text: two model calls, and the tool's result reaches the second request", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "You add numbers.", tools: [add] })
      const result = yield* Agent.run(agent, "What is 2 + 3?")
      expect(result.output).toBe("2 + 3 = 5")
      expect(result.modelCalls).toBe(2)
      expect(result.interrupted).toBe(false)
      const calls = yield* ScriptedModel.calls
      expect(calls).toHaveLength(2)
      expect(calls[0]!.tools?.map((tool) => tool.name)).toEqual(["add"])
      expect(calls[0]!.messages).toEqual([Model.system("You add numbers."), Model.user("What is 2 + 3?")])
      const results = toolMessages(calls[1]!)
      expect(results).toEqual([{ role: "tool", toolCallId: "c1", name: "add", content: "5" }])
      // The assistant's tool-call turn precedes the result, as the protocol requires.
      expect(calls[1]!.messages![2]).toMatchObject({ role: "assistant", toolCalls: [{ id: "c1", name: "add" }] })
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(
        ScriptedModel.layer([{ toolCalls: [{ id: "c1", name: "add", arguments: { a: 2, b: 3 } }] }, "2 + 3 = 5"])
      )
    ))

  it.effect("two tool calls of one turn run concurrently, and their results come back in call order", () =>
    Effect.gen(function*() {
      // A two-party barrier: each handler waits until both have started. Run one after the other, the first would
      // wait forever (the test would time out).
      const arrived = yield* Ref.make(0)
      const bothStarted = yield* Deferred.make<void>()
      const finishOrder: Array<string> = []
      const barrier = Tool.make({
        name: "barrier",
        description: "Waits for the other call",
        parameters: Schema.Struct({ label: Schema.String, extraYields: Schema.Number }),
        handler: ({ extraYields, label }) =>
          Effect.gen(function*() {
            const n = yield* Ref.updateAndGet(arrived, (k) => k + 1)
            if (n === 2) yield* Deferred.succeed(bothStarted, undefined)
            yield* Deferred.await(bothStarted)
            // The first call finishes last: results must still be in call order.
            for (let i = 0; i < extraYields; i++) yield* Effect.yieldNow
            finishOrder.push(label)
            return `done ${label}`
          })
      })
      const agent = Agent.make({ name: "par", instructions: "", tools: [barrier] })
      const result = yield* Agent.run(agent, "go")
      expect(result.output).toBe("both done")
      expect(finishOrder).toEqual(["second", "first"])
      const calls = yield* ScriptedModel.calls
      expect(toolMessages(calls[1]!).map((message) => message.content)).toEqual(["done first", "done second"])
      expect(toolMessages(calls[1]!).map((message) => message.toolCallId)).toEqual(["a", "b"])
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { id: "a", name: "barrier", arguments: { label: "first", extraYields: 20 } },
            { id: "b", name: "barrier", arguments: { label: "second", extraYields: 0 } }
          ]
        },
        "both done"
      ]))
    ))

  it.effect("concurrency: 1 runs a turn's tool calls one at a time; toolConcurrency, its deprecated name, does the same", () =>
    Effect.gen(function*() {
      for (const options of [{ concurrency: 1 }, { toolConcurrency: 1 }] as const) {
        let running = 0
        let most = 0
        const slow = Tool.make({
          name: "slow",
          description: "Takes a few turns",
          parameters: Schema.Struct({ i: Schema.Number }),
          handler: () =>
            Effect.gen(function*() {
              most = Math.max(most, ++running)
              for (let i = 0; i < 5; i++) yield* Effect.yieldNow
              running--
              return "ok"
            })
        })
        const architecture = yield* ReAct.make(options)
        const agent = Agent.make({ name: "seq", instructions: "", tools: [slow], architecture })
        const script = ScriptedModel.layer([
          { toolCalls: [1, 2, 3].map((i) => ({ id: `c${i}`, name: "slow", arguments: { i } })) },
          "done"
        ])
        expect((yield* Agent.run(agent, "go").pipe(Effect.provide(script))).output).toBe("done")
        expect({ options, most }).toEqual({ options, most: 1 })
      }
    }))

  it.effect("an unknown tool, a bad argument and a failing handler each give an ERROR: result and the loop goes on", () =>
    Effect.gen(function*() {
      const fails = Tool.make({
        name: "explode",
        description: "Always fails",
        parameters: Schema.Struct({}),
        handler: () => Effect.fail(new Error("kaboom"))
      })
      const agent = Agent.make({ name: "errs", instructions: "", tools: [add, fails] })
      const result = yield* Agent.run(agent, "go")
      expect(result.output).toBe("recovered")
      expect(result.modelCalls).toBe(4)
      const calls = yield* ScriptedModel.calls
      const [unknown] = toolMessages(calls[1]!).slice(-1)
      expect(unknown!.content).toBe('ERROR: unknown tool "subtract"; available tools: add, explode')
      const [bad] = toolMessages(calls[2]!).slice(-1)
      expect(bad!.content).toMatch(/^ERROR: invalid arguments for tool "add": /)
      expect(bad!.content).toContain('b must be a number, got "two"')
      const [failed] = toolMessages(calls[3]!).slice(-1)
      expect(failed!.content).toBe('ERROR: tool "explode" failed: kaboom')
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "subtract", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: "two" } }] },
        { toolCalls: [{ name: "explode", arguments: {} }] },
        "recovered"
      ]))
    ))

  it.effect("a slow handler times out (TestClock) with an ERROR: result and the loop goes on", () =>
    Effect.gen(function*() {
      let finalized = false
      const slow = Tool.make({
        name: "slow",
        description: "Takes a minute",
        parameters: Schema.Struct({}),
        timeout: "5 seconds",
        handler: () => Effect.sleep("1 minute").pipe(Effect.as("late"), Effect.onInterrupt(() => Effect.sync(() => {
          finalized = true
        })))
      })
      const agent = Agent.make({ name: "slowpoke", instructions: "", tools: [slow] })
      const fiber = yield* Effect.forkChild(Agent.run(agent, "go"))
      yield* adjustWhenSleeping("6 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.output).toBe("gave up waiting")
      expect(finalized).toBe(true)
      const calls = yield* ScriptedModel.calls
      expect(toolMessages(calls[1]!)[0]!.content).toBe('ERROR: tool "slow" timed out after 5s')
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "slow" }] }, "gave up waiting"]))))

  it.effect("maxTurns reached: interrupted max_turns_exceeded, output the last text", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "loop", instructions: "", tools: [add], maxTurns: 3 })
      const result = yield* Agent.run(agent, "go")
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("max_turns_exceeded")
      expect(result.output).toBe("still thinking")
      expect(result.modelCalls).toBe(3)
      expect(result.metadata).toEqual({ turns: 3 })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { text: "thinking", toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] },
        { text: "still thinking", toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 3 } }] }
      ]))
    ))

  it.effect("the same tool with the same arguments three times in a row stops the run: repeated_tool_call", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "stuck", instructions: "", tools: [add] })
      const result = yield* Agent.run(agent, "go")
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("repeated_tool_call")
      expect(result.modelCalls).toBe(3)
      expect(result.metadata).toMatchObject({ repeatedTool: "add" })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        // Key order and spacing do not make it a different call.
        { toolCalls: [{ name: "add", arguments: '{"b": 2, "a": 1}' }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] }
      ]))
    ))

  it.effect("repeated calls: empty arguments are {}; text that is not JSON is the same call only as the same text once trimmed", () =>
    Effect.gen(function*() {
      expect((yield* runCalling(add, ["", " {} ", ""])).interruptionReason).toBe("repeated_tool_call")
      expect((yield* runCalling(add, ["a=1", " a=1", "a=1 "])).interruptionReason).toBe("repeated_tool_call")
      expect(yield* runCalling(add, ["a=1", " a=1", "a = 1", "a=1"])).toMatchObject({ interrupted: false, output: "done" })
    }))

  it.effect("a call's result does not depend on the call before it: arguments padded with non-JSON whitespace are refused either way", () =>
    Effect.gen(function*() {
      const padded = '{"a":1,"b":2}\u00a0'
      // The first call is alone; the third follows a call with other arguments, which the repeat check parsed to compare.
      const result = yield* runCalling(add, [padded, '{"a":5,"b":5}', padded])
      expect(result.toolResults).toHaveLength(3)
      expect(result.toolResults[1]).toBe("10")
      expect(result.toolResults[0]).toContain("not valid JSON")
      expect(result.toolResults[2]).toBe(result.toolResults[0])
    }))

  it.effect("a handler that changes the object it was given does not change what the repeat check compares", () =>
    Effect.gen(function*() {
      const mutating = Tool.make({
        name: "add",
        description: "",
        parameters: Schema.Struct({ x: Schema.Unknown }),
        handler: ({ x }) =>
          Effect.sync(() => {
            if (x !== null && typeof x === "object") delete (x as Record<string, unknown>)["k"]
            return "ok"
          })
      })
      const result = yield* runCalling(mutating, ['{"x":{"k":1}}', '{ "x": { "k": 1 } }', '{"x":{"k": 1}}'])
      expect(result.interruptionReason).toBe("repeated_tool_call")
    }))

  it.effect("different arguments in between reset the repetition count", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "progressing", instructions: "", tools: [add] })
      const result = yield* Agent.run(agent, "go")
      expect(result.interrupted).toBe(false)
      expect(result.output).toBe("done")
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 5, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        "done"
      ]))
    ))

  it.effect("ReAct.make validates its options and passes sampling options on every call", () =>
    Effect.gen(function*() {
      const invalid = yield* Effect.flip(ReAct.make({ maxTurns: 0 }))
      expect(invalid).toBeInstanceOf(AgentError.InvalidOptions)
      expect(invalid.message).toContain("maxTurns")
      const architecture = yield* ReAct.make({ maxTurns: 2, request: { temperature: 0.2, seed: 7, stop: ["END"] } })
      const agent = Agent.make({ name: "configured", instructions: "", architecture, tools: [add] })
      const result = yield* Agent.run(agent, "go")
      expect(result.interruptionReason).toBe("max_turns_exceeded")
      const calls = yield* ScriptedModel.calls
      expect(calls.map((call) => [call.temperature, call.seed, call.stop])).toEqual([[0.2, 7, ["END"]], [0.2, 7, ["END"]]])
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 2, b: 2 } }] }
      ]))
    ))

  it.effect("an invalid tool name fails the run with InvalidAgent before any model call", () =>
    Effect.gen(function*() {
      const bad = Tool.make({ name: "has space", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const agent = Agent.make({ name: "bad-tools", instructions: "", tools: [bad] })
      const exit = yield* Effect.exit(Agent.run(agent, "go"))
      expect(Exit.findErrorOption(exit).pipe(Option.map((error) => error._tag), Option.getOrUndefined)).toBe("InvalidAgent")
      expect(yield* ScriptedModel.calls).toHaveLength(0)
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("history goes between the instructions and the prompt", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "chat", instructions: "Be brief." })
      yield* Agent.run(agent, "And now?", { history: [Model.user("Hi"), Model.assistant("Hello!")] })
      const [call] = yield* ScriptedModel.calls
      expect(call!.messages!.map((message) => message.content)).toEqual(["Be brief.", "Hi", "Hello!", "And now?"])
    }).pipe(Effect.provide(ScriptedModel.layer(["Now this."]))))
})
