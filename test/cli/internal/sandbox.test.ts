import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { commandSandbox, processModeWarning } from "../../../src/cli/internal/sandbox.js"
import * as Sandbox from "../../../src/environment/Sandbox.js"
import { bwrapWorks, skippedWithoutBwrap } from "../../support/processes.js"

const workRoot = mkdtempSync(join(tmpdir(), "valet-cli-sandbox-"))

/** The isolation the commands' sandbox gets under `env`, and the lines it printed. */
const build = (env: Record<string, string>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const layer = commandSandbox({ workRoot }, (line) => Effect.sync(() => void lines.push(line))).pipe(
      Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
    )
    const isolation = yield* Effect.map(Sandbox.info, (info) => info.isolation).pipe(Effect.provide(layer))
    return { isolation, lines }
  })

describe("cli sandbox", () => {
  it.live("says in one line that commands run unisolated when the user opted into process mode", () =>
    Effect.gen(function*() {
      const { isolation, lines } = yield* build({ VALET_SANDBOX_ISOLATION: "process" })
      expect(isolation).toBe("process")
      expect(lines).toEqual([processModeWarning])
    }))

  it.live.skipIf(!bwrapWorks)(`says nothing when commands run in bubblewrap${skippedWithoutBwrap}`, () =>
    Effect.gen(function*() {
      const { isolation, lines } = yield* build({})
      expect(isolation).toBe("bwrap")
      expect(lines).toEqual([])
    }))
})
