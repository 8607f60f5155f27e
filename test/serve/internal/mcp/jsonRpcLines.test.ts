/**
 * The stdio framing valet reads before effect's `McpServer` does: lines cut at the limit while they are read, and
 * each line's envelope decided on its own (forwarded re-encoded, answered with JSON-RPC's error, or dropped).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Lines from "../../../../src/serve/internal/mcp/jsonRpcLines.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The pieces of `chunks`, fed one after the other, lines as text. */
const split = (maxBytes: number, chunks: ReadonlyArray<string | Uint8Array>) => {
  const splitter = Lines.lineSplitter(maxBytes)
  return chunks.flatMap((chunk) => splitter.push(typeof chunk === "string" ? encoder.encode(chunk) : chunk)).map((piece) =>
    piece._tag === "Line" ? decoder.decode(piece.bytes) : `<too long: ${piece.maxBytes}>`
  )
}

const decide = (line: string) => Lines.decide(encoder.encode(line))

/** The error a line is answered with, as the client reads it. */
const answered = (line: string) => {
  const decision = decide(line)
  return decision._tag === "Answer" ? JSON.parse(decision.text) : decision
}

describe("jsonRpcLines", () => {
  it("lineSplitter: lines across chunks, several per chunk, a blank one kept for decide to drop", () => {
    expect(split(100, ['{"a":', "1}\n{}\n", "\n[1]\n"])).toEqual(['{"a":1}', "{}", "", "[1]"])
    // An unfinished line waits for its end, or for the end of the input.
    expect(split(100, ["abc"])).toEqual([])
    const splitter = Lines.lineSplitter(100)
    expect(splitter.push(encoder.encode('{}\n{"a"'))).toHaveLength(1)
    expect(splitter.end().map((piece) => piece._tag === "Line" ? decoder.decode(piece.bytes) : piece._tag)).toEqual(['{"a"'])
    expect(splitter.end()).toEqual([])
  })

  it("lineSplitter: a line longer than the limit is reported once, as soon as it passes it; the next line is read", () => {
    // Reported at the chunk that passes the limit, before the line ends: a client that never ends it is answered.
    expect(split(10, ["0123456789", "0"])).toEqual(["<too long: 10>"])
    expect(split(10, ["0123456789\n"])).toEqual(["0123456789"])
    expect(split(10, ["01234567890123", "more", "and more\nok\n"])).toEqual(["<too long: 10>", "ok"])
    expect(split(4, ["ab\nxxxxxxx\ncd\n"])).toEqual(["ab", "<too long: 4>", "cd"])
  })

  it("lineSplitter: an unfinished line is copied, not a view of a buffer the reader reuses", () => {
    const splitter = Lines.lineSplitter(100)
    const buffer = encoder.encode("abc")
    expect(splitter.push(buffer)).toEqual([])
    buffer.set(encoder.encode("XYZ"))
    expect(splitter.push(encoder.encode("d\n")).map((piece) => piece._tag === "Line" ? decoder.decode(piece.bytes) : piece._tag)).toEqual(["abcd"])
  })

  it("decide: valid messages go on re-encoded, with JSON-RPC's keys only", () => {
    expect(decide('{"jsonrpc":"2.0","id":1,"method":"ping"}')).toEqual({ _tag: "Forward", text: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })
    // effect's RPC layer reads `headers` and `discard` (a request never answered) from a message: a client cannot set them.
    expect(decide('{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{},"headers":5,"discard":true}')).toEqual({
      _tag: "Forward",
      text: '{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}'
    })
    expect(decide('{"jsonrpc":"2.0","method":"notifications/initialized"}\r')).toEqual({
      _tag: "Forward",
      text: '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    })
    expect(decide('{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}')).toEqual({
      _tag: "Forward",
      text: '{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}'
    })
    expect(decide('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]')).toEqual({
      _tag: "Forward",
      text: '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]'
    })
    expect(decide("   ")).toEqual({ _tag: "Drop", note: undefined })
  })

  it("decide: each bad line is answered with the error JSON-RPC names, saying what was wrong", () => {
    const error = (id: string | number | null, code: number, message: string) => ({ jsonrpc: "2.0", id, error: { code, message } })
    expect(answered("{not json")).toEqual(
      error(null, -32700, "Parse error: the line is not JSON (Expected property name or '}' in JSON at position 1 (line 1 column 2))")
    )
    expect(answered(`${"[".repeat(101)}${"]".repeat(101)}`)).toEqual(error(null, -32700, "Parse error: the JSON nests deeper than 100 levels"))
    expect(Lines.decide(new Uint8Array([0x7b, 0xff, 0x7d]))).toMatchObject({ _tag: "Answer", code: -32700, message: "Parse error: the line is not UTF-8 text" })
    expect(answered('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}')).toEqual(
      error(null, -32600, 'Invalid Request: id must be a string or a number, got {"a":1}')
    )
    expect(answered('{"jsonrpc":"2.0","id":null,"method":"ping"}')).toEqual(
      error(null, -32600, "Invalid Request: id must be a string or a number, got null")
    )
    // The id is named in the answer when it could be read.
    expect(answered('{"jsonrpc":"1.0","id":4,"method":"ping"}')).toEqual(error(4, -32600, 'Invalid Request: jsonrpc must be "2.0", got "1.0"'))
    expect(answered('{"jsonrpc":"2.0","id":5,"method":5}')).toEqual(error(5, -32600, "Invalid Request: method must be a string, got 5"))
    expect(answered('{"jsonrpc":"2.0","id":6,"method":"x","params":"s"}')).toEqual(
      error(6, -32600, 'Invalid Request: params must be an object or an array, got "s"')
    )
    expect(answered("5")).toEqual(error(null, -32600, "Invalid Request: a message must be a JSON object, got a number"))
    expect(answered('{"foo":1}')).toEqual(
      error(null, -32600, "Invalid Request: a message must have a method (a request or a notification) or a result or an error (a response)")
    )
    expect(answered("[]")).toEqual(error(null, -32600, "Invalid Request: the batch is empty"))
    expect(answered('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":[],"method":"ping"}]')).toEqual(
      error(null, -32600, "Invalid Request: batch item 1: id must be a string or a number, got []")
    )
    expect(JSON.parse((Lines.tooLong(1024) as { text: string }).text)).toEqual(
      error(null, -32600, "Invalid Request: the message is longer than this server's limit of 1024 bytes")
    )
  })

  it("decide: a bad response from the client is dropped with a note, never answered", () => {
    expect(decide('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')).toEqual({
      _tag: "Drop",
      note: "a response from the client was dropped: id must be a string or a number, got null"
    })
    expect(decide('{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"x"}}')).toEqual({
      _tag: "Drop",
      note: "a response from the client was dropped: a response must have either result or error"
    })
  })
})
