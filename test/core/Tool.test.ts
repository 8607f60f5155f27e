import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schema } from "effect"
import * as Tool from "../../src/core/Tool.js"
import { adjustWhenSleeping } from "../support/clock.js"

const search = Tool.make({
  name: "search",
  description: "Searches the docs",
  parameters: Schema.Struct({
    query: Schema.String.annotate({ description: "what to look for" }),
    limit: Schema.optional(Schema.Int),
    exact: Schema.optional(Schema.Boolean),
    tags: Schema.optional(Schema.Array(Schema.String))
  }),
  handler: (params) => Effect.succeed(params)
})

const kit = Tool.toolkit([search])
const call = (args: string, name = "search") => Tool.execute(kit, { id: "c", name, arguments: args })

describe("Tool", () => {
  it("derives the JSON schema the model sees from the parameter schema", () => {
    expect(search.definition).toEqual({
      name: "search",
      description: "Searches the docs",
      parameters: {
        type: "object",
        required: ["query"],
        properties: {
          query: { type: "string", description: "what to look for" },
          limit: { type: "integer" },
          exact: { type: "boolean" },
          tags: { type: "array", items: { type: "string" } }
        },
        additionalProperties: false
      }
    })
  })

  it.effect("decodes arguments; results that are not strings are sent as JSON", () =>
    Effect.gen(function*() {
      const result = yield* call('{"query":"effect","limit":3}')
      expect(result).toEqual({ toolCallId: "c", name: "search", content: '{"query":"effect","limit":3}', isError: false })
    }))

  it.effect("coerces what models commonly get wrong: numeric strings, boolean strings, JSON in a string", () =>
    Effect.gen(function*() {
      const result = yield* call('{"query":"x","limit":"3","exact":"true","tags":"[\\"a\\"]"}')
      expect(JSON.parse(result.content)).toEqual({ query: "x", limit: 3, exact: true, tags: ["a"] })
      expect(result.isError).toBe(false)
    }))

  it.effect("an empty argument string means no arguments", () =>
    Effect.gen(function*() {
      const noArgs = Tool.make({ name: "now", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("noon") })
      const result = yield* Tool.execute(Tool.toolkit([noArgs]), { id: "c", name: "now", arguments: "" })
      expect(result.content).toBe("noon")
    }))

  it.effect("invalid JSON, undecodable arguments and an unknown tool are ERROR: results naming the problem", () =>
    Effect.gen(function*() {
      const notJson = yield* call("{query: x}")
      expect(notJson.isError).toBe(true)
      expect(notJson.content).toMatch(/^ERROR: the arguments of tool "search" are not valid JSON \(.+\): \{query: x\}$/)
      const wrongType = yield* call('{"query": 42}')
      expect(wrongType.content).toMatch(/^ERROR: invalid arguments for tool "search": /)
      expect(wrongType.content).toContain("query must be a string, got 42")
      const missing = yield* call("{}")
      expect(missing.content).toContain("query is required")
      const unknown = yield* call("{}", "browse")
      expect(unknown.content).toBe('ERROR: unknown tool "browse"; available tools: search')
    }))

  it.effect("arguments nested 10,000 deep are an ERROR: result, not a stack overflow (issue 12)", () =>
    Effect.gen(function*() {
      const deep = yield* call(`{"query": ${"[".repeat(10_000)}${"]".repeat(10_000)}}`)
      expect(deep.isError).toBe(true)
      expect(deep.content).toMatch(/^ERROR: the arguments of tool "search" nest deeper than 100 levels: /)
      // Deep but within the limit: decoded as usual (here: the wrong type).
      const nested = yield* call(`{"query": ${"[".repeat(50)}${"]".repeat(50)}}`)
      expect(nested.content).toMatch(/^ERROR: invalid arguments for tool "search": /)
    }))

  it.effect("handler failures and defects are ERROR: results", () =>
    Effect.gen(function*() {
      class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}
      const failing = Tool.make({
        name: "fetch_doc",
        description: "",
        parameters: Schema.Struct({ id: Schema.String }),
        handler: ({ id }) => Effect.fail(new NotFound({ message: `no document ${id}` }))
      })
      const crashing = Tool.make({
        name: "crash",
        description: "",
        parameters: Schema.Struct({}),
        handler: () => Effect.die(new Error("bug"))
      })
      const tools = Tool.toolkit([failing, crashing])
      const failed = yield* Tool.execute(tools, { id: "1", name: "fetch_doc", arguments: '{"id":"a7"}' })
      expect(failed).toMatchObject({ content: 'ERROR: tool "fetch_doc" failed: NotFound: no document a7', isError: true })
      const crashed = yield* Tool.execute(tools, { id: "2", name: "crash", arguments: "{}" })
      expect(crashed.content).toBe('ERROR: tool "crash" failed: defect: bug')
    }))

  it.effect("a handler that answers at once (an Exit) and one that runs give the same results; a throwing format is an ERROR: result", () =>
    Effect.gen(function*() {
      const results = []
      for (const defer of [false, true]) {
        const answer = <A, E>(effect: Effect.Effect<A, E>) => (defer ? Effect.suspend(() => effect) : effect)
        const tools = Tool.toolkit([
          Tool.make({ name: "ok", description: "", parameters: Schema.Struct({ n: Schema.Number }), handler: ({ n }) => answer(Effect.succeed({ n })) }),
          Tool.make({ name: "no", description: "", parameters: Schema.Struct({}), handler: () => answer(Effect.fail("refused")) }),
          Tool.make({
            name: "badformat",
            description: "",
            parameters: Schema.Struct({}),
            handler: () => answer(Effect.succeed(1)),
            format: () => {
              throw new Error("cannot format")
            }
          })
        ])
        results.push(
          yield* Effect.forEach(["ok", "no", "badformat"], (name) => Tool.execute(tools, { id: name, name, arguments: name === "ok" ? '{"n":2}' : "{}" }))
        )
      }
      expect(results[0]).toEqual(results[1])
      expect(results[0]!.map((r) => r.content)).toEqual([
        '{"n":2}',
        'ERROR: tool "no" failed: refused',
        'ERROR: tool "badformat" failed: defect: cannot format'
      ])
    }))

  it.effect("a slow handler times out (TestClock)", () =>
    Effect.gen(function*() {
      const slow = Tool.make({
        name: "slow",
        description: "",
        parameters: Schema.Struct({}),
        timeout: "2 seconds",
        handler: () => Effect.sleep("1 hour")
      })
      const fiber = yield* Effect.forkChild(Tool.execute(Tool.toolkit([slow]), { id: "1", name: "slow", arguments: "{}" }))
      yield* adjustWhenSleeping("3 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ content: 'ERROR: tool "slow" timed out after 2s', isError: true })
    }))

  it.effect("long results are cut with a note of how much was cut", () =>
    Effect.gen(function*() {
      const long = Tool.make({ name: "long", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("x".repeat(120)) })
      const result = yield* Tool.execute(Tool.toolkit([long]), { id: "1", name: "long", arguments: "{}" }, { maxResultChars: 100 })
      expect(result.content).toBe(`${"x".repeat(100)}\n[truncated: 20 more characters]`)
    }))

  it.effect("parsedArguments: a tool made by make decodes the value given instead of parsing the text again; a wrapper that replaced call is still called", () =>
    Effect.gen(function*() {
      const text = '{"query":"from text"}'
      const given = yield* Tool.execute(kit, { id: "c", name: "search", arguments: text }, { parsedArguments: { query: "given" } })
      // The value given is decoded (the contract: it is what JSON.parse makes of the text; a different one shows it is used).
      expect(given.content).toBe('{"query":"given"}')
      const invalid = yield* Tool.execute(kit, { id: "c", name: "search", arguments: text }, { parsedArguments: { limit: 1 } })
      expect(invalid.isError).toBe(true)
      expect(invalid.content).toContain('invalid arguments for tool "search"')
      const seen: Array<string> = []
      const wrapped: Tool.Tool = { ...search, call: (argumentsText) => (seen.push(argumentsText), search.call(argumentsText)) }
      const result = yield* Tool.execute(Tool.toolkit([wrapped]), { id: "c", name: "search", arguments: text }, { parsedArguments: { query: "given" } })
      expect(seen).toEqual([text])
      expect(result.content).toBe('{"query":"from text"}')
    }))

  it("tool names are checked against what servers accept", () => {
    expect(Tool.isValidName("get_weather-2")).toBe(true)
    expect(Tool.isValidName("get weather")).toBe(false)
    expect(Tool.isValidName("")).toBe(false)
    expect(Tool.isValidName("x".repeat(65))).toBe(false)
  })
})

describe("Tool JSON schema", () => {
  interface Node {
    readonly label: string
    readonly children: ReadonlyArray<Node>
  }
  const Node: Schema.Codec<Node> = Schema.Struct({
    label: Schema.String,
    children: Schema.Array(Schema.suspend((): Schema.Codec<Node> => Node))
  }).annotate({ identifier: "Node" })

  it("keeps $defs only for recursive schemas", () => {
    const tree = Tool.make({
      name: "tree",
      description: "",
      parameters: Schema.Struct({ root: Node, depth: Schema.Int }),
      handler: () => Effect.void
    })
    const parameters = tree.definition.parameters as { properties: Record<string, unknown>; $defs?: Record<string, unknown> }
    expect(parameters.properties.depth).toEqual({ type: "integer" })
    // The first level is inlined; the recursion inside it points at the one definition kept.
    expect(parameters.properties.root).toMatchObject({
      type: "object",
      properties: { children: { type: "array", items: { $ref: "#/$defs/Node" } } }
    })
    expect(Object.keys(parameters.$defs ?? {})).toEqual(["Node"])
  })
})
