/**
 * The documentation that comes from the code (scripts/docs.ts): every export of every public module has a JSDoc
 * line with `@since` and `@category`, every public module's comment has a ```ts example, and the examples
 * type-check as a user's files importing `valet` — as Effect's own docgen checks its examples.
 */
import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { declarations, problems, publicModules, withTables } from "../scripts/docs.js"

describe("docs from the code", () => {
  it("every public module documents every export and has an example that type-checks", () => {
    expect(publicModules().length).toBeGreaterThan(40)
    expect(problems()).toEqual([])
  }, 120_000)

  it("the README's option tables are the architectures' declarations (npx tsx scripts/docs.ts tables writes them)", () => {
    const readme = readFileSync(join(import.meta.dirname, "..", "README.md"), "utf8")
    const declared = declarations()
    expect(declared.map((d) => d.name)).toEqual(expect.arrayContaining(["react", "self_refine", "ensemble", "tool_vote", "multi_agent_debate"]))
    // Every architecture has its table, and each is as its declaration says today.
    for (const d of declared) expect(readme).toContain(`<!-- options:${d.name} -->`)
    expect(withTables(readme, declared)).toBe(readme)
  })
})
