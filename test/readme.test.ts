import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Result } from "effect"
import * as AgentConfig from "../src/serve/AgentConfig.js"
import { bwrapWorks, skippedWithoutBwrap } from "./support/processes.js"

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

describe("README snippets", () => {
  const readme = readFileSync(`${root}/README.md`, "utf8")
  // Self-contained snippets: they import from "valet" and run themselves.
  const snippets = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((match) => match[1]!)
    .filter((code) => /from "valet(\/\w+)?"/.test(code) && code.includes("Effect.runPromise("))

  it("every valet import path it shows is one the package exports", () => {
    const exported = new Set(Object.keys(JSON.parse(readFileSync(`${root}/package.json`, "utf8")).exports as object))
    const paths = [...readme.matchAll(/from "(valet(?:\/[\w-]+)?)"/g), ...readme.matchAll(/`(valet\/[A-Z]\w+)`/g)]
      .map((match) => match[1]!)
    expect(paths.length).toBeGreaterThan(10)
    for (const path of paths) expect(exported, path).toContain(path === "valet" ? "." : `./${path.slice("valet/".length)}`)
  })

  it("there are runnable snippets to check", () => {
    expect(snippets.length).toBeGreaterThanOrEqual(5)
  })

  // The sandbox fails closed: a snippet that runs one needs bubblewrap (installed in CI, which requires it).
  const needsBwrap = (code: string) => code.includes("Sandbox.layerProcess(")
  const numbered = snippets.map((code, i) => [i + 1, code] as const)
  it.skipIf(!bwrapWorks).each(numbered.filter(([, code]) => needsBwrap(code)))(`snippet %i (sandbox) runs as written${skippedWithoutBwrap}`, runSnippet)
  it.each(numbered.filter(([, code]) => !needsBwrap(code)))("snippet %i runs as written and prints what it says", runSnippet)
})

/** Runs a README snippet inside the package and checks what it prints against its `// "…"` comments. */
function runSnippet(i: number, code: string) {
  // Inside the package, so that `import "valet"` resolves to this package (its `exports`), as for a user.
  const dir = mkdtempSync(join(root, ".readme-snippet-"))
  try {
    const file = join(dir, `snippet-${i}.ts`)
    writeFileSync(file, code)
    const out = execFileSync(process.execPath, ["--import", "tsx", file], { cwd: root, encoding: "utf8" })
    // Every quoted string in a `// "…"` comment of a console.log line must be in what the snippet printed.
    const claims = code.split("\n")
      .filter((line) => line.includes("console.log(") && line.includes("//"))
      .flatMap((line) => [...line.slice(line.lastIndexOf("//")).matchAll(/"([^"]+)"/g)].map((m) => m[1]!))
    expect(claims.length).toBeGreaterThan(0)
    for (const claim of claims) expect(out).toContain(claim)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("README valet.yaml", () => {
  const readme = readFileSync(`${root}/README.md`, "utf8")
  const blocks = [...readme.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((match) => match[1]!)

  it("the file it says is examples/serve/valet.yaml is that file, word for word", () => {
    const at = readme.indexOf("This is [`examples/serve/valet.yaml`]")
    expect(at).toBeGreaterThan(0)
    const block = /```yaml\n([\s\S]*?)```/.exec(readme.slice(at))
    expect(block?.[1]).toBe(readFileSync(`${root}/examples/serve/valet.yaml`, "utf8"))
  })

  it.effect("every valet.yaml it shows is a valid file", () =>
    Effect.sync(() => {
      const files = blocks.filter((block) => /^agents:/m.test(block))
      expect(files.length).toBeGreaterThanOrEqual(2)
      for (const file of files) {
        const parsed = AgentConfig.parse(file, "README.md")
        expect(Result.isSuccess(parsed), Result.isFailure(parsed) ? parsed.failure.message : "").toBe(true)
      }
    }))
})

describe("README embedding", () => {
  it("the blocks it says are examples/embed-http.ts, word for word, are in that file", () => {
    const readme = readFileSync(`${root}/README.md`, "utf8")
    const from = readme.indexOf("The heart of [`examples/embed-http.ts`]")
    const to = readme.indexOf("**A client.**", from)
    const blocks = [...readme.slice(from, to).matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
    expect(blocks.length).toBe(3)
    const example = readFileSync(`${root}/examples/embed-http.ts`, "utf8")
    for (const block of blocks) expect(example).toContain(block)
  })
})
