import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { Sse } from "effect/encoding"
import * as FastCheck from "../../../../src/providers/internal/openai/fastCheck.js"
import * as Wire from "../../../../src/providers/internal/openai/wire.js"
import * as Server from "../../../support/openAiServer.js"

const eventsOf = (pieces: ReadonlyArray<string>, feed: (parser: Sse.Parser, text: string) => unknown) => {
  const events: Array<string> = []
  const parser = Sse.makeParser((event) => {
    if (event._tag === "Event") events.push(`${event.event}|${event.data}`)
  })
  for (const piece of pieces) feed(parser, piece)
  return events
}

/** A deterministic pseudo-random split of a text into pieces. */
const split = (text: string, seed: number): Array<string> => {
  const pieces: Array<string> = []
  let state = seed
  let start = 0
  while (start < text.length) {
    state = (state * 1103515245 + 12345) % 2147483648
    const size = 1 + (state % 900)
    pieces.push(text.slice(start, start + size))
    start += size
  }
  return pieces
}

/** What the client does with each network read: the whole decoded text to the parser in one call. */
const feedWhole = (parser: Sse.Parser, text: string) => parser.feed(text)

describe("the Sse parser fed each network read whole, as the client does", () => {
  const big = Server.fixture("chat-stream-usage.sse").repeat(8) + Server.fixture("chat-stream-tool-call-vllm.sse").repeat(4)
  const variants = {
    "\\n": big,
    "\\r\\n": big.replaceAll("\n", "\r\n"),
    "\\r": big.replaceAll("\n", "\r"),
    "named events and comments": big.replaceAll("data: [DONE]", ": a comment\nevent: done\ndata: [DONE]")
  }
  for (const [name, text] of Object.entries(variants)) {
    it(`gives the events the parser gives fed one character at a time (${name} line ends, any split)`, () => {
      const expected = eventsOf(text.split(""), (parser, c) => parser.feed(c))
      expect(expected.length).toBeGreaterThan(50)
      for (const seed of [1, 2, 3, 4, 5]) {
        expect(eventsOf(split(text, seed), feedWhole)).toEqual(expected)
      }
      expect(eventsOf([text], feedWhole)).toEqual(expected)
    })
  }
})

describe("fastCheck: a subset of the wire schemas", () => {
  // DeepSeek's last: its usage has the prompt-cache counts, which the mutations below then reach.
  const chatEvents = [
    ...Server.sseData(Server.fixture("chat-stream-usage.sse")),
    ...Server.sseData(Server.fixture("chat-stream-tool-call-vllm.sse")),
    ...Server.sseData(Server.fixture("deepseek-chat-stream-usage.sse"))
  ]
  const isChat = Schema.is(Wire.ChatChunk)
  const isCompletion = Schema.is(Wire.CompletionChunk)

  it("accepts the recorded chunks, which the schema accepts too", () => {
    for (const event of chatEvents) {
      expect(FastCheck.isChatChunk(event)).toBe(true)
      expect(isChat(event)).toBe(true)
    }
    for (const event of Server.completionStreamOf(JSON.parse(Server.fixture("vllm-completion.json")))) {
      if (typeof event === "string") continue
      expect(FastCheck.isCompletionChunk(event)).toBe(true)
      expect(isCompletion(event)).toBe(true)
    }
  })

  it("never accepts what the schema refuses (mutations of every field)", () => {
    const oddValues: ReadonlyArray<unknown> = [1, "x", true, null, [], {}, [1], [{}], { a: 1 }]
    const mutations = (value: unknown, depth = 0): Array<unknown> => {
      if (depth > 4 || value === null || typeof value !== "object") return []
      const out: Array<unknown> = []
      const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value)
      for (const [key, child] of entries) {
        for (const odd of oddValues) {
          out.push(Array.isArray(value) ? value.map((v, i) => (i === key ? odd : v)) : { ...value, [key]: odd })
        }
        for (const mutated of mutations(child, depth + 1)) {
          out.push(Array.isArray(value) ? value.map((v, i) => (i === key ? mutated : v)) : { ...value, [key]: mutated })
        }
      }
      return out
    }
    let accepted = 0
    let refused = 0
    for (const event of chatEvents.slice(0, 3).concat(chatEvents.slice(-3))) {
      for (const mutated of mutations(event)) {
        if (FastCheck.isChatChunk(mutated)) {
          accepted++
          expect(isChat(mutated), JSON.stringify(mutated)).toBe(true)
        } else refused++
        if (FastCheck.isCompletionChunk(mutated)) expect(isCompletion(mutated), JSON.stringify(mutated)).toBe(true)
      }
    }
    expect(accepted).toBeGreaterThan(100)
    expect(refused).toBeGreaterThan(100)
  })

  it("log-probabilities always go through the schema", () => {
    const chunk = { choices: [{ index: 0, delta: { content: "a" }, logprobs: { content: [{ token: "a", logprob: -1 }] } }] }
    expect(FastCheck.isChatChunk(chunk)).toBe(false)
    expect(Result.isSuccess(Schema.decodeUnknownResult(Wire.ChatChunk)(chunk))).toBe(true)
  })
})

