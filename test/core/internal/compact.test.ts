import { describe, expect, it } from "@effect/vitest"
import * as Compact from "../../../src/core/internal/compact.js"
import * as Model from "../../../src/core/Model.js"

describe("compaction's size check", () => {
  it("measures again when the first message was replaced (a plan shown in the system message), not only new messages", () => {
    const cache: { measured: Compact.Measured | undefined } = { measured: undefined }
    const user = Model.user("task")
    const reply = Model.assistant("ok")
    // 2 short messages: far under 1,000 tokens.
    expect(Compact.mayExceed({}, [Model.system("short"), user], 1_000, cache)).toBe(false)
    // The same conversation, one message longer, its system message now holding a long plan: over the limit.
    const grown = [Model.system(`short\n\n${"1. [pending] a step of the plan\n".repeat(400)}`), user, reply]
    expect(Compact.mayExceed({}, grown, 1_000, cache)).toBe(true)
  })
})
