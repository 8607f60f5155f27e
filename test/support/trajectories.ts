import * as StateStore from "../../src/environment/StateStore.js"
import type * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"

/** A trajectory record of a python step numbered `n`, for store tests. */
export const record = (taskId: string, n = 0): TrajectoryStore.NewRecord => ({
  taskId,
  prompt: `prompt ${n}`,
  stateBefore: StateStore.empty,
  stateAfter: { ...StateStore.empty, openIssues: [`issue ${n}`], nextFocus: "next" },
  modelOutput: {
    raw: `<think>t${n}</think><action>{"command": ["python3", "-c", "print(${n})"]}</action>`,
    think: `t${n}`,
    action: { command: ["python3", "-c", `print(${n})`] },
    stateUpdate: null,
    parseError: null
  },
  sandboxResult: {
    command: ["python3", "-c", `print(${n})`],
    exitCode: 0,
    stdout: `${n}\n`,
    stderr: "",
    durationMs: 12.5,
    timedOut: false,
    isolation: "test",
    diff: "",
    changedFiles: []
  },
  reward: null,
  metrics: { actorLatencySec: 0.25, sandboxFailed: false, inputTokens: 10, outputTokens: 20 }
})
