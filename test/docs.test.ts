/**
 * The documentation that comes from the code (scripts/docs.ts): every export of every public module has a JSDoc
 * line with `@since` and `@category`, every public module's comment has a ```ts example, and the examples
 * type-check as a user's files importing `valet` — as Effect's own docgen checks its examples.
 */
import { describe, expect, it } from "@effect/vitest"
import { problems, publicModules } from "../scripts/docs.js"

describe("docs from the code", () => {
  it("every public module documents every export and has an example that type-checks", () => {
    expect(publicModules().length).toBeGreaterThan(40)
    expect(problems()).toEqual([])
  }, 120_000)
})
