/**
 * Issue 12, item 7: `valet eval` where every problem failed exited 0, `valet run` on an empty answer exited 0, 17
 * of 29 bad-input cases printed JavaScript stack frames, and option errors printed a raw JSON line or a 13-line
 * schema tree. Now: exit 0 done, 1 failed, 2 wrong command line; one line on stderr; `--verbose` for the cause.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as Server from "../support/openAiServer.js"
import { valet } from "../support/cli.js"

const dir = mkdtempSync(join(tmpdir(), "valet-cli-reliability-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const file = (name: string, content: string) => {
  const path = join(dir, name)
  writeFileSync(path, content)
  return path
}


const completion = (content: string) => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 0,
  model: "loopback-model",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 }
})

const stackFrame = /^\s+at /

/** Bad command lines: the exit code, and what the one line must name. */
const usageErrors: ReadonlyArray<readonly [args: ReadonlyArray<string>, names: string]> = [
  [["run"], "prompt"],
  [["run", "hi", "--architecture", "nope"], "--architecture"],
  [["run", "hi", "--no-such-flag"], "--no-such-flag"],
  [["solve", "x", "--max-calls", "-3"], "--max-calls"],
  [["solve", "x", "--max-calls", "abc"], "--max-calls"],
  [["solve", "x", "--max-rounds", "0"], "--max-rounds"],
  [["eval", join(dir, "missing.jsonl")], "missing.jsonl"],
  [["actor-loop", join(dir, "missing.jsonl")], "missing.jsonl"],
  [["replay", join(dir, "missing-cassette.jsonl"), "hi"], "missing-cassette.jsonl"],
  [["bogus"], "bogus"],
  [["state", "dump"], "task_id"]
]

describe("reliability: the CLI tells the truth", () => {
  for (const [args, names] of usageErrors) {
    it.effect(`valet ${args.join(" ")}: exit 2, one line naming ${names}`, () =>
      Effect.gen(function*() {
        const { code, errors } = yield* valet(args)
        expect(code).toBe(2)
        expect(errors).toHaveLength(1)
        expect(errors[0]).toContain(names)
        expect(errors[0]).toMatch(/^valet( [a-z-]+)*: /)
      }))
  }

  it.effect("failures are one line without stack frames, exit 1; --verbose adds the cause", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [args: ReadonlyArray<string>, says: string]> = [
        [["run", "hi", "--base-url", "http://127.0.0.1:1"], "Transport"],
        [["run", "hi", "--base-url", "notaurl"], "notaurl"],
        [["actor-loop", file("garbage.jsonl", "not json\n{\"nope\": 1}\n")], "no valid task line"],
        [["replay", file("bad-cassette.jsonl", "{not a record\n"), "hi"], "bad-cassette.jsonl"],
        [["eval", file("empty.jsonl", ""), "--base-url", "http://127.0.0.1:1", "--model", "m"], "empty.jsonl"]
      ]
      for (const [args, says] of cases) {
        const { code, errors } = yield* valet(args)
        expect({ args, code }).toEqual({ args, code: 1 })
        expect({ args, errors: errors.length }).toEqual({ args, errors: 1 })
        expect(errors[0]).toContain(says)
        expect(errors.some((line) => stackFrame.test(line))).toBe(false)
      }
      // A bad configuration file is a usage error: exit 2, one line naming the file (a pool file as a valet.yaml).
      const pool = yield* valet(["health", "--config", file("bad.yaml", "actors: [ {base_url: 3\n")])
      expect(pool.code).toBe(2)
      expect(pool.errors).toHaveLength(1)
      expect(pool.errors[0]).toContain("bad.yaml")
      const verbose = yield* valet(["run", "hi", "--base-url", "notaurl", "--verbose"])
      expect(verbose.code).toBe(1)
      expect(verbose.errors.length).toBeGreaterThan(1)
      expect(verbose.errors.some((line) => stackFrame.test(line))).toBe(true)
    }))

  it.effect("valet run on an empty answer exits 1 saying so", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue("/v1/chat/completions", Server.json(completion("")))
      const { code, errors } = yield* valet(["run", "hi", "--base-url", `${server.url}/v1`, "--model", "loopback-model"])
      expect(code).toBe(1)
      expect(errors).toEqual(["valet run: the answer is empty"])
      // A real answer: exit 0, nothing on stderr.
      const ok = yield* valet(["run", "hi", "--base-url", `${server.url}/v1`, "--model", "loopback-model"])
      expect(ok).toMatchObject({ code: 0, errors: [] })
    }))

  it.effect("valet eval where every problem failed exits 1 with the count", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      for (let i = 0; i < 4; i++) {
        server.enqueue("/v1/chat/completions", Server.json({ error: { message: "bad key" } }, { status: 401 }))
      }
      const dataset = file("two.jsonl", `{"id":"a","problem":"1+1","reference":"2"}\n{"id":"b","problem":"2+2","reference":"4"}\n`)
      const out = join(dir, "two.results.jsonl")
      const { code, errors } = yield* valet([
        "eval", dataset, "--architecture", "self_refine", "--base-url", `${server.url}/v1`, "--model", "loopback-model",
        "--out", out
      ])
      expect(code).toBe(1)
      expect(errors).toEqual([`valet eval: 2 of 2 problems failed or gave no answer (see ${out})`])
    }))

  it.effect("durable work on a store that is not there: one line naming the server (not its password), exit 1", () =>
    Effect.gen(function*() {
      const dataset = file("durable.jsonl", `{"id":"a","problem":"What is 1 + 2?","reference":"3"}\n`)
      const evaluated = yield* valet(["eval", dataset, "--durable", "postgres://valet:secret@127.0.0.1:1/missing", "--out", join(dir, "durable.out.jsonl")])
      expect(evaluated.code).toBe(1)
      expect(evaluated.errors).toEqual(["valet eval: DurableStoreError: postgres 127.0.0.1:1/missing: cannot connect: PgConnection: Failed to connect"])
      // A runner needs a cluster's database: a SQLite file is refused, naming what to use instead.
      const runner = yield* valet(["runner", "--store", join(dir, "runs.db")])
      expect(runner.code).toBe(1)
      expect(runner.errors).toHaveLength(1)
      expect(runner.errors[0]).toMatch(/^valet runner: --store must be a postgres:\/\/ URL .*valet eval --durable <file>/)
    }))

  it("the process exits with the code and prints no stack (a real `valet` process)", { timeout: 60_000 }, () => {
    const bin = join(import.meta.dirname, "..", "..", "src", "cli", "bin.ts")
    // One `node --import <tsx loader>` process (tsx's launcher starts two).
    const tsxLoader = pathToFileURL(join(import.meta.dirname, "..", "..", "node_modules", "tsx", "dist", "loader.mjs")).href
    const usage = spawnSync(process.execPath, ["--import", tsxLoader, bin, "run", "hi", "--architecture", "nope"], { encoding: "utf8" })
    expect(usage.status).toBe(2)
    expect(usage.stdout).toBe("")
    expect(usage.stderr.trim().split("\n")).toHaveLength(1)
    const failed = spawnSync(process.execPath, ["--import", tsxLoader, bin, "run", "hi", "--base-url", "http://127.0.0.1:1", "--model", "m"], {
      encoding: "utf8"
    })
    expect(failed.status).toBe(1)
    expect(failed.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^valet run: Transport: .*127\.0\.0\.1:1/)
    ])
  })
})
