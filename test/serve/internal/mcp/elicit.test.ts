/**
 * The forms valet sends an MCP client for a question: the question's own fields when its schema is an object of
 * primitives, one `answer` field for a primitive, and one `answer` field of JSON text for anything a form cannot hold.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Result, Schema } from "effect"
import type { McpSchema } from "effect/ai"
import { TestClock } from "effect/testing"
import type * as HumanLoop from "../../../../src/core/HumanLoop.js"
import { parametersSchema } from "../../../../src/core/internal/jsonSchema.js"
import * as Elicit from "../../../../src/serve/internal/mcp/elicit.js"

const question = (schema: Schema.Top): HumanLoop.QuestionRequest => ({
  sessionId: "s",
  questionId: "q1",
  question: "Which?",
  schema: parametersSchema(schema),
  requestedAt: 0
})

/** The requested schema of the form for `schema`, and what `content` answers. */
const formFor = (schema: Schema.Top, content: Record<string, unknown>) => {
  const shaped = Elicit.questionForm(question(schema))
  if (Result.isFailure(shaped.form)) throw new Error(shaped.form.failure)
  return { requested: shaped.form.success.requestedSchema, answer: shaped.answerOf(content) }
}

describe("elicit: question forms", () => {
  it.each([
    {
      what: "a string: one answer field",
      schema: Schema.String,
      content: { answer: "Lisbon" },
      requested: { type: "object", properties: { answer: { type: "string", title: "Answer" } }, required: ["answer"] },
      answer: "Lisbon"
    },
    {
      what: "a choice among strings: an enum field",
      schema: Schema.Literals(["fast", "careful"]),
      content: { answer: "fast" },
      requested: { properties: { answer: { type: "string", enum: ["fast", "careful"] } }, required: ["answer"] },
      answer: "fast"
    },
    {
      what: "an object of primitives: its own fields, its required ones required, the bounds kept",
      schema: Schema.Struct({ city: Schema.String, nights: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 9 })), pets: Schema.optional(Schema.Boolean) }),
      content: { city: "Lisbon", nights: 3 },
      requested: {
        properties: { city: { type: "string" }, nights: { type: "integer", minimum: 1, maximum: 9 }, pets: { type: "boolean" } },
        required: ["city", "nights"]
      },
      answer: { city: "Lisbon", nights: 3 }
    },
    {
      what: "an object holding an array: one JSON field, parsed",
      schema: Schema.Struct({ cities: Schema.Array(Schema.String) }),
      content: { answer: `{"cities":["Lisbon","Porto"]}` },
      requested: { properties: { answer: { type: "string", title: "Answer (JSON)" } }, required: ["answer"] },
      answer: { cities: ["Lisbon", "Porto"] }
    },
    {
      what: "a string or null: one JSON field",
      schema: Schema.NullOr(Schema.String),
      content: { answer: "null" },
      requested: { properties: { answer: { type: "string", title: "Answer (JSON)" } } },
      answer: null
    }
  ])("$what", ({ schema, content, requested, answer }) => {
    const form = formFor(schema, content)
    expect(form.requested).toMatchObject(requested)
    expect(form.answer).toEqual(Result.succeed(answer))
  })

  it("a JSON field answered with text that is not JSON, or without the field: why, for the client to read", () => {
    const schema = Schema.Struct({ cities: Schema.Array(Schema.String) })
    expect(Result.isFailure(formFor(schema, { answer: "[Lisbon" }).answer)).toBe(true)
    expect(formFor(schema, { answer: "[Lisbon" }).answer).toMatchObject({ failure: expect.stringMatching(/^answer must be JSON: /) })
    expect(formFor(schema, {}).answer).toEqual(Result.fail("answer is required"))
  })
})

describe("elicit: the loop over an app's HumanLoop (review28b)", () => {
  it.effect("a question with a timeout on a loop with its own clock (askWithin) is still asked of the MCP client, whose answer wins", () =>
    Effect.gen(function*() {
      const answered = (answer: unknown) => Result.succeed(answer)
      // An app's loop that times questions itself (as the durable one does): nobody answers there within the timeout.
      const base = {
        ask: () => Effect.never,
        askWithin: (_request: HumanLoop.QuestionRequest, _check: unknown, timeout: Duration.Duration) => Effect.as(Effect.sleep(timeout), Option.none())
      } as unknown as HumanLoop.Service
      const asked: Array<unknown> = []
      const client = {
        getClient: Effect.succeed({
          elicit: (params: unknown) => Effect.sync(() => (asked.push(params), { action: "accept", content: { answer: "Lyon" } }))
        })
      } as unknown as McpSchema.McpServerClient["Service"]
      const loop = Elicit.humanLoop(base, Option.some(client), { agent: "planner", others: true })
      const fiber = yield* Effect.forkChild(loop.askWithin!(question(Schema.String), answered, Duration.minutes(5)))
      yield* TestClock.adjust("10 minutes")
      const outcome = yield* Fiber.join(fiber)
      expect(asked).toHaveLength(1)
      expect(outcome).toEqual(Option.some(Result.succeed("Lyon")))
    }))
})
