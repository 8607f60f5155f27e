import { describe, expect, it } from "@effect/vitest"
import * as AgentEvent from "../../src/core/AgentEvent.js"

describe("AgentEvent", () => {
  it("session ids name their parent and role", () => {
    expect(AgentEvent.parentSessionId("sess_a__actor_2__critic_1")).toBe("sess_a__actor_2")
    expect(AgentEvent.sessionRole("sess_a__actor_2__critic_1")).toBe("critic_1")
    expect(AgentEvent.parentSessionId("sess_a")).toBeUndefined()
    expect(AgentEvent.isWithin("sess_a__actor_2", "sess_a")).toBe(true)
    expect(AgentEvent.isWithin("sess_ab", "sess_a")).toBe(false)
  })

  it("tree places sub-agents under their parents, even when a parent has emitted nothing of its own", () => {
    const at = (sessionId: string): AgentEvent.AgentEvent => ({ _tag: "ModelCalled", sessionId, timestamp: 0, step: "s" })
    const roots = AgentEvent.tree([at("r"), at("r__a_1"), at("r__a_1__b"), at("r__a_2"), at("other")])
    expect(roots.map((node) => node.sessionId)).toEqual(["r", "other"])
    expect(roots[0]!.children.map((node) => node.sessionId)).toEqual(["r__a_1", "r__a_2"])
    expect(roots[0]!.children[0]!.children.map((node) => node.role)).toEqual(["b"])
  })

  it("format renders one readable line per event", () => {
    const line = AgentEvent.format({
      _tag: "ModelReplied",
      sessionId: "s",
      timestamp: 0,
      step: "react.turn_1",
      text: "",
      toolCalls: [{ id: "1", name: "add", arguments: '{"a":1,"b":2}' }],
      finishReason: "tool_calls",
      usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
      latencyMs: 12
    })
    expect(line).toBe('[s] model replied react.turn_1 in 12 ms, 3 tokens: tool calls: add({"a":1,"b":2})')
  })
})