describe("fastCheck: non-streamed answers", () => {
  const [openai, deepseek] = ["openai-chat-text.json", "deepseek-chat-text.json"].map((name) => JSON.parse(Server.fixture(name)))
  // OpenAI's usage with a cached prompt part, in DeepSeek's answer.
  const chat = [openai, deepseek, { ...deepseek, usage: JSON.parse(Server.fixture("openai-usage-cached.json")) }]
  const completion = JSON.parse(Server.fixture("vllm-completion.json"))
  const isChat = Schema.is(Wire.ChatCompletion)
  const isCompletion = Schema.is(Wire.Completion)
  const mutations = (value: unknown, depth = 0): Array<unknown> => {
    const oddValues: ReadonlyArray<unknown> = [1, "x", true, null, undefined, [], {}, [1], [{}], { a: 1 }]
    if (depth > 4 || value === null || typeof value !== "object") return []
    const out: Array<unknown> = []
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value)
    for (const [key, child] of entries) {
      for (const odd of oddValues) out.push(Array.isArray(value) ? value.map((v, i) => (i === key ? odd : v)) : { ...value, [key]: odd })
      for (const mutated of mutations(child, depth + 1)) {
        out.push(Array.isArray(value) ? value.map((v, i) => (i === key ? mutated : v)) : { ...value, [key]: mutated })
      }
    }
    return out
  }

  it("accepts the recorded answers (no token data), which the schema accepts too", () => {
    for (const answer of chat) {
      expect(FastCheck.isChatCompletion(answer)).toBe(true)
      expect(isChat(answer)).toBe(true)
    }
    expect(FastCheck.isCompletion(completion)).toBe(true)
    expect(isCompletion(completion)).toBe(true)
  })

  it("never accepts what the schema refuses (mutations of every field); token data and tool calls go to the schema", () => {
    let accepted = 0
    let refused = 0
    for (const answer of [...chat, completion]) {
      for (const mutated of mutations(answer)) {
        if (FastCheck.isChatCompletion(mutated)) {
          accepted++
          expect(isChat(mutated), JSON.stringify(mutated)).toBe(true)
        } else refused++
        if (FastCheck.isCompletion(mutated)) {
          accepted++
          expect(isCompletion(mutated), JSON.stringify(mutated)).toBe(true)
        }
      }
    }
    expect(accepted).toBeGreaterThan(100)
    expect(refused).toBeGreaterThan(100)
    expect(FastCheck.isCompletion({ ...completion, choices: undefined })).toBe(false)
    expect(FastCheck.isCompletion(JSON.parse(Server.fixture("vllm-completion-tokens.json")))).toBe(false)
    expect(FastCheck.isChatCompletion(JSON.parse(Server.fixture("vllm-chat-tokens.json")))).toBe(false)
    const toolCall = { choices: [{ index: 0, message: { content: null, tool_calls: [{ id: "c", function: { name: "f", arguments: "{}" } }] } }] }
    expect(FastCheck.isChatCompletion(toolCall)).toBe(false)
    expect(isChat(toolCall)).toBe(true)
  })
})
