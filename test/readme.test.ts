import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"

const root = new URL("..", import.meta.url).pathname

describe("README", () => {
  it("its quick start is examples/quickstart.ts, word for word", () => {
    const readme = readFileSync(`${root}/README.md`, "utf8")
    const start = readme.indexOf("## Quick start")
    const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))
    expect(block?.[1]).toBe(readFileSync(`${root}/examples/quickstart.ts`, "utf8"))
  })

  it("the quick start runs as written and prints what the README shows", () => {
    const out = execFileSync(process.execPath, ["--import", "tsx", "examples/quickstart.ts"], {
      cwd: root,
      encoding: "utf8"
    })
    const readme = readFileSync(`${root}/README.md`, "utf8")
    const shown = /It prints:\n\n```\n([\s\S]*?)```/.exec(readme)![1]!.trim().split("\n")
    // Session ids and timings differ run to run; everything else must match.
    const normalize = (line: string) => line.replace(/sess_[0-9a-f…]+/, "sess_").replace(/\d+ ms/g, "N ms")
    expect(out.trim().split("\n").map(normalize)).toEqual(shown.map(normalize))
  })
})
