/**
 * vitest globalSetup: says once, at the top of the run, which suites are skipped or weakened because a tool is
 * missing on this machine (DESIGN §8: a fresh clone passes `npm ci && npm test` without bubblewrap or Chromium,
 * and says why). The suites decide on their own (`./processes.ts`, `./chromium.ts`) and carry the reason in their
 * test names, but the default reporter shows names only for failures or a single file; this line always shows.
 * With `VALET_REQUIRE_BWRAP=1` / `VALET_REQUIRE_CHROMIUM=1` (CI) a missing tool fails the run here instead.
 * PostgreSQL has its own setup (`./postgresSetup.ts`). Nothing is said when no selected file needs the tool.
 */
import type { TestProject } from "vitest/node"
import { chromiumRequired, chromiumUnavailable } from "./chromium.js"
import { selectedFilesInclude } from "./selection.js"

export default async function setup(project: TestProject): Promise<void> {
  if (await selectedFilesInclude(project, ["bwrapWorks", "testIsolation", "skippedWithoutBwrap"])) {
    // Imported only here: its check runs bwrap once, and throws when VALET_REQUIRE_BWRAP=1 and bwrap does not work.
    const { bwrapUnavailable } = await import("./processes.js")
    if (bwrapUnavailable !== undefined) {
      console.warn(
        `valet: ${bwrapUnavailable}: the sandbox suites run their commands as plain processes (isolation "process") ` +
          "and the bubblewrap-only tests are skipped (VALET_REQUIRE_BWRAP=1 makes this a failure)"
      )
    }
  }
  if (chromiumUnavailable !== undefined && (await selectedFilesInclude(project, ["support/chromium"]))) {
    if (chromiumRequired) throw new Error(`VALET_REQUIRE_CHROMIUM=1 but ${chromiumUnavailable}`)
    console.warn(`valet: the headless-Chromium test of the run viewer is skipped: ${chromiumUnavailable}`)
  }
}
