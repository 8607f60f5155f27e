import { FileSystem } from "effect"
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const add = Tool.make({
  name: "add",
  description: "Adds",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})
const calculator = Agent.make({ name: "calc", instructions: "Add.", tools: [add] })
const script: ScriptedModel.Script = [{ toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] }, "2 + 3 = 5"]

const recording = (path: string, turns: ScriptedModel.Script) =>
  Journal.layerRecord(path).pipe(Layer.provide(ScriptedModel.layer(turns)), Layer.provide(NodeServices.layer))
const replaying = (path: string) => Journal.layerReplay(path).pipe(Layer.provide(NodeServices.layer))

const cassette = Effect.map(
  FileSystem.FileSystem.pipe(Effect.flatMap((fs) => fs.makeTempDirectoryScoped({ prefix: "valet-journal-" }))),
  (dir) => `${dir}/run.jsonl`
)

describe("Journal", () => {
  it.effect("records a run and replays it with no model at all, to an identical result", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const recorded = yield* Agent.run(calculator, "2 + 3?", { sessionId: "sess_rec" }).pipe(
        Effect.provide(recording(path, script))
      )
      const replayed = yield* Agent.run(calculator, "2 + 3?", { sessionId: "sess_rec" }).pipe(
        Effect.provide(replaying(path))
      )
      expect(replayed).toEqual(recorded)
      expect(replayed.output).toBe("2 + 3 = 5")
      // Replayed under another session id too: keys are relative to the run's root session.
      const elsewhere = yield* Agent.run(calculator, "2 + 3?").pipe(Effect.provide(replaying(path)))
      expect({ ...elsewhere, sessionId: "" }).toEqual({ ...recorded, sessionId: "" })
      const entries = yield* Journal.read(path)
      expect(entries.map((entry) => [entry.session, entry.step, entry.occurrence])).toEqual([
        ["root", "react.turn_1", 0],
        ["root", "react.turn_2", 0]
      ])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a changed prompt is a ReplayMiss naming the key", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      yield* Agent.run(calculator, "2 + 3?").pipe(Effect.provide(recording(path, script)))
      const error = yield* Effect.flip(Agent.run(calculator, "2 + 4?").pipe(Effect.provide(replaying(path))))
      expect(error).toBeInstanceOf(ModelError.ReplayMiss)
      expect(error.message).toMatch(/^Journal: no recorded model call for root\/react\.turn_1\/[0-9a-f]{16}#0 in .*run\.jsonl$/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("multi-agent runs replay: sub-agents are keyed by their deterministic session ids", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const helper = Agent.make({ name: "helper", instructions: "" })
      const parallel = Architecture.make({
        name: "parallel-helpers",
        program: (input) =>
          Effect.map(
            Effect.forEach(
              [1, 2, 3],
              (i) => Agent.runChild(helper, `${input.prompt} #${i}`, { role: "helper", index: i }),
              { concurrency: "unbounded" }
            ),
            (results) => ({ output: results.map((result) => result.output).join(" | ") })
          )
      })
      const boss = Agent.make({ name: "boss", instructions: "", architecture: parallel })
      const answer = ScriptedModel.layer((request) => `answer to ${request.messages?.at(-1)?.content}`)
      const recorded = yield* Agent.run(boss, "q").pipe(
        Effect.provide(Journal.layerRecord(path).pipe(Layer.provide(answer), Layer.provide(NodeServices.layer)))
      )
      const replayed = yield* Agent.run(boss, "q").pipe(Effect.provide(replaying(path)))
      expect(replayed.output).toBe("answer to q #1 | answer to q #2 | answer to q #3")
      expect(replayed.output).toBe(recorded.output)
      const sessions = (yield* Journal.read(path)).map((entry) => entry.session).sort()
      expect(sessions).toEqual(["root__helper_1", "root__helper_2", "root__helper_3"])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("streamed runs record and replay their text deltas", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const deltas = (layer: Layer.Layer<Model.Model, Journal.JournalError>) =>
        Agent.stream(calculator, "2 + 3?").pipe(
          Stream.filter((event) => event._tag === "TextDelta"),
          Stream.map((event) => (event._tag === "TextDelta" ? event.text : "")),
          Stream.runCollect,
          Effect.provide(layer)
        )
      const recorded = yield* deltas(recording(path, script))
      const replayed = yield* deltas(replaying(path))
      expect(recorded).toEqual(["2", " +", " 3", " =", " 5"])
      expect(replayed).toEqual(recorded)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a recorded failure replays as the same typed failure", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const failing = [{ error: new ModelError.ContextLengthExceeded({ message: "prompt too long" }) }]
      const first = yield* Effect.flip(Agent.run(calculator, "x").pipe(Effect.provide(recording(path, failing))))
      const again = yield* Effect.flip(Agent.run(calculator, "x").pipe(Effect.provide(replaying(path))))
      expect(first).toBeInstanceOf(ModelError.ContextLengthExceeded)
      expect(again).toEqual(first)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a bad cassette line is a JournalError with its line number", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      yield* Agent.run(calculator, "2 + 3?").pipe(Effect.provide(recording(path, script)))
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(path, '{"session": "root", "truncated', { flag: "a" })
      const error = yield* Effect.flip(Agent.run(calculator, "2 + 3?").pipe(Effect.provide(replaying(path))))
      expect(error).toBeInstanceOf(Journal.JournalError)
      expect((error as Journal.JournalError).line).toBe(3)
      expect(error.message).toContain(":3 is not a journal entry")
      const missing = yield* Effect.flip(Journal.read(`${path}.absent`))
      expect(missing.message).toContain("cannot read the cassette")
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("Journal: content parts", () => {
  // A real 1×1 PNG, repeated to 3 KB so that a second copy in the file would show.
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==".replace(/=+$/, "")
  const image = Model.imagePart({ data: `${png.repeat(32).slice(0, 3000)}`, mediaType: "image/png" })
  const history = [Model.user([Model.textPart("Add the numbers in this image."), image])]

  it.effect("an image sent on every turn is stored once, by digest; read and replay put the bytes back", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const recorded = yield* Agent.run(calculator, "", { sessionId: "s", history }).pipe(Effect.provide(recording(path, script)))
      const text = yield* (yield* FileSystem.FileSystem).readFileString(path)
      const lines = text.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
      // One blob line, then the two turns' entries, each naming the bytes by their digest.
      expect(lines).toHaveLength(3)
      expect(lines[0]).toEqual({ blob: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), data: image.data })
      expect(text.split(image.data!).length - 1).toBe(1)
      expect(text.split(lines[0]!.blob as string).length - 1).toBe(3)
      const entries = yield* Journal.read(path)
      expect(entries).toHaveLength(2)
      for (const entry of entries) expect(entry.request.messages!.at(1)).toEqual(history[0])
      const replayed = yield* Agent.run(calculator, "", { sessionId: "s", history }).pipe(Effect.provide(replaying(path)))
      expect(replayed).toEqual(recorded)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("an entry naming bytes no earlier line holds is a JournalError with its line", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      yield* Agent.run(calculator, "", { history }).pipe(Effect.provide(recording(path, script)))
      const fs = yield* FileSystem.FileSystem
      const text = yield* fs.readFileString(path)
      yield* fs.writeFileString(path, text.split("\n").slice(1).join("\n"))
      const error = yield* Effect.flip(Journal.read(path))
      expect(error.line).toBe(1)
      expect(error.message).toMatch(/:1 uses the bytes sha256:[0-9a-f]{64}, which no line before it holds$/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a blob whose bytes are not those its digest names (an edited or damaged cassette) is a JournalError with its line", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      yield* Agent.run(calculator, "", { history }).pipe(Effect.provide(recording(path, script)))
      const fs = yield* FileSystem.FileSystem
      const text = yield* fs.readFileString(path)
      // One base64 character changed in the blob line: the entries still name the old digest.
      const [blob, ...rest] = text.split("\n")
      const damaged = blob!.replace(`"data":"iVBOR`, `"data":"jVBOR`)
      expect(damaged).not.toBe(blob)
      yield* fs.writeFileString(path, [damaged, ...rest].join("\n"))
      const error = yield* Effect.flip(Journal.read(path))
      expect(error.line).toBe(1)
      expect(error.message).toMatch(/:1 holds bytes whose digest is sha256:[0-9a-f]{64}, not the sha256:[0-9a-f]{64} it names$/)
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("Journal: a tool's parts and data: URLs, by digest", () => {
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==".replace(/=+$/, "")
  // 3,000 base64 characters: a second copy in the file would show.
  const bytes = png.repeat(32).slice(0, 3000)
  const screenshot = Tool.fromDefinition({
    name: "screenshot",
    description: "Takes a screenshot",
    parameters: { type: "object", properties: {} },
    call: () => Effect.succeed({ content: "[image image/png: attached]", isError: false, parts: [Model.imagePart({ data: bytes, mediaType: "image/png" })] })
  })
  const looker = Agent.make({ name: "looker", instructions: "", tools: [screenshot] })
  const looks: ScriptedModel.Script = [
    { toolCalls: [{ id: "a", name: "screenshot", arguments: {} }] },
    { toolCalls: [{ id: "b", name: "screenshot", arguments: {} }] },
    "two screenshots"
  ]

  it.effect("a tool result's image is stored once over the turns that resend it; replay gives it back", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const recorded = yield* Agent.run(looker, "look twice", { sessionId: "s" }).pipe(Effect.provide(recording(path, looks)))
      const text = yield* (yield* FileSystem.FileSystem).readFileString(path)
      // Three calls resend the first result's image (twice) and the second's (once): one blob line holds the bytes.
      expect(text.split(bytes).length - 1).toBe(1)
      const entries = yield* Journal.read(path)
      expect(entries).toHaveLength(3)
      const last = entries[2]!.request.messages!.filter((message) => message.role === "tool")
      expect(last.map((message) => message.role === "tool" && message.parts?.[0])).toEqual([
        { type: "image", data: bytes, mediaType: "image/png" },
        { type: "image", data: bytes, mediaType: "image/png" }
      ])
      const replayed = yield* Agent.run(looker, "look twice", { sessionId: "s" }).pipe(Effect.provide(replaying(path)))
      expect(replayed).toEqual(recorded)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a data: URL image is stored by the digest of its bytes, once, shared with the same bytes sent as data", () =>
    Effect.gen(function*() {
      const path = yield* cassette
      const url = `data:image/png;base64,${bytes}`
      const history = [Model.user([Model.textPart("Compare"), Model.imagePart({ url }), Model.imagePart({ data: bytes, mediaType: "image/png" })])]
      const recorded = yield* Agent.run(calculator, "", { sessionId: "s", history }).pipe(Effect.provide(recording(path, script)))
      const text = yield* (yield* FileSystem.FileSystem).readFileString(path)
      expect(text.split(bytes).length - 1).toBe(1)
      const lines = text.trim().split("\n").map((line) => JSON.parse(line) as Record<string, any>)
      const digest = lines[0]!.blob as string
      expect(lines[1]!.request.messages[1].content[1]).toEqual({ type: "image", url: `data:image/png;base64,${digest}` })
      const entries = yield* Journal.read(path)
      for (const entry of entries) expect(entry.request.messages!.at(1)).toEqual(history[0])
      const replayed = yield* Agent.run(calculator, "", { sessionId: "s", history }).pipe(Effect.provide(replaying(path)))
      expect(replayed).toEqual(recorded)
    }).pipe(Effect.provide(NodeServices.layer)))
})
