/**
 * The SSE reader of the OpenAI-compatible client and the line reader of the legacy `/generate` stream, fed by hand:
 * the same chunks however the body is cut into reads (mid-line, mid-character), typed errors on hostile bodies,
 * and linear time on long runs of one character, which arrive in many small reads (shown by sizes at which a
 * quadratic reader would outlast the test's timeout by minutes, not by timing the linear one).
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import type * as Model from "../../../../src/core/Model.js"
import * as ModelError from "../../../../src/core/ModelError.js"
import * as Client from "../../../../src/providers/internal/openai/client.js"
import * as Resilience from "../../../../src/providers/internal/resilience.js"
import * as Generate from "../../../../src/providers/internal/vllm/generate.js"

const encoder = new TextEncoder()
const limits = Resilience.limitsOf({})

interface Outcome {
  readonly chunks: ReadonlyArray<Model.Chunk>
  readonly error: ModelError.ModelError | undefined
  readonly events: number
}

/** Feeds `body` to a reader in pieces cut at `cuts` (byte offsets, any order; out of range ones ignored). */
const feed = (reader: Client.BodyReader, body: Uint8Array, cuts: ReadonlyArray<number> = []): Outcome => {
  const points = [...new Set(cuts.map((cut) => Math.abs(Math.trunc(cut)) % (body.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<Model.Chunk> = []
  let from = 0
  for (const point of [...points, body.length]) {
    if (point <= from) continue
    const error = reader.read(body.subarray(from, point), chunks)
    if (error !== undefined) return { chunks, error, events: reader.events() }
    from = point
  }
  return { chunks, error: reader.end(chunks), events: reader.events() }
}

/** Feeds `body` in reads of `size` bytes. */
const feedEvery = (reader: Client.BodyReader, body: Uint8Array, size: number): Outcome => {
  const cuts: Array<number> = []
  for (let at = size; at < body.length; at += size) cuts.push(at)
  return feed(reader, body, cuts)
}

const sse = (limit = limits) => Client.sseReader("http://test/v1/chat/completions", "chat", "m", limit)
const lines = (prompt = "", limit = limits) => Generate.linesReader("http://test/generate", prompt, "m", limit)

/** A chat stream of these contents, one event each, with comments and blank-line noise between them when asked. */
const chatStream = (contents: ReadonlyArray<string>, crlf: boolean, noise: boolean): string => {
  const nl = crlf ? "\r\n" : "\n"
  const events = contents.map((content, i) =>
    `${noise ? `: ping ${i}${nl}${nl}` : ""}data: ${JSON.stringify({ id: "s", model: "m", choices: [{ index: 0, delta: { content } }] })}${nl}${nl}`
  )
  const finish = `data: ${JSON.stringify({ id: "s", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}${nl}${nl}`
  return `${events.join("")}${finish}data: [DONE]${nl}${nl}`
}

const Contents = Schema.Array(Schema.String)
const Cuts = Schema.Array(Schema.Finite)

describe("sseReader", () => {
  it.prop(
    "any cut of a stream into reads gives the chunks of the whole stream (LF or CRLF, comments or not)",
    { contents: Contents, cuts: Cuts, crlf: Schema.Boolean, noise: Schema.Boolean },
    ({ contents, crlf, cuts, noise }) => {
      const body = encoder.encode(chatStream(contents, crlf, noise))
      const whole = feed(sse(), body)
      const pieces = feed(sse(), body, cuts)
      expect(whole.error).toBeUndefined()
      expect(pieces).toEqual(whole)
      const text = whole.chunks.flatMap((chunk) => (chunk._tag === "TextDelta" ? [chunk.text] : [])).join("")
      expect(text).toBe(contents.join(""))
      // Every data event counted as progress, [DONE] included; comments did not.
      expect(whole.events).toBe(contents.length + 2)
    }
  )

  it.prop(
    "a body of one character repeated (up to 1 MB) ends in a typed outcome, in pieces of 1 KiB",
    { char: Schema.Literals([":", "\n", "\r", " ", "{", "d", "x", "\u00e9"]), length: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 })), prefix: Schema.Literals(["", "data: ", "event: error\ndata: ", ": "]) },
    ({ char, length, prefix }) => {
      const outcome = feedEvery(sse({ ...limits, maxEventBytes: 256 * 1024 }), encoder.encode(prefix + char.repeat(length)), 1024)
      // Nothing here is an answer: every case fails, with a typed error.
      expect(ModelError.isModelError(outcome.error)).toBe(true)
      expect(outcome.chunks.filter((chunk) => chunk._tag === "TextDelta")).toEqual([])
    },
    { arbitrary: { runs: 40 } }
  )

  // Linear, without timing it: in 64-byte reads these 32 bodies take about 0.5 s here; a reader that scanned what
  // it holds again on every read (effect 3's parser did, per line) would go over 15,000 reads × 0.5 MB on average
  // per body, minutes in all, far past the test's own timeout, which is the bound.
  it("1 MB runs of each hostile character, after each prefix, in 64-byte reads: linear, and never an answer", { timeout: 30_000 }, () => {
    for (const prefix of ["", "data: ", ": ", "event: error\ndata: "]) {
      for (const char of [":", "\n", "\r", " ", "{", "[", "d", "\u00e9"]) {
        const outcome = feedEvery(sse({ ...limits, maxEventBytes: 4 * 1024 * 1024 }), encoder.encode(prefix + char.repeat(1_000_000)), 64)
        expect(ModelError.isModelError(outcome.error), JSON.stringify([prefix, char])).toBe(true)
      }
    }
  })

  it("no event, only [DONE], only comments, only usage: MalformedResponse; events but no [DONE]: Transport", () => {
    const usage = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 } })}\n\n`
    for (const body of ["", "data: [DONE]\n\n", ": a\n\n: b\n\n", "\n\n\n", `${usage}data: [DONE]\n\n`, "hello world"]) {
      expect(feed(sse(), encoder.encode(body)).error, JSON.stringify(body)).toBeInstanceOf(ModelError.MalformedResponse)
    }
    const cut = chatStream(["a", "b"], false, false).replace("data: [DONE]\n\n", "")
    expect(feed(sse(), encoder.encode(cut)).error).toBeInstanceOf(ModelError.Transport)
  })

  it("`event: error`: JSON error bodies, bare fields, plain text and no data all keep a message", () => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["event: error\ndata: {\"error\": {\"message\": \"quota\", \"type\": \"rate_limit_error\"}}\n\n", "RateLimited", "quota"],
      ["event: error\ndata: {\"object\": \"error\", \"message\": \"bad param\", \"code\": 400}\n\n", "InvalidRequest", "bad param"],
      ["event: error\ndata: {\"message\": \"engine died\"}\n\n", "ServerError", "engine died"],
      ["event: error\ndata: overloaded\n\n", "ServerError", "overloaded"],
      ["event: error\n\n", "ServerError", "the server sent an error event with no message"]
    ]
    for (const [body, tag, message] of cases) {
      expect(feed(sse(), encoder.encode(body)).error, body).toMatchObject({ _tag: tag, message })
    }
  })

  it("one event over maxEventBytes fails naming the cap, before its end arrives", () => {
    const outcome = feedEvery(sse({ ...limits, maxEventBytes: 1024 }), encoder.encode(`data: ${"x".repeat(4096)}`), 512)
    expect(outcome.error).toBeInstanceOf(ModelError.MalformedResponse)
    expect(outcome.error!.message).toMatch(/maxEventBytes \(1 KiB\)/)
  })
})

describe("linesReader (/generate)", () => {
  const linesOf = (texts: ReadonlyArray<string>, prompt: string, separator: string) => {
    let sofar = ""
    return texts.map((text) => {
      sofar += text
      return JSON.stringify({ text: [prompt + sofar] })
    }).join(separator) + separator
  }

  it.prop(
    "any cut into reads gives the deltas of the whole stream (newline or \\0 separated)",
    { texts: Contents, cuts: Cuts, nul: Schema.Boolean },
    ({ cuts, nul, texts }) => {
      const body = encoder.encode(linesOf(texts, "P: ", nul ? "\0" : "\n"))
      const whole = feed(lines("P: "), body)
      const pieces = feed(lines("P: "), body, cuts)
      expect(pieces).toEqual(whole)
      if (texts.length === 0) {
        expect(whole.error).toBeInstanceOf(ModelError.MalformedResponse)
      } else {
        expect(whole.error).toBeUndefined()
        const text = whole.chunks.flatMap((chunk) => (chunk._tag === "TextDelta" ? [chunk.text] : [])).join("")
        expect(text).toBe(texts.join(""))
      }
    }
  )

  // Linear, without timing it: 65,536 reads of 64 bytes take about 0.1 s here; rescanning the pending line on every
  // read would be 65,536 × 2 MB on average, minutes, far past the test's own timeout, which is the bound.
  it("a 4 MB line in 64-byte reads is read in linear time; past maxEventBytes it fails naming the cap", { timeout: 30_000 }, () => {
    const line = encoder.encode(`${JSON.stringify({ text: ["y".repeat(4 * 1024 * 1024)] })}\n`)
    const outcome = feedEvery(lines("", { ...limits, maxEventBytes: 8 * 1024 * 1024 }), line, 64)
    expect(outcome.error).toBeUndefined()
    const capped = feedEvery(lines("", { ...limits, maxEventBytes: 1024 * 1024 }), line, 1024)
    expect(capped.error!.message).toMatch(/maxEventBytes \(1 MiB\)/)
  })

  it("blank lines and whitespace are no progress; an empty list of texts is malformed", () => {
    const blank = feed(lines(), encoder.encode("\n \n\t\n"))
    expect(blank.events).toBe(0)
    expect(blank.error).toBeInstanceOf(ModelError.MalformedResponse)
    expect(feed(lines(), encoder.encode("{\"text\": []}\n")).error).toBeInstanceOf(ModelError.MalformedResponse)
  })
})
